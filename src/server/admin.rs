//! The admin port (plain HTTP, separate from the webhook): health, readiness and metrics.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::core::release::Status;
use crate::core::ReleaseKey;
use crate::metrics::StatusLabels;
use crate::readiness::ReadyState;
use crate::server::state::AppState;

pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn readyz(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    match state.readiness.current() {
        ReadyState::Ready => (StatusCode::OK, "ready\n".to_string()),
        ReadyState::Starting { .. } => (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: release Secrets not indexed yet\n".to_string(),
        ),
        ReadyState::Failed(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}; stopping\n"),
        ),
    }
}

async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let index = state.index.snapshot();
    state.metrics.releases.set(index.release_count() as i64);
    state.metrics.objects.set(index.object_count() as i64);
    // Every status is exported, 0 included, so an alert on `failed` never sees an absent series.
    let mut by_status = [0i64; Status::ALL.len()];
    for release in index.releases() {
        if let Some(newest) = release.newest() {
            if let Some(i) = Status::ALL.iter().position(|s| *s == newest.status) {
                by_status[i] += 1;
            }
        }
    }
    for (status, count) in Status::ALL.iter().zip(by_status) {
        state
            .metrics
            .releases_by_status
            .get_or_create(&StatusLabels {
                status: status.as_str(),
            })
            .set(count);
    }
    let pending = index.releases().into_iter().filter_map(|release| {
        let newest = release.newest()?;
        newest
            .status
            .is_helm_at_work()
            .then(|| (release.key.clone(), newest.revision, newest.status))
    });
    let oldest = state
        .pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .oldest(pending, std::time::Instant::now());
    state
        .metrics
        .pending_release_oldest_seconds
        .set(oldest.as_secs() as i64);
    state
        .metrics
        .claim_conflicts
        .set(index.conflicts().len() as i64);
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
}

/// Since when each release has been pending-* or uninstalling, as this process saw it (at a
/// scrape of /metrics): Helm's own timestamps are not written the same way by every version.
#[derive(Default)]
pub(crate) struct PendingClock {
    since: HashMap<ReleaseKey, (u64, Status, Instant)>,
}

impl PendingClock {
    /// The longest any of `pending` (release, revision, status) has been so, at `now`; forgets
    /// the releases that are no longer pending. A new revision or status starts a new clock.
    pub(crate) fn oldest(
        &mut self,
        pending: impl IntoIterator<Item = (ReleaseKey, u64, Status)>,
        now: Instant,
    ) -> Duration {
        let mut seen = HashMap::new();
        for (key, revision, status) in pending {
            let since = match self.since.get(&key) {
                Some((r, s, at)) if *r == revision && *s == status => *at,
                _ => now,
            };
            seen.insert(key, (revision, status, since));
        }
        self.since = seen;
        self.since
            .values()
            .map(|(_, _, at)| now.saturating_duration_since(*at))
            .max()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pending_clock_runs_per_revision_and_status_and_forgets_finished_releases() {
        let mut clock = PendingClock::default();
        let t0 = Instant::now();
        let shop = || ReleaseKey::new("shop", "shop");
        let web = || ReleaseKey::new("web", "web");
        let at = |s| t0 + Duration::from_secs(s);
        assert_eq!(clock.oldest([], t0), Duration::ZERO);
        assert_eq!(
            clock.oldest([(shop(), 2, Status::PendingUpgrade)], t0),
            Duration::ZERO
        );
        let both = || {
            [
                (shop(), 2, Status::PendingUpgrade),
                (web(), 5, Status::Uninstalling),
            ]
        };
        assert_eq!(clock.oldest(both(), at(60)), Duration::from_secs(60));
        assert_eq!(clock.oldest(both(), at(90)), Duration::from_secs(90));
        // shop finished; web's clock keeps running from when it was first seen.
        assert_eq!(
            clock.oldest([(web(), 5, Status::Uninstalling)], at(100)),
            Duration::from_secs(40)
        );
        // shop pending again (a new upgrade): a new clock.
        let again = [
            (shop(), 3, Status::PendingUpgrade),
            (web(), 6, Status::PendingRollback),
        ];
        assert_eq!(clock.oldest(again, at(200)), Duration::ZERO);
    }
}
