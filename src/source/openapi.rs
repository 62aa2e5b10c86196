//! The API server's own schema: `/openapi/v2` (built-in kinds of this cluster's version and
//! every custom resource's schema), read at start and then whenever it changes (the API server
//! answers `304 Not Modified` to a matching `If-None-Match`, so an unchanged document costs one
//! small request per interval). Whenever it changes, the custom resource definitions are listed
//! too, for what their `scale` subresources write (`specReplicasPath`).

use std::sync::Arc;
use std::time::Duration;

use axum::http;
use http_body_util::BodyExt;
use kube::Client;

use crate::core::Schema;
use crate::metrics::{Metrics, SchemaRefresh};

/// The schema in use, replaced whole when the API server's document changes (by [`run`]):
/// the admission server and the reverter read it without a lock.
pub(crate) type SharedSchema = arc_swap::ArcSwap<Schema>;

/// Keeps `schema` equal to the API server's document; runs until aborted. Tells `readiness`
/// once, after the first document is read: no live request is decided with another version's
/// schema.
pub(crate) async fn run(
    client: Client,
    schema: Arc<SharedSchema>,
    metrics: Arc<Metrics>,
    readiness: Arc<crate::readiness::Readiness>,
    interval: Duration,
) {
    let mut first = true;
    metrics.schema_kinds.set(schema.load().kind_count() as i64);
    let mut etag: Option<String> = None;
    loop {
        let result = match fetch(&client, etag.as_deref()).await {
            Ok(None) => SchemaRefresh::Unchanged,
            Ok(Some((document, new_etag))) => {
                // A CRD changed (the document did): read what their `scale` subresources write.
                let crds = match get_json(&client, CRDS).await {
                    Ok(list) => list,
                    Err(e) => {
                        tracing::warn!(error = %crate::error_chain::with_causes(&e), "cannot list custom resource definitions; custom resources' scale is compared at /spec/replicas");
                        serde_json::Value::Null
                    }
                };
                let read = move || {
                    Schema::from_openapi_v2(&document).map(|schema| {
                        schema.with_scale_paths(
                            crds.get("items")
                                .and_then(serde_json::Value::as_array)
                                .into_iter()
                                .flatten(),
                        )
                    })
                };
                match tokio::task::spawn_blocking(read).await {
                    Ok(Ok(read)) => {
                        tracing::info!(
                            kinds = read.kind_count(),
                            "schema read from the API server's /openapi/v2"
                        );
                        metrics.schema_kinds.set(read.kind_count() as i64);
                        schema.store(Arc::new(read));
                        etag = new_etag;
                        if std::mem::take(&mut first) {
                            readiness.scope_listed();
                        }
                        SchemaRefresh::Changed
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "cannot read the API server's /openapi/v2; keeping the schema in use");
                        SchemaRefresh::Error
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "schema task failed");
                        SchemaRefresh::Error
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %crate::error_chain::with_causes(&e), "cannot fetch /openapi/v2; keeping the schema in use");
                SchemaRefresh::Error
            }
        };
        metrics.schema_refreshes.inc(result);
        tokio::time::sleep(interval).await;
    }
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// Why a document could not be read from the API server.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    #[error("cannot build the request for {path}")]
    Request {
        path: &'static str,
        #[source]
        source: http::Error,
    },
    #[error("cannot read {path} from the API server")]
    Kubernetes {
        path: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("{path} answered {status}")]
    Status {
        path: &'static str,
        status: http::StatusCode,
    },
    #[error("cannot read the body of {path}")]
    Body {
        path: &'static str,
        #[source]
        source: kube::Error,
    },
}

async fn get_json(client: &Client, path: &'static str) -> Result<serde_json::Value, FetchError> {
    let request = http::Request::get(path)
        .header("Accept", "application/json")
        .body(Vec::new())
        .map_err(|source| FetchError::Request { path, source })?;
    client
        .request(request)
        .await
        .map_err(|source| FetchError::Kubernetes { path, source })
}

/// The document and its ETag, or `None` when it has not changed since `etag`.
pub(crate) async fn fetch(
    client: &Client,
    etag: Option<&str>,
) -> Result<Option<(Vec<u8>, Option<String>)>, FetchError> {
    const PATH: &str = "/openapi/v2";
    let mut request = http::Request::get(PATH).header("Accept", "application/json");
    if let Some(etag) = etag {
        request = request.header("If-None-Match", etag);
    }
    let request = request
        .body(kube::client::Body::empty())
        .map_err(|source| FetchError::Request { path: PATH, source })?;
    let response = client
        .send(request)
        .await
        .map_err(|source| FetchError::Kubernetes { path: PATH, source })?;
    let status = response.status();
    if status == http::StatusCode::NOT_MODIFIED {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(FetchError::Status { path: PATH, status });
    }
    let new_etag = response
        .headers()
        .get(http::header::ETAG)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|source| FetchError::Body { path: PATH, source })?
        .to_bytes();
    Ok(Some((body.to_vec(), new_etag)))
}
