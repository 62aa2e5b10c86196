//! The chart's templates of a release revision, read on demand to tell a denied user which
//! values key sets a field ([`crate::core::trace_change`]). The index never keeps templates (they would
//! double its memory); a denial reads the revision's Secret once, and a revision never changes,
//! so what was read (or found missing) is kept for the next denial.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use kube::Client;

use crate::confirm::BoxFuture;
use crate::core::{ChartFiles, Locked, ReleaseKey};

/// A revision's chart files that could not be read (a denial then names no values key).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChartFilesError {
    #[error("cannot read the release Secret")]
    Api(#[from] kube::Error),
    #[error("the release does not decode")]
    Decode(#[from] crate::core::DecodeError),
    #[error("cannot read the release folder")]
    Folder(#[from] std::io::Error),
    #[error("the read stopped")]
    Stopped(#[from] tokio::task::JoinError),
}

/// Where a revision's chart files come from: the API server, or the release folder.
pub(crate) trait ReadChartFiles: Send + Sync {
    fn read<'a>(
        &'a self,
        release: &'a ReleaseKey,
        revision: u64,
    ) -> BoxFuture<'a, Result<Option<ChartFiles>, ChartFilesError>>;
}

/// Reads `sh.helm.release.v1.<name>.v<revision>` from the release's namespace: the Secret, or
/// the ConfigMap of that name when no Secret holds it (Helm's ConfigMap driver).
pub(crate) struct KubeChartFiles {
    pub client: Client,
    /// The kinds a revision is read from, in this order (`--release-drivers`).
    pub drivers: Vec<crate::core::ReleaseDriver>,
}

impl KubeChartFiles {
    /// Helm's layer of the revision `name` in `namespace`, from the first kind that holds it.
    async fn helm_layer(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Vec<u8>>, kube::Error> {
        for &driver in &self.drivers {
            let place = crate::core::SecretRef {
                driver,
                ..crate::core::SecretRef::secret(namespace, name)
            };
            // A client hands a Secret's `data` over with its base64 undone: Helm's layer
            // remains.
            let payload = crate::source::release_object::read_stored(&self.client, &place)
                .await?
                .and_then(|stored| stored.payload);
            if payload.is_some() {
                return Ok(payload);
            }
        }
        Ok(None)
    }
}

impl ReadChartFiles for KubeChartFiles {
    fn read<'a>(
        &'a self,
        release: &'a ReleaseKey,
        revision: u64,
    ) -> BoxFuture<'a, Result<Option<ChartFiles>, ChartFilesError>> {
        Box::pin(async move {
            let name = format!("sh.helm.release.v1.{}.v{revision}", release.name);
            let Some(helm_layer) = self.helm_layer(release.storage_namespace(), &name).await?
            else {
                return Ok(None);
            };
            tokio::task::spawn_blocking(move || {
                crate::core::decode_chart_files_payload(&helm_layer)
            })
            .await?
            .map(Some)
            .map_err(ChartFilesError::from)
        })
    }
}

/// Reads the release folder's files (`serve --releases-dir`).
pub(crate) struct FolderChartFiles {
    pub dir: PathBuf,
}

impl ReadChartFiles for FolderChartFiles {
    fn read<'a>(
        &'a self,
        release: &'a ReleaseKey,
        revision: u64,
    ) -> BoxFuture<'a, Result<Option<ChartFiles>, ChartFilesError>> {
        let dir = self.dir.clone();
        let release = release.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let files = crate::source::files::release_files(&[dir])?;
                Ok::<_, ChartFilesError>(files.iter().find_map(|file| {
                    let text = std::fs::read_to_string(file).ok()?;
                    crate::core::find_chart_files(&text, &release, revision)
                }))
            })
            .await?
        })
    }
}

/// Per revision: what was read (its chart files, or that it has none), or the read under way.
type Revisions = HashMap<(ReleaseKey, u64), Arc<tokio::sync::OnceCell<Option<Arc<ChartFiles>>>>>;

/// Revisions read so far, at most [`CACHED_REVISIONS`] (then it starts over). Denials of the
/// same revision that arrive together share one read (a rollout's pods, a loop of `kubectl
/// apply`): the API server sees one GET, not one per denial.
pub(crate) struct ChartFilesCache {
    source: Box<dyn ReadChartFiles>,
    read: Mutex<Revisions>,
    /// The advice made for each denied change, by revision, object and paths: tracing a field
    /// through the templates parses the manifest and the helpers, and a tool that re-applies
    /// its drift (a GitOps sync, a retried CI job) is denied the same change again and again.
    advice: Mutex<HashMap<AdviceKey, Option<Arc<str>>>>,
}

