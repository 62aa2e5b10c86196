//! One reconcile of a queued object: a fresh read, a plan, the checks, and the write; again at
//! once when the object changed under a guarded write.

use std::time::Instant;

use kube::api::{Api, DynamicObject};
use kube::runtime::events::{Event, EventType};
use kube::Resource;
use serde_json::Value;

use crate::core::release::Status;
use crate::core::revert_plan;

use super::attempt::{Conflict, Failure, Outcome, RevertError};
use super::key::Job;
use super::plan::Plan;
use super::work::Worker;
use super::{revertable, Reverter};

/// How often a revert reads the object again after a concurrent write, before it waits a backoff.
pub(super) const CONFLICT_RETRIES: usize = 8;

impl Reverter {
    /// [`Self::reconcile_once`], again at once (reading the object again) when the object
    /// changed between the read and a resourceVersion-guarded write: the deployment controller
    /// writes a Deployment's status right after a `kubectl edit`, and waiting a backoff for that
    /// made client-side reverts take seconds.
    pub(super) async fn reconcile(
        &self,
        worker: &mut Worker,
        job: &Job,
    ) -> Result<Outcome, RevertError> {
        let mut stale: Option<Conflict> = None;
        for _ in 0..=CONFLICT_RETRIES {
            match self.reconcile_once(worker, job, stale.as_ref()).await {
                Ok(outcome) => return Ok(outcome),
                Err(Failure::Error(e)) => return Err(e),
                Err(Failure::Unchanged) => {
                    return Err(match stale {
                        Some(conflict) => RevertError::Api(conflict.error),
                        None => RevertError::Raced {
                            tries: 0,
                            source: None,
                        },
                    })
                }
                Err(Failure::Conflict(conflict)) => {
                    tracing::debug!(kind = %job.key.kind, namespace = ?job.key.namespace, name = %job.key.name, resource_version = %conflict.resource_version, "the object changed between the read and the write; reading it again");
                    stale = Some(conflict);
                }
            }
        }
        Err(RevertError::Raced {
            tries: CONFLICT_RETRIES + 1,
            source: stale.map(|c| c.error),
        })
    }

