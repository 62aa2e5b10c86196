//! The admin port (plain HTTP, separate from the webhook): health, readiness and metrics.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::core::Status;
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
    let store = state.index.clone();
    // Taken on the blocking pool: after a change of the index it walks every release and object.
    let Ok(census) = tokio::task::spawn_blocking(move || store.census()).await else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "the census of the index failed\n".to_string(),
        );
    };
    // Every status is exported, 0 included, so an alert on `failed` never sees an absent series.
    for (status, count) in Status::ALL.iter().zip(census.by_status) {
        state
            .metrics
            .releases_by_status
            .get_or_create(&StatusLabels {
                status: status.as_str(),
            })
            .set(count as i64);
    }
    state
        .metrics
        .unknown_author_releases
        .set(census.unknown_authors as i64);
    let now_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let oldest = state
        .pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .oldest(
            census.pending.iter().cloned(),
            std::time::Instant::now(),
            now_unix,
        );
    state
        .metrics
        .pending_release_oldest_seconds
        .set(oldest.as_secs() as i64);
    state.metrics.claim_conflicts.set(census.conflicts as i64);
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
}
