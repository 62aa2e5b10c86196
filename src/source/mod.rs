//! Where releases come from: files and folders (offline, `--releases-dir`) or the API server.

pub(crate) mod author_key;
pub(crate) mod files;
pub(crate) mod folder;
pub(crate) mod initial_list;
pub(crate) mod lock_exceptions;
pub(crate) mod openapi;
pub(crate) mod read_ahead;
pub(crate) mod release_object;
pub(crate) mod release_secrets;
pub(crate) mod release_watch;
pub(crate) mod storage_gate;
pub(crate) mod switches;
pub(crate) mod writer_rules;

/// Gives memory freed after a full (re)index back to the system. Indexing a cluster holds its
/// manifests and their parsed form for a moment; an allocator keeps such freed memory for later
/// allocations (mimalloc purges it only when the thread that freed it allocates again), and the
/// process would keep much of the peak as its resident size. So every thread that indexed
/// collects: this one, and each of the pool's that decoded and parsed
/// ([`parallel_map`](crate::core::parallel_map)). The binary's allocator is mimalloc; glibc's heap is
/// trimmed too, for the tests and any embedder that keeps it.
pub(crate) fn return_freed_memory() {
    collect_this_threads_freed_memory();
    rayon::broadcast(|_| collect_this_threads_freed_memory());
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim only releases free heap pages; it takes no pointers.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[allow(unsafe_code)]
fn collect_this_threads_freed_memory() {
    // SAFETY: mi_collect(force) frees and purges only memory no allocation holds; it takes no
    // pointers and is safe to call from any thread, whatever the global allocator.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
}
