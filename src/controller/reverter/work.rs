//! The worker: takes queued jobs one at a time while leading, paces the writes, and schedules
//! retries after a backoff.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};
use tracing::Instrument as _;

use tokio::sync::mpsc;

use crate::core::{Backoff, Change, HelmWriter};
use crate::metrics::RevertResult;

use super::attempt::Outcome;
use super::key::{Job, ObjectKey};
use super::Reverter;

/// The shortest time between two writes of the reverter, over every object: at most 20 a second.
pub(super) const MIN_WRITE_INTERVAL: Duration = Duration::from_millis(50);

/// Objects whose revert waits (a backoff, a retry after an error): drift seen meanwhile is
/// that revert's job. Each such job used to take another step of the backoff, so one fight, or
/// one failure seen through a few watch events, put the object minutes away.
#[derive(Default)]
pub(super) struct Scheduled(HashSet<ObjectKey>);

impl Scheduled {
    /// Whether to reconcile `job` now: a delayed job always (its wait is over), another only
    /// when no revert of its object is waiting.
    pub(super) fn admit(&mut self, job: &Job) -> bool {
        if job.delayed {
            self.0.remove(&job.key);
            true
        } else {
            !self.0.contains(&job.key)
        }
    }

    /// A delayed job for `key` is on its way.
    pub(super) fn wait(&mut self, key: ObjectKey) {
        self.0.insert(key);
    }
}

/// What the worker remembers between jobs.
pub(super) struct Worker {
    pub(super) backoff: Backoff<ObjectKey>,
    /// Helm's writer of each object as last seen: a deleted object has none to read.
    pub(super) last_writer: HashMap<ObjectKey, HelmWriter>,
    /// Differences a dry run showed the API server does not store, per object and revision.
    pub(super) not_stored: HashMap<ObjectKey, (u64, Vec<Change>)>,
    pub(super) scheduled: Scheduled,
    pub(super) tx: mpsc::UnboundedSender<Job>,
}

impl Worker {
    pub(super) fn new(tx: mpsc::UnboundedSender<Job>) -> Self {
        Worker {
            backoff: Backoff::new(
                Duration::from_secs(1),
                Duration::from_secs(300),
                Duration::from_secs(600),
            ),
            last_writer: HashMap::new(),
            not_stored: HashMap::new(),
            scheduled: Scheduled::default(),
            tx,
        }
    }

    /// Queues `job` again after `delay`; drift seen meanwhile is that job's.
    pub(super) fn later(&mut self, job: &Job, delay: Duration) {
        let job = Job {
            delayed: true,
            ..job.clone()
        };
        self.scheduled.wait(job.key.clone());
        let tx = self.tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = tx.send(job);
        });
    }
}

impl Reverter {
    /// Reverts queued objects while leading; holds them while following.
    pub(super) async fn work(
        &self,
        mut rx: mpsc::UnboundedReceiver<Job>,
        tx: mpsc::UnboundedSender<Job>,
    ) {
        let mut leader = self.leader.clone();
        let mut held: HashMap<ObjectKey, Job> = HashMap::new();
        let mut worker = Worker::new(tx.clone());
        let mut last_write: Option<Instant> = None;
        loop {
            let job = tokio::select! {
                job = rx.recv() => match job { Some(job) => job, None => return },
                changed = leader.changed() => {
                    if changed.is_err() { return; }
                    if *leader.borrow() {
                        for (_, job) in held.drain() {
                            let _ = tx.send(job);
                        }
                    }
                    continue;
                }
            };
            if !*leader.borrow() {
                held.insert(job.key.clone(), job);
                continue;
            }
            if let Some(writer) = &job.writer {
                worker.last_writer.insert(job.key.clone(), writer.clone());
                // Bounded by what the releases render: objects none renders are forgotten.
                let index = self.index.snapshot();
                if worker.last_writer.len() > index.object_count() {
                    worker.last_writer.retain(|key, _| key.claimed(&index));
                }
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
            let result = self.reconcile(&mut worker, &job).instrument(span).await;
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
                self.metrics.reverts.inc(result);
            }
            match result {
                Ok(Outcome::Skipped(why)) => {
                    tracing::debug!(object = ?job.key, why, "not reverted")
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
            worker.backoff.prune(Instant::now());
            self.fights().prune(Instant::now(), |_| true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn drift_seen_while_a_revert_waits_is_left_to_it() {
        let key = ObjectKey {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            namespace: Some("shop".into()),
            name: "web".into(),
        };
        let job = |delayed| Job {
            key: key.clone(),
            writer: None,
            delayed,
        };
        let mut scheduled = Scheduled::default();
        assert!(scheduled.admit(&job(false)));
        scheduled.wait(key.clone());
        // Watch events of the same drift (status updates) while the backoff runs.
        assert!(!scheduled.admit(&job(false)));
        assert!(!scheduled.admit(&job(false)));
        // The delayed job itself, then new drift again at once.
        assert!(scheduled.admit(&job(true)));
        assert!(scheduled.admit(&job(false)));
        let mut other = job(false);
        other.key.name = "api".into();
        scheduled.wait(key.clone());
        assert!(scheduled.admit(&other));
    }
}