    /// One read, plan and write. `stale`: the write just failed on a resourceVersion read
    /// before; if the object still has it, the failure was not a concurrent write.
    pub(super) async fn reconcile_once(
        &self,
        worker: &mut Worker,
        job: &Job,
        stale: Option<&Conflict>,
    ) -> Result<Outcome, Failure> {
        let key = &job.key;
        let index = self.index.snapshot();
        let Some(object) = index
            .lookup(&key.group, &key.kind, key.namespace.as_deref(), &key.name)
            .cloned()
        else {
            return Ok(Outcome::Skipped("no longer locked"));
        };
        let Some((state, revision)) = revertable(&self.config, &index, &object) else {
            return Ok(Outcome::Skipped("release not revertable"));
        };
        let apply_method = state.newest().and_then(|r| r.apply_method.clone());
        let (ar, namespaced) = self.resource(&key.gvk()).await?;
        let api = self.api(&ar, namespaced, key.namespace.as_deref());
        let live = self.read(&api, &key.name, stale).await?;
        let mut ignore = index.left_alone(&self.config, &object, crate::lock_exception::now());
        if ignore.iter().any(String::is_empty) {
            return Ok(Outcome::Skipped("opened by a LockException"));
        }
        // A revision whose author is not known writes none of its content (docs/security.md).
        let unknown_author = match self
            .unknown_author(state, &object, live.as_ref(), &ignore)
            .await
        {
            Ok(held) => held.is_some_and(|held| {
                ignore.extend(held);
                true
            }),
            Err(outcome) => return Ok(outcome),
        };
        let ignore: Vec<&str> = ignore.iter().map(String::as_str).collect();
        let writer = revert_plan::helm_writer_seen(
            live.as_ref(),
            apply_method.as_deref(),
            worker.last_writer.get(key),
        );
        let plan = self
            .plan(
                worker,
                &index,
                state,
                &object,
                revision,
                live.as_ref(),
                &writer,
                &ignore,
            )
            .await;
        let plan = match plan {
            Ok(plan) => plan,
            Err(outcome) => return Ok(outcome),
        };
        // Helm may be at work, or the index behind: the API server has the last word.
        match self.confirm.newest_revision(&object.release).await? {
            Some((fresh, Status::Deployed)) if fresh == revision => {}
            _ => {
                return Ok(Outcome::Skipped(
                    "the release changed; waiting for the index",
                ))
            }
        }
        worker.last_writer.insert(key.clone(), writer.clone());
        let desired = revert_plan::desired_object(&object, live.as_ref(), &ignore);
        // The revision speaks only with its author's rights (docs/security.md); one whose
        // author is not known writes only what was live, held above.
        if !unknown_author {
            if let Some(refused) = self
                .authorize(&index, state, &object, &ar, live.is_some(), &desired)
                .await?
            {
                return Ok(refused);
            }
        }
        let fixed = match (&plan, &live) {
            (Plan::Revert(changes), Some(live)) => {
                let preview = self
                    .preview(&api, &object, &writer, &desired, changes, live, &ignore)
                    .await?;
                match preview {
                    Some(fixed) => fixed,
                    None => {
                        worker
                            .not_stored
                            .insert(key.clone(), (revision, changes.clone()));
                        return Ok(Outcome::InSync);
                    }
                }
            }
            _ => String::new(),
        };
        let fought = match (&plan, &live) {
            (Plan::Revert(changes), Some(_)) => revert_plan::describe_paths(changes),
            (Plan::Revert(_), None) => "(the whole object, created again)".to_string(),
            (Plan::ReturnOwnership(back), _) => format!("(ownership of {})", back.describe()),
        };
        if let Some(held) = self
            .hold(
                worker,
                job,
                stale,
                &object,
                &ar,
                live.as_ref(),
                &writer,
                revision,
                &fought,
            )
            .await
        {
            return Ok(held);
        }
        let (written, outcome, note) = match (&plan, &live) {
            (Plan::Revert(changes), Some(live)) => {
                let written = self
                    .write(&api, &key.name, &writer, &desired, changes, live, false)
                    .await?;
                tracing::info!(object = %object.describe(), release = %object.release, revision, paths = %fixed, manager = writer.manager(), "drift reverted");
                let note = format!("helm-locker put back {fixed} to the values of release {} revision {revision}, as field manager {}", object.release, writer.manager());
                (written, Outcome::Reverted, note)
            }
            (Plan::Revert(_), None) => {
                let written = self.recreate(&api, &key.name, &writer, desired).await?;
                tracing::info!(object = %object.describe(), release = %object.release, revision, manager = writer.manager(), "deleted object recreated");
                let note = format!(
                    "helm-locker recreated this object from release {} revision {revision}",
                    object.release
                );
                (written, Outcome::Recreated, note)
            }
            (Plan::ReturnOwnership(back), live) => {
                let written = self
                    .return_ownership(&api, &object, back, live.as_ref(), &writer, revision)
                    .await?;
                let note = format!("helm-locker handed back to Helm's field manager {} what another manager co-owned with the values of release {} revision {revision}: {}", writer.manager(), object.release, back.describe());
                (written, Outcome::OwnershipReturned, note)
            }
        };
        worker.not_stored.remove(key);
        self.fights()
            .reverted(key, revision, &fought, Instant::now());
        let event = Event {
            type_: EventType::Normal,
            reason: "Reverted".into(),
            note: Some(note),
            action: "Revert".into(),
            secondary: None,
        };
        if let Err(e) = self.publish(&event, &written.object_ref(&ar)).await {
            tracing::debug!(error = %e, "could not record the Reverted event");
        }
        Ok(outcome)
    }

    /// A fresh read of the object (`None`: it is gone). `stale`: a write failed on the
    /// resourceVersion this read must differ from, else that failure was not a concurrent write.
    pub(super) async fn read(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        stale: Option<&Conflict>,
    ) -> Result<Option<Value>, Failure> {
        let live = api.get_opt(name).await?;
        let live = live.as_ref().map(serde_json::to_value).transpose()?;
        if let (Some(stale), Some(live)) = (stale, &live) {
            let rv = live
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str);
            if rv == Some(stale.resource_version.as_str()) {
                return Err(Failure::Unchanged);
            }
        }
        Ok(live)
    }
}
