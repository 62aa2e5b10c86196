//! `--releases-dir`: release Secrets from a folder, re-read when its files change.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::core::Index;
use crate::index_store::IndexStore;
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::source::files;

type Fingerprint = Vec<(PathBuf, Option<SystemTime>, u64)>;

fn fingerprint(dir: &Path) -> Fingerprint {
    files::release_files(&[dir.to_path_buf()])
        .unwrap_or_default()
        .into_iter()
        .map(|f| {
            let meta = std::fs::metadata(&f).ok();
            let modified = meta.as_ref().and_then(|m| m.modified().ok());
            let len = meta.map_or(0, |m| m.len());
            (f, modified, len)
        })
        .collect()
}

/// Reads the folder into a fresh index, logging unusable files by name.
/// The Secrets are parsed into what they lock a part at a time as they are decoded, so the
/// folder's manifests are never all in memory at once.
pub(crate) fn load_index(dir: &Path, metrics: &Metrics) -> Index {
    const PARSED_TOGETHER: usize = 256;
    let mut prepared = Vec::new();
    let mut unparsed = Vec::new();
    let problems = files::load_each(&[dir.to_path_buf()], |secret| {
        unparsed.push(secret);
        if unparsed.len() >= PARSED_TOGETHER {
            prepared.extend(Index::prepare(std::mem::take(&mut unparsed)));
        }
    });
    prepared.extend(Index::prepare(unparsed));
    for problem in &problems {
        metrics.release_decode_errors.inc();
        tracing::warn!(problem = %problem, "skipped release file");
    }
    let mut index = Index::new();
    let reports = index.upsert_prepared(prepared);
    // One line per set of releases, not per object: one release can render thousands.
    for group in crate::core::group_conflicts(reports.iter().flat_map(|r| &r.conflicts)) {
        tracing::warn!(winner = %group.winner, losers = ?group.losers, objects = group.objects, examples = ?group.examples, "objects claimed by several releases (one line per set of releases)");
    }
    index
}

/// Loads the folder now, then polls it every `interval` and swaps in a new index on change.
pub(crate) async fn run(
    dir: PathBuf,
    shared: Arc<IndexStore>,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
    interval: Duration,
) {
    let mut seen = fingerprint(&dir);
    reload(&dir, &shared, &metrics, "releases loaded").await;
    readiness.scope_listed();
    loop {
        tokio::time::sleep(interval).await;
        let now = fingerprint(&dir);
        if now != seen {
            seen = now;
            reload(&dir, &shared, &metrics, "releases reloaded").await;
        }
    }
}

/// Replaces the index with the folder's releases, read and parsed on the blocking pool.
async fn reload(dir: &Path, shared: &Arc<IndexStore>, metrics: &Arc<Metrics>, what: &'static str) {
    let (dir, metrics) = (dir.to_path_buf(), metrics.clone());
    shared
        .update(move |current| {
            *current = load_index(&dir, &metrics);
            tracing::info!(dir = %dir.display(), releases = current.release_count(), objects = current.object_count(), "{what}");
            crate::source::return_freed_memory();
        })
        .await;
}
