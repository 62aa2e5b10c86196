//! Why a write waits or does not happen: a backoff after recent reverts, a fight with another
//! writer (stopped and reported), a lost lease.

use std::time::Instant;

use kube::api::DynamicObject;
use kube::core::ApiResource;
use kube::runtime::events::{Event, EventType};
use kube::Resource;
use serde_json::Value;

use crate::core::fight;
use crate::core::index::LockedObject;
use crate::core::revert_plan::HelmWriter;

use super::attempt::{Conflict, Outcome};
use super::key::{Job, ObjectKey};
use super::work::Worker;
use super::Reverter;

impl Reverter {
    pub(super) fn fights(&self) -> std::sync::MutexGuard<'_, fight::Fights<ObjectKey>> {
        self.fights.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Why the write waits or does not happen: a backoff after recent reverts, a fight with
    /// another writer (stopped, [`crate::core::fight`]), a lost lease. `None`: write now.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn hold(
        &self,
        worker: &mut Worker,
        job: &Job,
        stale: Option<&Conflict>,
        object: &LockedObject,
        ar: &ApiResource,
        live: Option<&Value>,
        writer: &HelmWriter,
        revision: u64,
        fought: &str,
    ) -> Option<Outcome> {
        let key = &job.key;
        // A retry after a conflict is the same revert, already counted by the backoff.
        if !job.delayed && stale.is_none() {
            let delay = worker.backoff.next_delay(key, Instant::now());
            if !delay.is_zero() {
                tracing::info!(kind = %key.kind, namespace = ?key.namespace, name = %key.name, ?delay, "drifted again soon after a revert; backing off");
                worker.later(job, delay);
                return Some(Outcome::Skipped("backing off"));
            }
        }
        let next = self.fights().next(key, revision, fought, Instant::now());
        match next {
            fight::Next::Revert => {}
            fight::Next::Stopped => {
                return Some(Outcome::Skipped("a fight with another writer; left to it"))
            }
            fight::Next::Stop(stopped) => {
                let live: Option<DynamicObject> =
                    live.and_then(|l| serde_json::from_value(l.clone()).ok());
                self.report_fight(object, ar, live.as_ref(), writer, &stopped)
                    .await;
                return Some(Outcome::Skipped("a fight with another writer; stopped"));
            }
        }
        // The last moment to notice a lost lease.
        if !*self.leader.borrow() {
            return Some(Outcome::Skipped("not the leader"));
        }
        None
    }

    /// A fight just stopped: a warning log line, a Warning Event `RevertFight` on the object
    /// naming the other writer, and the `revert_fights` gauge.
    pub(super) async fn report_fight(
        &self,
        object: &LockedObject,
        ar: &ApiResource,
        live: Option<&DynamicObject>,
        writer: &HelmWriter,
        stopped: &fight::Fight,
    ) {
        let stopped_now = self.fights().stopped();
        self.metrics.revert_fights.set(stopped_now as i64);
        let other = live
            .and_then(|l| serde_json::to_value(l).ok())
            .and_then(|l| fight::other_writer(&l, writer.manager(), "helm-locker"))
            .unwrap_or_else(|| "another writer".into());
        tracing::warn!(object = %object.describe(), release = %object.release, revision = stopped.revision, paths = %stopped.paths, other = %other, "a fight with another writer: reverting stopped");
        let Some(live) = live else {
            return;
        };
        let event = Event {
            type_: EventType::Warning,
            reason: "RevertFight".into(),
            note: Some(format!(
                "helm-locker stopped reverting {} of {} to release {} revision {}: it put them back {} times within {} and {other} changed them again each time. The admission lock stays; a new revision (helm upgrade) or a restart of helm-locker resumes reverting.",
                stopped.paths,
                object.describe(),
                object.release,
                stopped.revision,
                fight::FIGHT_REVERTS,
                humantime::format_duration(fight::FIGHT_WINDOW),
            )),
            action: "Stop".into(),
            secondary: None,
        };
        if let Err(e) = self.publish(&event, &live.object_ref(ar)).await {
            tracing::debug!(error = %e, "could not record the RevertFight event");
        }
    }
}
