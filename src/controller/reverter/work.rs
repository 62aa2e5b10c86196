//! The work loop: takes queued jobs one at a time while leading, paces the writes, and schedules
//! retries after a backoff.

use std::collections::HashMap;
use std::time::{Duration, Instant};
use tracing::Instrument as _;

use tokio::sync::mpsc;

use crate::metrics::{Metrics, RevertResult};

use super::attempt::Outcome;
use super::key::{Job, ObjectKey};
use super::queue::{FairQueue, Line};
use super::reconcile::Reconcile;
use super::worker::Worker;

/// The shortest time between two writes of the reverter, over every object: at most 20 a second.
pub(super) const MIN_WRITE_INTERVAL: Duration = Duration::from_millis(50);

/// The release whose line `job` waits in: the one that renders its object now.
fn line_of(reconcile: &Reconcile<'_>, job: &Job) -> Line {
    let key = &job.key;
    reconcile
        .index
        .current()
        .lookup(&key.group, &key.kind, key.namespace.as_deref(), &key.name)
        .map(|object| (*object.release).clone())
}

/// Reverts queued objects while leading, one release's at a time in turn ([`FairQueue`]);
/// holds them while following.
pub(super) async fn work(
    reconcile: Reconcile<'_>,
    metrics: &Metrics,
    mut rx: mpsc::UnboundedReceiver<Job>,
    tx: mpsc::UnboundedSender<Job>,
) {
    let mut leader = reconcile.leader.clone();
    let mut held: HashMap<ObjectKey, Job> = HashMap::new();
    let mut worker = Worker::new(tx.clone());
    let mut last_write: Option<Instant> = None;
    // Fair across releases: one release's many objects cannot starve another's drift.
    let mut queue = FairQueue::default();
    loop {
        if queue.is_empty() {
            tokio::select! {
                job = rx.recv() => match job {
                    Some(job) => queue.push(line_of(&reconcile, &job), job),
                    None => return,
                },
                changed = leader.changed() => {
                    if changed.is_err() { return; }
                    if *leader.borrow() {
                        for (_, job) in held.drain() {
                            let _ = tx.send(job);
                        }
                    }
                    continue;
                }
            }
        }
        while let Ok(job) = rx.try_recv() {
            queue.push(line_of(&reconcile, &job), job);
        }
        let Some(job) = queue.pop() else { continue };
        if !*leader.borrow() {
            held.insert(job.key.clone(), job);
            continue;
        }
        if let Some(writer) = &job.writer {
            worker.last_writer.insert(job.key.clone(), writer.clone());
        }
        if !worker.scheduled.admit(&job) {
            tracing::debug!(object = ?job.key, "a revert is already scheduled");
            continue;
        }
        // Global rate limit: however many objects drift, at most one write every
        // MIN_WRITE_INTERVAL (a bad chart across 1,000 releases cannot flood the API server).
        if let Some(last) = last_write {
            tokio::time::sleep_until((last + MIN_WRITE_INTERVAL).into()).await;
        }
        let started = Instant::now();
        // Every log line of one revert carries the object it is about.
        let span = tracing::info_span!("reconcile", object = %job.key);
        let result = reconcile.run(&mut worker, &job).instrument(span).await;
        let label = match &result {
            Ok(Outcome::InSync) | Ok(Outcome::Skipped(_)) => None,
            Ok(Outcome::Refused) => Some(RevertResult::Refused),
            Ok(Outcome::Reverted) => Some(RevertResult::Reverted),
            Ok(Outcome::Recreated) => Some(RevertResult::Recreated),
            Ok(Outcome::OwnershipReturned) => Some(RevertResult::OwnershipReturned),
            Err(_) => Some(RevertResult::Failed),
        };
        if matches!(
            result,
            Ok(Outcome::Reverted | Outcome::Recreated | Outcome::OwnershipReturned)
        ) {
            last_write = Some(Instant::now());
        }
        if let Some(result) = label {
            metrics.reverts.inc(result);
        }
        match result {
            Ok(Outcome::Skipped(why)) => {
                tracing::debug!(object = ?job.key, why = %why, "not reverted")
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(object = %job.key, error = %crate::error_chain::with_causes(&e), "revert failed; retrying with backoff");
                let delay = worker
                    .backoff
                    .next_delay(&job.key, Instant::now())
                    .max(Duration::from_secs(1));
                worker.later(&job, delay);
            }
        }
        if started.elapsed() > Duration::from_secs(5) {
            tracing::debug!(elapsed = ?started.elapsed(), "slow revert");
        }
        worker.forget_unclaimed(&reconcile.index.current());
        worker.backoff.prune(Instant::now());
        reconcile.parts.fights.prune();
    }
}
