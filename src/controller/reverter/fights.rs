//! Why a write waits or does not happen: a backoff after recent reverts, a fight with another
//! writer (stopped and reported), a lost lease.

use std::time::Instant;

use kube::api::DynamicObject;
use kube::runtime::events::{Event, EventType};
use kube::Resource;

use crate::core::{other_writer, Fight, FightNext, Fights, FIGHT_REVERTS, FIGHT_WINDOW};

use super::attempt::{Attempt, Outcome};
use super::key::ObjectKey;
use super::work::Worker;
use super::Reverter;

impl Reverter {
    pub(super) fn fights(&self) -> std::sync::MutexGuard<'_, Fights<ObjectKey>> {
        self.fights.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Why the write waits or does not happen: a backoff after recent reverts, a fight with
    /// another writer (stopped, [`crate::core::Fights`]), a lost lease. `None`: write now.
    /// `fought`: what the write puts back ([`super::plan::Plan::fought`]).
    pub(super) async fn wait_or_stop(
        &self,
        worker: &mut Worker,
        attempt: &Attempt<'_>,
        fought: &str,
    ) -> Option<Outcome> {
        let (job, key) = (attempt.job, attempt.key());
        // A retry after a conflict is the same revert, already counted by the backoff.
        if !job.delayed && attempt.stale.is_none() {
            let delay = worker.backoff.next_delay(key, Instant::now());
            if !delay.is_zero() {
                tracing::info!(object = %key, ?delay, "drifted again soon after a revert; backing off");
                worker.later(job, delay);
                return Some(Outcome::Skipped("backing off"));
            }
        }
        let next = self
            .fights()
            .next(key, attempt.revision, fought, Instant::now());
        match next {
            FightNext::Revert => {}
            FightNext::Stopped => {
                return Some(Outcome::Skipped("a fight with another writer; left to it"))
            }
            FightNext::Stop(stopped) => {
                let live: Option<DynamicObject> = attempt
                    .live
                    .as_ref()
                    .and_then(|l| serde_json::from_value(l.clone()).ok());
                self.report_fight(attempt, live.as_ref(), &stopped).await;
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
        attempt: &Attempt<'_>,
        live: Option<&DynamicObject>,
        stopped: &Fight,
    ) {
        let (object, ar, writer) = (&attempt.object, &attempt.ar, &attempt.writer);
        let stopped_now = self.fights().stopped();
        self.metrics.revert_fights.set(stopped_now as i64);
        let other = live
            .and_then(|l| serde_json::to_value(l).ok())
            .and_then(|l| other_writer(&l, writer.manager(), "helm-locker"))
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
                FIGHT_REVERTS,
                humantime::format_duration(FIGHT_WINDOW),
            )),
            action: "Stop".into(),
            secondary: None,
        };
        if let Err(e) = self.publish(&event, &live.object_ref(ar)).await {
            tracing::debug!(error = %e, "could not record the RevertFight event");
        }
    }
}
