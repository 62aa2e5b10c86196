//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/`) and the inputs of crashes that
//! fuzzing found and that were fixed (`fuzz/regressions/<target>/`) through the fuzz targets'
//! own bodies (`fuzz/src/lib.rs`), on stable Rust and without libFuzzer: a change that makes any
//! of them panic fails `cargo test`.

use std::path::Path;

#[path = "../../fuzz/src/lib.rs"]
mod harness;

fn replay(target: &str, run: fn(&[u8])) {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut count = 0;
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz.join(dir).join(target)) else {
            continue;
        };
        let mut files: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
        files.sort();
        for file in files {
            let data = std::fs::read(&file).unwrap();
            if let Err(panic) = std::panic::catch_unwind(|| run(&data)) {
                std::panic::resume_unwind(Box::new(format!(
                    "{}: {}",
                    file.display(),
                    panic
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| panic.downcast_ref::<&str>().copied())
                        .unwrap_or("panic")
                )));
            }
            count += 1;
        }
    }
    assert!(count > 0, "no corpus for fuzz target {target}");
}

#[test]
fn review_corpus() {
    replay("review", harness::review);
}

#[test]
fn release_corpus() {
    replay("release", harness::release);
}

#[test]
fn manifest_corpus() {
    replay("manifest", harness::manifest);
}

#[test]
fn quantity_corpus() {
    replay("quantity", harness::quantity);
}

#[test]
fn yaml_corpus() {
    replay("yaml", harness::yaml);
}
