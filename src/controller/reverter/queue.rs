//! The queue of the work loop: fair across releases. Each release's queued objects wait in
//! their own line, and the loop takes one object of each release in turn, so a release with
//! thousands of objects to revert (a tenant's release of missing objects) delays another
//! release's drift by at most one job, not by all of its own. An object queued again while it
//! waits is one job (its newest writer kept), so watch events of one drift do not pile up.

use std::collections::{HashMap, VecDeque};

use crate::core::ReleaseKey;

use super::key::{Job, ObjectKey};

/// Whose line a job waits in: the release that renders its object (`None`: none does now).
pub(super) type Line = Option<ReleaseKey>;

#[derive(Default)]
pub(super) struct FairQueue {
    lines: HashMap<Line, VecDeque<ObjectKey>>,
    /// Lines with work, in the order they take their next turn.
    turns: VecDeque<Line>,
    /// Each queued object's job (one per object).
    jobs: HashMap<ObjectKey, Job>,
}

impl FairQueue {
    /// Queues `job` in `line`'s line; an object already queued keeps its place, and its job
    /// takes `job`'s writer (when it has one) and waits no longer if either had waited.
    pub(super) fn push(&mut self, line: Line, job: Job) {
        if let Some(queued) = self.jobs.get_mut(&job.key) {
            if job.writer.is_some() {
                queued.writer = job.writer;
            }
            queued.delayed |= job.delayed;
            return;
        }
        let objects = self.lines.entry(line.clone()).or_default();
        if objects.is_empty() {
            self.turns.push_back(line);
        }
        objects.push_back(job.key.clone());
        self.jobs.insert(job.key.clone(), job);
    }

    /// The next job: the first of the line whose turn it is, which then waits behind the others.
    pub(super) fn pop(&mut self) -> Option<Job> {
        let line = self.turns.pop_front()?;
        let objects = self.lines.get_mut(&line)?;
        let key = objects.pop_front()?;
        if objects.is_empty() {
            self.lines.remove(&line);
        } else {
            self.turns.push_back(line);
        }
        self.jobs.remove(&key)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.jobs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str) -> Job {
        Job {
            key: ObjectKey {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("team".into()),
                name: name.into(),
            },
            writer: None,
            delayed: false,
        }
    }

    #[test]
    fn a_release_with_thousands_queued_delays_anothers_drift_by_one_job() {
        let (tenant, admin) = (
            Some(ReleaseKey::new("team", "many")),
            Some(ReleaseKey::new("ops", "grant")),
        );
        let mut queue = FairQueue::default();
        for i in 0..10_000 {
            queue.push(tenant.clone(), job(&format!("missing-{i}")));
        }
        queue.pop();
        // The admin's drift, queued after the tenant's 10,000: next but one.
        queue.push(admin.clone(), job("binding"));
        queue.push(admin, job("role"));
        let next: Vec<String> = (0..4).map(|_| queue.pop().unwrap().key.name).collect();
        assert_eq!(next, ["missing-1", "binding", "missing-2", "role"]);
        // The tenant's own keep their order, and nothing is lost.
        assert_eq!(queue.pop().unwrap().key.name, "missing-3");
        assert_eq!(queue.len(), 10_000 - 4);
        let mut rest = 0;
        while queue.pop().is_some() {
            rest += 1;
        }
        assert_eq!(rest, 10_000 - 4);
        assert!(queue.is_empty());
    }

    #[test]
    fn an_object_queued_again_while_it_waits_is_one_job() {
        let mut queue = FairQueue::default();
        let line = Some(ReleaseKey::new("team", "web"));
        queue.push(line.clone(), job("a"));
        queue.push(line.clone(), job("b"));
        queue.push(
            line.clone(),
            Job {
                delayed: true,
                ..job("a")
            },
        );
        assert_eq!(queue.len(), 2);
        let first = queue.pop().unwrap();
        assert_eq!((first.key.name.as_str(), first.delayed), ("a", true));
        assert_eq!(queue.pop().unwrap().key.name, "b");
        assert!(queue.pop().is_none());
        // Taken, an object can be queued again.
        queue.push(line, job("a"));
        assert_eq!(queue.len(), 1);
    }
}