/// A denied change: release, revision, the object's kind and name, each changed path and the
/// value asked for it (the advice's `--set` carries it; never kept for a Secret, whose advice
/// leaves values out).
type AdviceKey = (
    ReleaseKey,
    u64,
    String,
    String,
    Vec<(String, Option<String>)>,
);

const CACHED_REVISIONS: usize = 64;
const CACHED_ADVICE: usize = 1024;

impl ChartFilesCache {
    pub(crate) fn new(source: Box<dyn ReadChartFiles>) -> Self {
        ChartFilesCache {
            source,
            read: Mutex::new(HashMap::new()),
            advice: Mutex::new(HashMap::new()),
        }
    }

    /// Appends to `locked`'s message where the chart sets each changed field (see
    /// [`Locked::chart_advice`]), made once per change and revision. Nothing when the chart
    /// cannot be read now.
    pub(crate) async fn add_advice(&self, locked: &mut Locked) {
        let key = advice_key(locked);
        let kept = self.kept(&key);
        let advice = match kept {
            Some(advice) => advice,
            None => {
                let Some(files) = self.get(&locked.release, locked.revision).await else {
                    return;
                };
                let advice: Option<Arc<str>> = locked.chart_advice(&files).map(Arc::from);
                let mut memo = self.advice.lock().unwrap_or_else(|p| p.into_inner());
                if memo.len() >= CACHED_ADVICE {
                    memo.clear();
                }
                memo.insert(key, advice.clone());
                advice
            }
        };
        if let Some(advice) = advice {
            locked.append_advice(&advice);
        }
    }

    /// [`ChartFilesCache::add_advice`] when the advice for this change and revision is made
    /// already (most denials: the same kubectl edit is tried again), without waiting for
    /// anything; `false` when it is not made yet.
    pub(crate) fn add_kept_advice(&self, locked: &mut Locked) -> bool {
        match self.kept(&advice_key(locked)) {
            Some(advice) => {
                if let Some(advice) = advice {
                    locked.append_advice(&advice);
                }
                true
            }
            None => false,
        }
    }

    fn kept(&self, key: &AdviceKey) -> Option<Option<Arc<str>>> {
        self.advice
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
    }

