//! What the worker remembers between jobs: the backoff, Helm's writer of each object as last
//! seen, what a dry run showed unstored, and the revert each waiting object has scheduled.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::core::{Backoff, Change, HelmWriter, Index};

use super::key::{Job, ObjectKey};

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

    /// Bounded by what the releases render: when a map holds more objects than the index, the
    /// objects none renders any more are forgotten (a lookup per kept object, only then).
    pub(super) fn forget_unclaimed(&mut self, index: &Index) {
        let objects = index.object_count();
        if self.last_writer.len() > objects || self.not_stored.len() > objects {
            self.last_writer.retain(|key, _| key.claimed(index));
            self.not_stored.retain(|key, _| key.claimed(index));
        }
    }

    #[cfg(test)]
    pub(super) fn kept(&self) -> usize {
        self.last_writer.len() + self.not_stored.len()
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
