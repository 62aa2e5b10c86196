//! The patch of a live object that puts the chart's values back as Helm's field manager, or its
//! dry run: what the plan previews and the write carries out.

use kube::api::DynamicObject;
use serde_json::Value;

use crate::core::{revert_patch, Change, HelmWriter};

use super::attempt::{Attempt, Failure};
use super::cluster::{Cluster, Write};

/// Puts the chart's values back on a live object as Helm's field manager would: a forced
/// server-side apply, or a JSON patch guarded by the resource version. `dry_run`: the API
/// server answers what it would store, and stores nothing.
pub(super) async fn patch_live(
    cluster: &dyn Cluster,
    attempt: &Attempt<'_>,
    desired: &Value,
    changes: &[Change],
    live: &Value,
    dry_run: bool,
) -> Result<DynamicObject, Failure> {
    let rv = live
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str);
    let (write, guarded) = match &attempt.writer {
        // Guarded by the resourceVersion read, as the JSON patch below is: a forced apply
        // from a stale read would write over a write made since (one a writer rule let
        // through, measured on 1.36.2: the scaler's replicas set back 140 ms after it wrote).
        // The API server takes `metadata.resourceVersion` in an apply body as a precondition
        // and tracks no field for it.
        HelmWriter::Apply(manager) => (
            Write::Apply {
                manager: manager.clone(),
                body: guarded_body(desired, rv),
            },
            rv,
        ),
        HelmWriter::Update(manager) => (
            Write::Json {
                manager: Some(manager.clone()),
                patch: revert_patch(changes, rv),
            },
            rv,
        ),
    };
    cluster
        .patch(&attempt.place, &write, dry_run)
        .await
        .map_err(|e| Failure::of(e, guarded))
}

/// `desired` with `metadata.resourceVersion` set to `rv` (when known).
fn guarded_body(desired: &Value, rv: Option<&str>) -> Value {
    let mut body = desired.clone();
    if let (Some(rv), Some(metadata)) =
        (rv, body.get_mut("metadata").and_then(Value::as_object_mut))
    {
        metadata.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
    body
}
