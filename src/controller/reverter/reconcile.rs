//! One reconcile of a queued object: a fresh read, a plan, the checks, and the write; again at
//! once when the object changed under a guarded write. Each step takes the attempt and the
//! parts it needs, and ends the attempt early the one way ([`Step`]).

use serde_json::Value;
use tokio::sync::watch;

use crate::confirm::Confirm;
use crate::core::{desired_object, held_object, helm_writer_seen, HelmWriter, Index, Status};
use crate::index_store::IndexStore;
use crate::live_config::LiveConfig;
use crate::source::openapi::SharedSchema;

use super::attempt::{Attempt, Conflict, End, Failure, Outcome, RevertError, SkipReason, Step};
use super::authorize::authorize;
use super::cluster::{Cluster, Place};
use super::fights::wait_or_stop;
use super::hold::unknown_author;
use super::key::Job;
use super::parts::Parts;
use super::plan::{plan, preview, settle_held};
use super::revertable::revertable;
use super::worker::Worker;
use super::write::{write_plan, written};

/// How often a revert reads the object again after a concurrent write, before it waits a backoff.
pub(super) const CONFLICT_RETRIES: usize = 8;

/// What a reconcile works with: the reverter's collaborators and parts, borrowed for it. Each
/// step is given the few of them it needs.
pub(super) struct Reconcile<'r> {
    pub(super) cluster: &'r dyn Cluster,
    pub(super) confirm: &'r dyn Confirm,
    pub(super) index: &'r IndexStore,
    pub(super) config: &'r LiveConfig,
    pub(super) schema: &'r SharedSchema,
    pub(super) leader: &'r watch::Receiver<bool>,
    /// Create deleted objects again (`--recreate`).
    pub(super) recreate: bool,
    pub(super) parts: &'r Parts,
}

