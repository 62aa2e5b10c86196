//! The writes: the plan carried out (a patch or a forced apply as Helm's field manager, a
//! deleted object created again, ownership handed back), and the Events about them.

use crate::events::{self, Reason};
use kube::api::DynamicObject;
use kube::Resource;
use serde_json::Value;

use crate::core::OwnershipReturn;

use super::attempt::{Attempt, Failure, Outcome};
use super::cluster::{Cluster, Write};
use super::fights::FightLog;
use super::patch::patch_live;
use super::plan::Plan;
use super::recreate::recreate;
use super::worker::Worker;

/// Carries the plan out: the drifted fields put back (`fixed` names them), the object
/// created again, or ownership handed back to Helm. The object as written, the outcome and
/// the note of the `Reverted` Event.
pub(super) async fn write_plan(
    cluster: &dyn Cluster,
    attempt: &Attempt<'_>,
    plan: &Plan,
    desired: Value,
    fixed: &str,
) -> Result<(DynamicObject, Outcome, String), Failure> {
    let (object, writer, revision) = (&attempt.object, &attempt.writer, attempt.revision);
    Ok(match (plan, &attempt.live) {
        (Plan::Revert(changes), Some(live)) => {
            let written = patch_live(cluster, attempt, &desired, changes, live, false).await?;
            tracing::info!(object = %object.describe(), release = %object.release, revision, paths = %fixed, manager = writer.manager(), "drift reverted");
            let note =
                crate::core::notes::reverted(fixed, &object.release, revision, writer.manager());
            (written, Outcome::Reverted, note)
        }
        (Plan::Revert(_), None) => {
            let written = recreate(cluster, attempt, desired).await?;
            tracing::info!(object = %object.describe(), release = %object.release, revision, manager = writer.manager(), "deleted object recreated");
            let note = crate::core::notes::recreated(&object.release, revision);
            (written, Outcome::Recreated, note)
        }
        (Plan::ReturnOwnership(back), _) => {
            let written = return_ownership(cluster, attempt, back).await?;
            let note = crate::core::notes::ownership_returned(
                writer.manager(),
                &object.release,
                revision,
                back.describe(),
            );
            (written, Outcome::OwnershipReturned, note)
        }
    })
}

/// Writes the object's `managedFields` with the fields another manager co-owned handed back
/// to Helm ([`crate::core::ownership_return`]), if the object is still the one read.
pub(super) async fn return_ownership(
    cluster: &dyn Cluster,
    attempt: &Attempt<'_>,
    back: &OwnershipReturn,
) -> Result<DynamicObject, Failure> {
    let (object, writer, revision) = (&attempt.object, &attempt.writer, attempt.revision);
    let rv = attempt
        .live
        .as_ref()
        .and_then(|l| l.pointer("/metadata/resourceVersion"))
        .and_then(Value::as_str);
    let write = Write::Json {
        manager: None,
        patch: back.patch(rv),
    };
    let written = cluster
        .patch(&attempt.place, &write, false)
        .await
        .map_err(|e| Failure::of(e, rv))?;
    tracing::info!(object = %object.describe(), release = %object.release, revision, manager = writer.manager(), taken = %back.describe(), "fields another manager co-owned handed back to Helm");
    Ok(written)
}

/// After a write: the drift a dry run showed unstored is forgotten, the revert counts
/// toward a fight ([`crate::core::Fights`]), and a Normal Event `Reverted` goes on the object.
pub(super) async fn written(
    cluster: &dyn Cluster,
    fights: &FightLog,
    worker: &mut Worker,
    attempt: &Attempt<'_>,
    fought: &str,
    written: &DynamicObject,
    note: String,
) {
    let key = attempt.key();
    worker.not_stored.remove(key);
    fights.reverted(key, attempt.revision, fought);
    let event = events::event(Reason::Reverted, note, None);
    if let Err(e) = cluster
        .publish(&event, &written.object_ref(&attempt.place.ar))
        .await
    {
        events::not_recorded(Reason::Reverted, &e);
    }
}
