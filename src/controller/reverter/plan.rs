//! What to write for an object, from a fresh read: the drifted fields, the whole object, or
//! ownership handed back to Helm; and the write's dry run, which tells what it would fix.

use std::sync::Arc;

use kube::api::{Api, DynamicObject};
use serde_json::Value;

use crate::core::index::{Index, LockedObject, ReleaseState};
use crate::core::ownership::Change;
use crate::core::revert_plan::{self, HelmWriter};

use super::attempt::{Failure, Outcome};
use super::key::ObjectKey;
use super::work::Worker;
use super::Reverter;

/// What a reconcile writes.
pub(super) enum Plan {
    /// The chart's values of the drifted fields; every field when the object is gone.
    Revert(Vec<Change>),
    /// No drift, but another field manager co-owns Helm's fields: hand them back.
    ReturnOwnership(revert_plan::OwnershipReturn),
}

impl Reverter {
    /// What to write, from the fresh read: the drifted fields, the whole object when it is
    /// gone (and may be created), or the fields another manager co-owns with Helm's values
    /// (a server-side release without drift); or why nothing is written.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn plan(
        &self,
        worker: &Worker,
        index: &Index,
        state: &ReleaseState,
        object: &Arc<LockedObject>,
        revision: u64,
        live: Option<&Value>,
        writer: &HelmWriter,
        ignore: &[&str],
    ) -> Result<Plan, Outcome> {
        let key = ObjectKey::of(object);
        let Some(live) = live else {
            if !revert_plan::recreate_when_deleted(object) {
                return Err(Outcome::Skipped("deleted with its owner"));
            }
            let seen = self.proofs().carried.contains_key(&key);
            let vouched = index.registration(&object.release).is_some();
            let why = if !self.recreate {
                Some("recreation is off (--recreate=false)")
            } else if !seen && !vouched {
                Some("it was never seen carrying the release's meta.helm.sh annotations, and no HelmRelease vouches for the release")
            } else {
                None
            };
            if let Some(why) = why {
                self.report_missing(state, object, why).await;
                return Err(Outcome::Skipped("missing; left to helm upgrade"));
            }
            return Ok(Plan::Revert(vec![]));
        };
        if !self.observe(object, live) {
            return Err(Outcome::Skipped(
                "does not carry the release's meta.helm.sh annotations",
            ));
        }
        let schema = self.schema.load();
        let changes = revert_plan::drift(&schema, object, live, ignore);
        if changes.is_empty() {
            // Helm's field manager is read from its entry, or was seen as the object went; it
            // is not guessed (the Helm SDK applies under the program's name).
            let known = crate::core::fields_v1::helm_fields(live, None).is_some()
                || matches!(worker.last_writer.get(&key), Some(HelmWriter::Apply(_)));
            return match writer {
                HelmWriter::Apply(_) if !known => Err(Outcome::InSync),
                HelmWriter::Apply(helm) => {
                    revert_plan::ownership_return(&schema, object, live, helm, ignore)
                        .map(Plan::ReturnOwnership)
                        .ok_or(Outcome::InSync)
                }
                HelmWriter::Update(_) => Err(Outcome::InSync),
            };
        }
        // The same difference a dry run already showed the API server does not store.
        if worker.not_stored.get(&key) == Some(&(revision, changes.clone())) {
            return Err(Outcome::InSync);
        }
        Ok(Plan::Revert(changes))
    }

    /// The revert as a dry run: what it would not change is not stored by the API server as
    /// the chart writes it (`hostNetwork: false`), and writing it would start again after every
    /// backoff. The paths the write puts back, or `None` when it would put back nothing.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn preview(
        &self,
        api: &Api<DynamicObject>,
        object: &LockedObject,
        writer: &HelmWriter,
        desired: &Value,
        changes: &[Change],
        live: &Value,
        ignore: &[&str],
    ) -> Result<Option<String>, Failure> {
        let preview = self
            .write(api, &object.name, writer, desired, changes, live, true)
            .await?;
        let preview = serde_json::to_value(&preview)?;
        let after = revert_plan::drift(&self.schema.load(), object, &preview, ignore);
        if !revert_plan::write_would_fix(changes, &after) {
            tracing::debug!(object = %object.describe(), paths = %revert_plan::describe_paths(changes), "differs from the chart only where the API server stores nothing; not reverted");
            return Ok(None);
        }
        // What the write puts back: the rest differs before and after it.
        Ok(Some(revert_plan::describe_paths(
            revert_plan::fixed_by_write(changes, &after),
        )))
    }
}