    /// The chart files of a revision; `None` when it has none or they cannot be read now. A
    /// failed read is not kept: the next denial tries again.
    pub(crate) async fn get(&self, release: &ReleaseKey, revision: u64) -> Option<Arc<ChartFiles>> {
        let key = (release.clone(), revision);
        let cell = {
            let mut read = self.lock();
            if read.len() >= CACHED_REVISIONS && !read.contains_key(&key) {
                read.clear();
            }
            Arc::clone(read.entry(key).or_default())
        };
        let read = cell
            .get_or_try_init(|| async {
                let files = self.source.read(release, revision).await?;
                Ok::<_, ChartFilesError>(files.map(Arc::new))
            })
            .await;
        match read {
            Ok(files) => files.clone(),
            Err(e) => {
                tracing::warn!(release = %release, revision, error = %crate::error_chain::with_causes(&e), "cannot read the release's chart to trace values keys");
                None
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Revisions> {
        self.read.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What the advice on a denial depends on: the release's revision, the object, and each
/// changed path with the value asked for (none for a Secret's: its values are never kept).
fn advice_key(locked: &Locked) -> AdviceKey {
    let secret = locked.target.api_version == "v1" && locked.target.kind == "Secret";
    (
        locked.release.clone(),
        locked.revision,
        locked.target.kind.clone(),
        locked.target.name.clone(),
        locked
            .changes
            .iter()
            .map(|c| {
                let asked = c.requested.as_ref().filter(|_| !secret);
                (c.path.clone(), asked.map(|v| v.to_string()))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts reads, each taking 20 ms; revision 1 has files, 2 has none, 3 fails.
    struct Fake(Arc<AtomicUsize>);
    impl ReadChartFiles for Fake {
        fn read<'a>(
            &'a self,
            _: &'a ReleaseKey,
            revision: u64,
        ) -> BoxFuture<'a, Result<Option<ChartFiles>, ChartFilesError>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                // Slow enough for reads that start together to overlap.
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                match revision {
                    1 => Ok(Some(ChartFiles {
                        chart: "shop".into(),
                        ..Default::default()
                    })),
                    2 => Ok(None),
                    _ => Err(ChartFilesError::Folder(std::io::Error::other(
                        "unreachable",
                    ))),
                }
            })
        }
    }

    #[tokio::test]
    async fn a_revision_is_read_once_and_a_failure_is_tried_again() {
        let reads = Arc::new(AtomicUsize::new(0));
        let cache = ChartFilesCache::new(Box::new(Fake(reads.clone())));
        let shop = ReleaseKey::new("shop", "shop");
        for _ in 0..3 {
            assert_eq!(cache.get(&shop, 1).await.unwrap().chart, "shop");
            assert!(cache.get(&shop, 2).await.is_none());
        }
        assert_eq!(
            reads.load(Ordering::SeqCst),
            2,
            "found and missing are both kept"
        );
        assert!(cache.get(&shop, 3).await.is_none());
        assert!(cache.get(&shop, 3).await.is_none());
        assert_eq!(reads.load(Ordering::SeqCst), 4, "an error is not kept");
    }

    #[tokio::test]
    async fn denials_that_arrive_together_share_one_read() {
        let reads = Arc::new(AtomicUsize::new(0));
        let cache = Arc::new(ChartFilesCache::new(Box::new(Fake(reads.clone()))));
        let shop = ReleaseKey::new("shop", "shop");
        let denials: Vec<_> = (0..8)
            .map(|_| {
                let (cache, shop) = (cache.clone(), shop.clone());
                tokio::spawn(async move { cache.get(&shop, 1).await })
            })
            .collect();
        for denial in denials {
            assert_eq!(denial.await.unwrap().unwrap().chart, "shop");
        }
        assert_eq!(
            reads.load(Ordering::SeqCst),
            1,
            "one read for eight denials"
        );
    }

    /// Advice is made once per change: a denial of the same change again gets the same
    /// message, and another requested value its own `--set`.
    #[tokio::test]
    async fn advice_is_kept_per_change_and_value() {
        use crate::core::{Change, DecisionTarget, OwnerProof, Status};
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/cluster-capture/releases");
        let cache = ChartFilesCache::new(Box::new(FolderChartFiles { dir }));
        let denial = |replicas: u64| Locked {
            release: ReleaseKey::new("shop", "shop"),
            revision: 2,
            status: Status::Deployed,
            object: "Deployment shop/shop-web".into(),
            target: DecisionTarget {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                namespace: Some("shop".into()),
                name: "shop-web".into(),
            },
            delete: false,
            changes: vec![Change {
                path: "/spec/replicas".into(),
                chart: serde_json::json!(2),
                requested: Some(serde_json::json!(replicas)),
            }],
            keyed_paths: vec!["/spec/replicas".into()],
            message: "locked.".into(),
            proof: OwnerProof::Shown,
            wording: None,
        };
        let mut messages = Vec::new();
        for replicas in [7, 7, 9] {
            let mut locked = denial(replicas);
            cache.add_advice(&mut locked).await;
            messages.push(locked.message);
        }
        assert!(messages[0].contains("=7"), "{}", messages[0]);
        assert_eq!(messages[0], messages[1]);
        // Without waiting: only the advice made already, and the same message.
        let mut kept = denial(7);
        assert!(cache.add_kept_advice(&mut kept));
        assert_eq!(kept.message, messages[0]);
        let mut not_made = denial(8);
        assert!(!cache.add_kept_advice(&mut not_made));
        assert_eq!(not_made.message, "locked.");
        assert!(messages[2].contains("=9"), "{}", messages[2]);
        // The kept advice is what the chart says, made afresh.
        let mut fresh = denial(9);
        let files = cache.get(&fresh.release, 2).await.unwrap();
        fresh.add_chart_advice(&files);
        assert_eq!(fresh.message, messages[2]);
    }

    /// The folder source finds the revision among the release files.
    #[tokio::test]
    async fn the_folder_source_reads_the_recorded_release() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/cluster-capture/releases");
        let source = FolderChartFiles { dir };
        let shop = ReleaseKey::new("shop", "shop");
        let files = source.read(&shop, 2).await.unwrap().unwrap();
        assert_eq!(files.chart, "shop");
        assert!(files.templates.contains_key("templates/app.yaml"));
        assert!(source.read(&shop, 99).await.unwrap().is_none());
    }
}
