//! What to write for an object, from a fresh read: the drifted fields, the whole object, or
//! ownership handed back to Helm; and the write's dry run, which tells what it would fix.

use serde_json::Value;

use crate::core::{
    describe_paths, drift, fixed_by_write, ownership_return, write_would_fix, written_beyond_drift,
    Change, HelmWriter, OwnershipReturn, Schema,
};

use super::attempt::{Attempt, Outcome, SkipReason, Step};
use super::authorize::{Refusal, Refusals};
use super::cluster::Cluster;
use super::key::ObjectKey;
use super::patch::patch_live;
use super::proofs::Proofs;
use super::recreate::may_recreate;
use super::worker::Worker;

/// What a reconcile writes.
pub(super) enum Plan {
    /// The chart's values of the drifted fields; every field when the object is gone.
    Revert(Vec<Change>),
    /// No drift, but another field manager co-owns Helm's fields: hand them back.
    ReturnOwnership(OwnershipReturn),
}

impl Plan {
    /// What a fight over this write is counted on ([`crate::core::Fights`]): the paths put back,
    /// the whole object when it is created again (`exists` false), or the ownership handed back.
    pub(super) fn fought(&self, exists: bool) -> String {
        match (self, exists) {
            (Plan::Revert(changes), true) => describe_paths(changes),
            (Plan::Revert(_), false) => "(the whole object, created again)".to_string(),
            (Plan::ReturnOwnership(back), _) => format!("(ownership of {})", back.describe()),
        }
    }
}

/// What to write, from the fresh read: the drifted fields, the whole object when it is
/// gone (and may be created: `recreate`, [`may_recreate`]), or the fields another manager
/// co-owns with Helm's values (a server-side release without drift); or why nothing is
/// written.
pub(super) async fn plan(
    cluster: &dyn Cluster,
    (schema, proofs, recreate): (&Schema, &Proofs, bool),
    worker: &Worker,
    attempt: &Attempt<'_>,
) -> Step<Plan> {
    let object = &attempt.object;
    let key = ObjectKey::of(object);
    let Some(live) = &attempt.live else {
        may_recreate(cluster, proofs, recreate, attempt).await?;
        return Ok(Plan::Revert(vec![]));
    };
    if !proofs.observe(object, live) {
        return Err(Outcome::Skipped(SkipReason::Unproven).into());
    }
    let ignore = attempt.ignored();
    let changes = drift(schema, object, live, &ignore);
    if changes.is_empty() {
        // Helm's field manager is read from its entry, or was seen as the object went; it
        // is not guessed (the Helm SDK applies under the program's name).
        let known = crate::core::helm_fields(live, None).is_some()
            || matches!(worker.last_writer.get(&key), Some(HelmWriter::Apply(_)));
        return match &attempt.writer {
            HelmWriter::Apply(helm) if known => {
                ownership_return(schema, object, live, helm, &attempt.not_handed_back())
                    .map(Plan::ReturnOwnership)
                    .ok_or(Outcome::InSync.into())
            }
            HelmWriter::Apply(_) | HelmWriter::Update(_) => Err(Outcome::InSync.into()),
        };
    }
    // The same difference a dry run already showed the API server does not store.
    if worker.not_stored.get(&key) == Some(&(attempt.revision, changes.clone())) {
        return Err(Outcome::InSync.into());
    }
    Ok(Plan::Revert(changes))
}

/// For a revision whose author is not known, the apply body made to change nothing but the
/// drift: a dry run of the write, and where the API server's answer changes more (a field
/// the revision leaves out, which a server-side apply drops), the live value given back
/// ([`crate::core::hold_beyond_drift`]). [`preview`] checks the body again.
pub(super) async fn settle_held(
    cluster: &dyn Cluster,
    attempt: &Attempt<'_>,
    plan: &Plan,
    mut desired: Value,
) -> Step<Value> {
    let (Some(_), Plan::Revert(changes), Some(live)) =
        (&attempt.unknown_author, plan, &attempt.live)
    else {
        return Ok(desired);
    };
    let preview = patch_live(cluster, attempt, &desired, changes, live, true).await?;
    let preview = serde_json::to_value(&preview)?;
    let beyond = written_beyond_drift(live, &preview, changes);
    if !beyond.is_empty() {
        tracing::debug!(object = %attempt.object.describe(), paths = %beyond.join(", "), "held at what is live: the revision leaves them out or changes them");
        crate::core::hold_beyond_drift(&mut desired, live, &beyond);
    }
    Ok(desired)
}

/// The revert as a dry run: what it would not change is not stored by the API server as
/// the chart writes it (`hostNetwork: false`), and writing it would start again after every
/// backoff. The paths the write puts back (none to name when the plan creates the object or
/// hands ownership back), or `None` when it would put back nothing: remembered in the
/// worker's `not_stored` for this revision.
pub(super) async fn preview(
    cluster: &dyn Cluster,
    (schema, refusals): (&Schema, &Refusals),
    worker: &mut Worker,
    attempt: &Attempt<'_>,
    plan: &Plan,
    desired: &Value,
) -> Step<String> {
    let (Plan::Revert(changes), Some(live)) = (plan, &attempt.live) else {
        return Ok(String::new());
    };
    let object = &attempt.object;
    let preview = patch_live(cluster, attempt, desired, changes, live, true).await?;
    let preview = serde_json::to_value(&preview)?;
    // A revision whose author is not known writes nothing but the drift it puts back, as
    // the API server answers the write (docs/security.md).
    if attempt.unknown_author.is_some() {
        let beyond = written_beyond_drift(live, &preview, changes);
        if !beyond.is_empty() {
            if let Some(newest) = attempt.state.newest() {
                if let crate::core::Authorship::Unknown(why) = &newest.author {
                    refusals
                        .report(cluster, newest, object, Refusal::Held(*why, &beyond))
                        .await;
                }
            }
            tracing::warn!(object = %object.describe(), release = %object.release, revision = attempt.revision, paths = %beyond.join(", "), "not reverted: the write would change what a revision whose author is not known holds");
            return Err(Outcome::Refused.into());
        }
    }
    let after = drift(schema, object, &preview, &attempt.ignored());
    if !write_would_fix(changes, &after) {
        tracing::debug!(object = %object.describe(), paths = %describe_paths(changes), "differs from the chart only where the API server stores nothing; not reverted");
        worker
            .not_stored
            .insert(attempt.key().clone(), (attempt.revision, changes.clone()));
        return Err(Outcome::InSync.into());
    }
    // What the write puts back: the rest differs before and after it.
    Ok(describe_paths(fixed_by_write(changes, &after)))
}