impl Reconcile<'_> {
    /// [`Self::once`], again at once (reading the object again) when the object changed between
    /// the read and a resourceVersion-guarded write: the deployment controller writes a
    /// Deployment's status right after a `kubectl edit`, and waiting a backoff for that made
    /// client-side reverts take seconds.
    pub(super) async fn run(&self, worker: &mut Worker, job: &Job) -> Result<Outcome, RevertError> {
        let mut stale: Option<Conflict> = None;
        for _ in 0..=CONFLICT_RETRIES {
            match self.once(worker, job, stale.as_ref()).await {
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
                    tracing::debug!(resource_version = %conflict.resource_version, "the object changed between the read and the write; reading it again");
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
    pub(super) async fn once(
        &self,
        worker: &mut Worker,
        job: &Job,
        stale: Option<&Conflict>,
    ) -> Result<Outcome, Failure> {
        match self.steps(worker, job, stale).await {
            Ok(outcome) | Err(End::Done(outcome)) => Ok(outcome),
            Err(End::Failed(failure)) => Err(failure),
        }
    }

    async fn steps(
        &self,
        worker: &mut Worker,
        job: &Job,
        stale: Option<&Conflict>,
    ) -> Step<Outcome> {
        let (cluster, parts) = (self.cluster, self.parts);
        let index = self.index.snapshot();
        let schema = self.schema.load();
        let attempt = self.begin(&index, worker, job, stale).await?;
        let plan = plan(
            cluster,
            (&schema, &parts.proofs, self.recreate),
            worker,
            &attempt,
        )
        .await?;
        confirm_revision(self.confirm, &attempt).await?;
        worker
            .last_writer
            .insert(job.key.clone(), attempt.writer.clone());
        // The revision speaks only with its author's rights (docs/security.md); one whose
        // author is not known writes only what was live, held in `begin`: its apply body is
        // built from the paths that agreed with what was live.
        let desired = match (&attempt.unknown_author, &attempt.live) {
            (Some(held), Some(live)) => {
                held_object(&attempt.object, live, &attempt.ignored(), held)
                    .ok_or(Outcome::Refused)?
            }
            _ => desired_object(&attempt.object, attempt.live.as_ref(), &attempt.ignored()),
        };
        if attempt.unknown_author.is_none() {
            authorize(cluster, &parts.refusals, &attempt, &desired).await?;
        }
        let desired = settle_held(cluster, &attempt, &plan, desired).await?;
        let fixed = preview(
            cluster,
            (&schema, &parts.refusals),
            worker,
            &attempt,
            &plan,
            &desired,
        )
        .await?;
        let fought = plan.fought(attempt.live.is_some());
        wait_or_stop(
            cluster,
            &parts.fights,
            self.leader,
            worker,
            &attempt,
            &fought,
        )
        .await?;
        let (written_object, outcome, note) =
            write_plan(cluster, &attempt, &plan, desired, &fixed).await?;
        written(
            cluster,
            &parts.fights,
            worker,
            &attempt,
            &fought,
            &written_object,
            note,
        )
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
    ) -> Step<Attempt<'a>> {
        let key = &job.key;
        if index
            .find(&key.group, &key.kind, key.namespace.as_deref(), &key.name)
            .is_none()
        {
            return Err(Outcome::Skipped(SkipReason::NoLongerLocked).into());
        }
        let (ar, namespaced) = self.parts.kinds.resource(self.cluster, &key.gvk()).await?;
        let place = Place {
            ar,
            namespaced,
            namespace: key.namespace.clone(),
            name: key.name.clone(),
        };
        let live = read(self.cluster, &place, stale).await?;
        // The release the object is followed for is its owner ([`crate::core::Claims::owner`]):
        // the one its annotations name, else the release of its own namespace; once it is gone,
        // the one it was last seen carrying the annotations of.
        let annotated = || match &live {
            Some(live) => crate::core::live_owner(live),
            None => self.parts.proofs.last_owner(key),
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
            return Err(Outcome::Skipped(SkipReason::NoLongerLocked).into());
        };
        let Some((state, revision)) = revertable(&self.config.load(), index, &object) else {
            return Err(Outcome::Skipped(SkipReason::NotRevertable).into());
        };
        let apply_method = state.newest().and_then(|r| r.apply_method.as_deref());
        let config = self.config.load();
        let now = crate::lock_exception::now();
        let ignore = index.left_alone(&config, &object, now);
        if ignore.iter().any(String::is_empty) {
            return Err(Outcome::Skipped(SkipReason::OpenedByException).into());
        }
        let writer = helm_writer_seen(live.as_ref(), apply_method, worker.last_writer.get(key));
        // What writer rules give to a writer that holds it is not drift; once the rule goes
        // (every object is queued again when the live configuration changes) it is.
        let helm_apply = match &writer {
            HelmWriter::Apply(helm) => Some(helm.as_str()),
            HelmWriter::Update(_) => None,
        };
        let ruled = live.as_ref().map_or_else(Vec::new, |live| {
            index.rule_held(&config, &object, live, helm_apply, now)
        });
        let mut attempt = Attempt {
            job,
            stale,
            index,
            state,
            object,
            revision,
            place,
            live,
            writer,
            ignore,
            ruled,
            unknown_author: None,
        };
        // A revision whose author is not known writes none of its content (docs/security.md).
        let parts = (&self.parts.holds, &self.parts.refusals, &self.parts.proofs);
        let schema = self.schema.load();
        if let Some(held) = unknown_author(self.cluster, &schema, parts, &attempt).await? {
            attempt.ignore.extend(held.iter().cloned());
            attempt.unknown_author = Some(held);
        }
        Ok(attempt)
    }
}

/// Helm may be at work, or the index behind: the API server has the last word. On when the
/// release's newest revision is the attempt's, deployed.
async fn confirm_revision(confirm: &dyn Confirm, attempt: &Attempt<'_>) -> Step<()> {
    match confirm
        .newest_revision(&attempt.object.release, Some(attempt.revision))
        .await?
    {
        Some((fresh, Status::Deployed)) if fresh == attempt.revision => Ok(()),
        _ => Err(Outcome::Skipped(SkipReason::ReleaseChanged).into()),
    }
}

/// A fresh read of the object (`None`: it is gone). `stale`: a write failed on the
/// resourceVersion this read must differ from, else that failure was not a concurrent write.
async fn read(
    cluster: &dyn Cluster,
    place: &Place,
    stale: Option<&Conflict>,
) -> Result<Option<Value>, Failure> {
    let live = cluster.get(place).await?;
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
