//! One reconcile of a queued object: a fresh read, a plan, the checks, and the write; again at
//! once when the object changed under a guarded write.

use kube::api::{Api, DynamicObject};
use serde_json::Value;

use crate::core::{desired_object, held_object, helm_writer_seen, Index, Status};

use super::attempt::{Attempt, Conflict, Failure, Outcome, RevertError};
use super::key::Job;
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

    /// One read, plan and write, step by step; each step may end the attempt with its outcome.
    /// `stale`: the write just failed on a resourceVersion read before; if the object still has
    /// it, the failure was not a concurrent write.
    pub(super) async fn reconcile_once(
        &self,
        worker: &mut Worker,
        job: &Job,
        stale: Option<&Conflict>,
    ) -> Result<Outcome, Failure> {
        let index = self.index.snapshot();
        let attempt = match self.begin(&index, worker, job, stale).await? {
            Ok(attempt) => attempt,
            Err(outcome) => return Ok(outcome),
        };
        let plan = match self.plan(worker, &attempt).await {
            Ok(plan) => plan,
            Err(outcome) => return Ok(outcome),
        };
        if let Some(changed) = self.confirm_revision(&attempt).await? {
            return Ok(changed);
        }
        worker
            .last_writer
            .insert(job.key.clone(), attempt.writer.clone());
        // The revision speaks only with its author's rights (docs/security.md); one whose
        // author is not known writes only what was live, held in `begin`: its apply body is
        // built from the paths that agreed with what was live.
        let desired = match (&attempt.unknown_author, &attempt.live) {
            (Some(held), Some(live)) => {
                match held_object(&attempt.object, live, &attempt.ignored(), held) {
                    Some(body) => body,
                    None => return Ok(Outcome::Refused),
                }
            }
            _ => desired_object(&attempt.object, attempt.live.as_ref(), &attempt.ignored()),
        };
        if attempt.unknown_author.is_none() {
            if let Some(refused) = self.authorize(&attempt, &desired).await? {
                return Ok(refused);
            }
        }
        let desired = self.settle_held(&attempt, &plan, desired).await?;
        let fixed = match self.preview(worker, &attempt, &plan, &desired).await? {
            Ok(fixed) => fixed,
            Err(outcome) => return Ok(outcome),
        };
        let fought = plan.fought(attempt.live.is_some());
        if let Some(held) = self.wait_or_stop(worker, &attempt, &fought).await {
            return Ok(held);
        }
        let (written, outcome, note) = self.write_plan(&attempt, &plan, desired, &fixed).await?;
        self.written(worker, &attempt, &fought, &written, note)
            .await;
        Ok(outcome)
    }

    /// The attempt's first step: the object and its release as the index has them, a fresh
    /// read of the object, and what is left as it is (LockExceptions, an unknown author's
    /// hold); or the outcome when there is nothing to write.
    async fn begin<'a>(
        &self,
        index: &'a Index,
        worker: &Worker,
        job: &'a Job,
        stale: Option<&'a Conflict>,
    ) -> Result<Result<Attempt<'a>, Outcome>, Failure> {
        let key = &job.key;
        if index
            .find(&key.group, &key.kind, key.namespace.as_deref(), &key.name)
            .is_none()
        {
            return Ok(Err(Outcome::Skipped("no longer locked")));
        }
        let (ar, namespaced) = self.resource(&key.gvk()).await?;
        let api = self.api(&ar, namespaced, key.namespace.as_deref());
        let live = self.read(&api, &key.name, stale).await?;
        // The release the object is followed for is its owner ([`crate::core::Claims::owner`]):
        // the one its annotations name, else the release of its own namespace; once it is gone,
        // the one it was last seen carrying the annotations of.
        let annotated = || match &live {
            Some(live) => crate::core::live_owner(live),
            None => self.proofs().last_owner(key),
        };
        let Some(object) = index
            .owned(
                &key.group,
                &key.kind,
                key.namespace.as_deref(),
                &key.name,
                annotated,
            )
            .cloned()
        else {
            return Ok(Err(Outcome::Skipped("no longer locked")));
        };
        let Some((state, revision)) = revertable(&self.config.load(), index, &object) else {
            return Ok(Err(Outcome::Skipped("release not revertable")));
        };
        let apply_method = state.newest().and_then(|r| r.apply_method.as_deref());
        let ignore = index.left_alone(&self.config.load(), &object, crate::lock_exception::now());
        if ignore.iter().any(String::is_empty) {
            return Ok(Err(Outcome::Skipped("opened by a LockException")));
        }
        let writer = helm_writer_seen(live.as_ref(), apply_method, worker.last_writer.get(key));
        let mut attempt = Attempt {
            job,
            stale,
            index,
            state,
            object,
            revision,
            ar,
            namespaced,
            api,
            live,
            writer,
            ignore,
            unknown_author: None,
        };
        // A revision whose author is not known writes none of its content (docs/security.md).
        match self.unknown_author(&attempt).await {
            Ok(Some(held)) => {
                attempt.ignore.extend(held.iter().cloned());
                attempt.unknown_author = Some(held);
            }
            Ok(None) => {}
            Err(outcome) => return Ok(Err(outcome)),
        }
        Ok(Ok(attempt))
    }

    /// Helm may be at work, or the index behind: the API server has the last word. `Some`: the
    /// release's newest revision is not the attempt's, deployed.
    async fn confirm_revision(&self, attempt: &Attempt<'_>) -> Result<Option<Outcome>, Failure> {
        match self
            .confirm
            .newest_revision(&attempt.object.release)
            .await?
        {
            Some((fresh, Status::Deployed)) if fresh == attempt.revision => Ok(None),
            _ => Ok(Some(Outcome::Skipped(
                "the release changed; waiting for the index",
            ))),
        }
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
