//! Deleted objects: created again as Helm would, or reported once as missing.

use crate::events::{self, Reason};
use kube::api::DynamicObject;
use serde_json::Value;

use crate::core::{recreate_when_deleted, HelmWriter, LockedObject, ReleaseState};

use super::attempt::{Attempt, Failure, Outcome, SkipReason, Step};
use super::cluster::{Cluster, Write};
use super::key::ObjectKey;
use super::proofs::Proofs;

/// Whether a deleted object is created again: not when the chart gives it owners (the garbage
/// collector deleted it with them), not with `--recreate=false` (`recreate` false), and only
/// when the watches saw it carry the release's annotations or a HelmRelease vouches for the
/// release. Else the attempt ends, reported.
pub(super) async fn may_recreate(
    cluster: &dyn Cluster,
    proofs: &Proofs,
    recreate: bool,
    attempt: &Attempt<'_>,
) -> Step<()> {
    let object = &attempt.object;
    let key = ObjectKey::of(object);
    if !recreate_when_deleted(object) {
        return Err(Outcome::Skipped(SkipReason::DeletedWithOwner).into());
    }
    let seen = proofs.carried(&key, &object.release);
    let vouched = attempt.index.registration(&object.release).is_some();
    let why = if !recreate {
        Some("recreation is off (--recreate=false)")
    } else if !seen && !vouched {
        Some("it was never seen carrying the release's meta.helm.sh annotations, and no HelmRelease vouches for the release")
    } else {
        None
    };
    if let Some(why) = why {
        report_missing(cluster, proofs, attempt.state, object, why).await;
        return Err(Outcome::Skipped(SkipReason::LeftToHelmUpgrade).into());
    }
    Ok(())
}

/// Creates a deleted object again: by server-side apply when Helm applies, else by a create.
pub(super) async fn recreate(
    cluster: &dyn Cluster,
    attempt: &Attempt<'_>,
    desired: Value,
) -> Result<DynamicObject, Failure> {
    Ok(match &attempt.writer {
        HelmWriter::Apply(manager) => {
            let write = Write::Apply {
                manager: manager.clone(),
                body: desired,
            };
            cluster.patch(&attempt.place, &write, false).await?
        }
        HelmWriter::Update(manager) => {
            let body: DynamicObject = serde_json::from_value(desired)?;
            cluster.create(&attempt.place, manager, &body).await?
        }
    })
}

/// A deleted object the reverter will not create: reported once (while it stays missing) as a
/// Warning Event on the release's newest Secret, and counted.
pub(super) async fn report_missing(
    cluster: &dyn Cluster,
    proofs: &Proofs,
    state: &ReleaseState,
    object: &LockedObject,
    why: &str,
) {
    if !proofs.missing(ObjectKey::of(object)) {
        return;
    }
    tracing::warn!(object = %object.describe(), release = %object.release, why, "locked object is missing; left to helm upgrade");
    let Some(secret) = state.newest().map(|r| r.secret.clone()) else {
        return;
    };
    let reference = crate::attempts::revision_reference(&secret);
    let note = crate::core::notes::missing(object.describe(), &object.release, why);
    let event = events::event(Reason::LockedObjectMissing, note, None);
    if let Err(e) = cluster.publish(&event, &reference).await {
        events::not_recorded(Reason::LockedObjectMissing, &e);
    }
}
