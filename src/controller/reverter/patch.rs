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
        HelmWriter::Apply(manager) => (
            Write::Apply {
                manager: manager.clone(),
                body: desired.clone(),
            },
            None,
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
