//! Where the index's memory goes: the live heap bytes of an index built from a file of release
//! Secrets, by part, counted by a global allocator that tallies what is allocated and freed
//! (requested sizes: the allocator's own overhead and the process's RSS come on top).
//!
//!   cargo run --release -p helm-locker-core --example index_memory -- RELEASES.json
//!
//! `examples/synth_releases.rs` writes such files (`scripts/scale.sh` uses it).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Relaxed);
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / 1_048_576.0)
}

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: index_memory RELEASES.json");
        std::process::exit(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("index_memory: {path}: {e}");
            std::process::exit(1);
        }
    };
    let secrets: Vec<_> = match helm_locker_core::parse_release_file(&text) {
        Ok(results) => results.into_iter().filter_map(Result::ok).collect(),
        Err(e) => {
            eprintln!("index_memory: {path}: {e}");
            std::process::exit(1);
        }
    };
    drop(text);
    let manifests: usize = secrets.iter().map(|s| s.release.manifest.len()).sum();
    let index = helm_locker_core::Index::from_secrets(secrets);
    let objects: Vec<_> = index
        .releases()
        .iter()
        .flat_map(|r| r.objects.iter().flatten().cloned())
        .collect();
    let content = helm_locker_core::test_util::packed_tree_bytes(&index);
    let objects_list_bytes =
        objects.capacity() * std::mem::size_of::<std::sync::Arc<helm_locker_core::LockedObject>>();
    let held = LIVE.load(Relaxed);
    drop(index);
    let without_index = LIVE.load(Relaxed);
    drop(objects);
    let without_objects = LIVE.load(Relaxed);
    // The list of the objects made here is freed with them: not the index's.
    let list = objects_list_bytes;
    let records = without_index - without_objects - list;
    let maps = held - without_index;
    let whole = maps + records;
    println!("releases file: {path}");
    println!("newest manifests:            {}", mib(manifests));
    println!(
        "index, live heap:            {} ({:.2}x the manifests)",
        mib(whole),
        whole as f64 / manifests as f64
    );
    println!("  chart content (frames):    {}", mib(content));
    println!("  object records, names:     {}", mib(records - content));
    println!("  maps and release states:   {}", mib(maps));
}
