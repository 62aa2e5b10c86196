//! What request handlers share.

use std::sync::Arc;
use std::time::Duration;

use crate::confirm::Confirm;
use crate::index_store::IndexStore;
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::source::openapi::SharedSchema;

/// Limits and timeouts of the admission port.
#[derive(Clone, Debug)]
pub struct HttpSettings {
    pub max_body_bytes: usize,
    pub read_timeout: Duration,
    pub confirm_timeout: Duration,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            max_body_bytes: 4 * 1024 * 1024,
            read_timeout: Duration::from_secs(10),
            confirm_timeout: Duration::from_secs(2),
        }
    }
}

pub(crate) struct AppState {
    pub index: Arc<IndexStore>,
    /// The lock policy in force (switches flipped at run time included).
    pub config: Arc<crate::live_config::LiveConfig>,
    /// List and map semantics of every kind (embedded, then the API server's).
    pub schema: Arc<SharedSchema>,
    pub metrics: Arc<Metrics>,
    /// Ready once every source scope has listed; failed for good when a task ends.
    pub readiness: Arc<Readiness>,
    pub confirmer: Option<Arc<dyn Confirm>>,
    /// The chart's templates of a revision, read on a denial to name the values key.
    pub chart_files: Option<Arc<crate::chart_files::ChartFilesCache>>,
    /// Where denials, warnings and repairs go to become Events (Kubernetes source only).
    pub attempts: Option<crate::attempts::AttemptSink>,
    /// Where would-be denials are learned (Kubernetes source, `--learn`).
    pub learning: Option<Arc<crate::learning::Recorder>>,
    pub settings: HttpSettings,
    /// The author stamp's key, once loaded (never, without the API server).
    pub stamping: crate::source::author_key::StampingRx,
    /// Since when each release has been pending (for `helm_locker_pending_release_oldest_seconds`).
    pub pending: std::sync::Mutex<crate::server::pending_clock::PendingClock>,
}
