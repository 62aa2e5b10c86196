//! What to write for an object, from a fresh read: the drifted fields, the whole object, or
//! ownership handed back to Helm; and the write's dry run, which tells what it would fix.

use serde_json::Value;

use crate::core::{
    describe_paths, drift, fixed_by_write, ownership_return, write_would_fix, written_beyond_drift,
    Change, HelmWriter, OwnershipReturn,
};

use super::attempt::{Attempt, Failure, Outcome};
use super::authorize::Refusal;
use super::key::ObjectKey;
use super::work::Worker;
use super::Reverter;

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

impl Reverter {
    /// What to write, from the fresh read: the drifted fields, the whole object when it is
    /// gone (and may be created), or the fields another manager co-owns with Helm's values
    /// (a server-side release without drift); or why nothing is written.
    pub(super) async fn plan(
        &self,
        worker: &Worker,
        attempt: &Attempt<'_>,
    ) -> Result<Plan, Outcome> {
        let object = &attempt.object;
        let key = ObjectKey::of(object);
        let Some(live) = &attempt.live else {
            self.may_recreate(attempt).await?;
            return Ok(Plan::Revert(vec![]));
        };
        if !self.observe(object, live) {
            return Err(Outcome::Skipped(
                "does not carry the release's meta.helm.sh annotations",
            ));
        }
        let schema = self.schema.load();
        let ignore = attempt.ignored();
        let changes = drift(&schema, object, live, &ignore);
        if changes.is_empty() {
            // Helm's field manager is read from its entry, or was seen as the object went; it
            // is not guessed (the Helm SDK applies under the program's name).
            let known = crate::core::helm_fields(live, None).is_some()
                || matches!(worker.last_writer.get(&key), Some(HelmWriter::Apply(_)));
            return match &attempt.writer {
                HelmWriter::Apply(_) if !known => Err(Outcome::InSync),
                HelmWriter::Apply(helm) => ownership_return(&schema, object, live, helm, &ignore)
                    .map(Plan::ReturnOwnership)
                    .ok_or(Outcome::InSync),
                HelmWriter::Update(_) => Err(Outcome::InSync),
            };
        }
        // The same difference a dry run already showed the API server does not store.
        if worker.not_stored.get(&key) == Some(&(attempt.revision, changes.clone())) {
            return Err(Outcome::InSync);
        }
        Ok(Plan::Revert(changes))
    }

    /// For a revision whose author is not known, the apply body made to change nothing but the
    /// drift: a dry run of the write, and where the API server's answer changes more (a field
    /// the revision leaves out, which a server-side apply drops), the live value given back
    /// ([`crate::core::hold_beyond_drift`]). [`Self::preview`] checks the body again.
    pub(super) async fn settle_held(
        &self,
        attempt: &Attempt<'_>,
        plan: &Plan,
        mut desired: Value,
    ) -> Result<Value, Failure> {
        let (Some(_), Plan::Revert(changes), Some(live)) =
            (&attempt.unknown_author, plan, &attempt.live)
        else {
            return Ok(desired);
        };
        let preview = self.write(attempt, &desired, changes, live, true).await?;
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
        &self,
        worker: &mut Worker,
        attempt: &Attempt<'_>,
        plan: &Plan,
        desired: &Value,
    ) -> Result<Result<String, Outcome>, Failure> {
        let (Plan::Revert(changes), Some(live)) = (plan, &attempt.live) else {
            return Ok(Ok(String::new()));
        };
        let object = &attempt.object;
        let preview = self.write(attempt, desired, changes, live, true).await?;
        let preview = serde_json::to_value(&preview)?;
        // A revision whose author is not known writes nothing but the drift it puts back, as
        // the API server answers the write (docs/security.md).
        if attempt.unknown_author.is_some() {
            let beyond = written_beyond_drift(live, &preview, changes);
            if !beyond.is_empty() {
                if let Some(newest) = attempt.state.newest() {
                    if let crate::core::Authorship::Unknown(why) = &newest.author {
                        self.report_refusal(newest, object, Refusal::Held(*why, &beyond))
                            .await;
                    }
                }
                tracing::warn!(object = %object.describe(), release = %object.release, revision = attempt.revision, paths = %beyond.join(", "), "not reverted: the write would change what a revision whose author is not known holds");
                return Ok(Err(Outcome::Refused));
            }
        }
        let after = drift(&self.schema.load(), object, &preview, &attempt.ignored());
        if !write_would_fix(changes, &after) {
            tracing::debug!(object = %object.describe(), paths = %describe_paths(changes), "differs from the chart only where the API server stores nothing; not reverted");
            worker
                .not_stored
                .insert(attempt.key().clone(), (attempt.revision, changes.clone()));
            return Ok(Err(Outcome::InSync));
        }
        // What the write puts back: the rest differs before and after it.
        Ok(Ok(describe_paths(fixed_by_write(changes, &after))))
    }
}
