//! Why a write waits or does not happen: a backoff after recent reverts, a fight with another
//! writer (stopped and reported), a lost lease; and the fights counted ([`FightLog`], with the
//! gauge `revert_fights`).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::events::{self, Reason};
use kube::api::DynamicObject;
use kube::Resource;
use tokio::sync::watch;

use crate::core::{other_writer, Fight, FightNext, Fights, Index, FIGHT_REVERTS, FIGHT_WINDOW};
use crate::metrics::Metrics;

use super::attempt::{Attempt, Outcome, SkipReason, Step};
use super::cluster::Cluster;
use super::key::ObjectKey;
use super::worker::Worker;

/// Reverts of the same fields, and the fights with another writer stopped.
pub(super) struct FightLog {
    fights: Mutex<Fights<ObjectKey>>,
    metrics: Arc<Metrics>,
}

impl FightLog {
    pub(super) fn new(metrics: Arc<Metrics>) -> Self {
        FightLog {
            fights: Mutex::new(Fights::default()),
            metrics,
        }
    }

    fn fights(&self) -> std::sync::MutexGuard<'_, Fights<ObjectKey>> {
        self.fights.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A revert of `fought` of `key` written.
    pub(super) fn reverted(&self, key: &ObjectKey, revision: u64, fought: &str) {
        self.fights()
            .reverted(key, revision, fought, Instant::now());
    }

    #[cfg(test)]
    pub(super) fn stopped(&self) -> usize {
        self.fights().stopped()
    }

    /// Forgets reverts and fights past their window.
    pub(super) fn prune(&self) {
        self.fights().prune(Instant::now(), |_| true);
    }

    /// Forgets the reverts and the stopped fights of objects no release renders any more.
    pub(super) fn forget(&self, index: &Index) {
        let mut fights = self.fights();
        fights.prune(Instant::now(), |key| key.claimed(index));
        self.metrics.revert_fights.set(fights.stopped() as i64);
    }
}

/// Why the write waits or does not happen: a backoff after recent reverts, a fight with another
/// writer (stopped, [`crate::core::Fights`]), a lost lease; else on to the write. `fought`:
/// what the write puts back ([`super::plan::Plan::fought`]).
pub(super) async fn wait_or_stop(
    cluster: &dyn Cluster,
    fights: &FightLog,
    leader: &watch::Receiver<bool>,
    worker: &mut Worker,
    attempt: &Attempt<'_>,
    fought: &str,
) -> Step<()> {
    let (job, key) = (attempt.job, attempt.key());
    // A retry after a conflict is the same revert, already counted by the backoff.
    if !job.delayed && attempt.stale.is_none() {
        let delay = worker.backoff.next_delay(key, Instant::now());
        if !delay.is_zero() {
            tracing::info!(object = %key, ?delay, "drifted again soon after a revert; backing off");
            worker.later(job, delay);
            return Err(Outcome::Skipped(SkipReason::BackingOff).into());
        }
    }
    let next = fights
        .fights()
        .next(key, attempt.revision, fought, Instant::now());
    match next {
        FightNext::Revert => {}
        FightNext::Stopped => return Err(Outcome::Skipped(SkipReason::FightLeftToOther).into()),
        FightNext::Stop(stopped) => {
            let live: Option<DynamicObject> = attempt
                .live
                .as_ref()
                .and_then(|l| serde_json::from_value(l.clone()).ok());
            let stopped_now = fights.fights().stopped();
            fights.metrics.revert_fights.set(stopped_now as i64);
            report_fight(cluster, attempt, live.as_ref(), &stopped).await;
            return Err(Outcome::Skipped(SkipReason::FightStopped).into());
        }
    }
    // The last moment to notice a lost lease.
    if !*leader.borrow() {
        return Err(Outcome::Skipped(SkipReason::NotLeader).into());
    }
    Ok(())
}

/// A fight just stopped: a warning log line, and a Warning Event `RevertFight` on the object
/// naming the other writer.
async fn report_fight(
    cluster: &dyn Cluster,
    attempt: &Attempt<'_>,
    live: Option<&DynamicObject>,
    stopped: &Fight,
) {
    let (object, ar, writer) = (&attempt.object, &attempt.place.ar, &attempt.writer);
    let other = live
        .and_then(|l| serde_json::to_value(l).ok())
        .and_then(|l| other_writer(&l, writer.manager(), "helm-locker"))
        .unwrap_or_else(|| "another writer".into());
    tracing::warn!(object = %object.describe(), release = %object.release, revision = stopped.revision, paths = %stopped.paths, other = %other, "a fight with another writer: reverting stopped");
    let Some(live) = live else {
        return;
    };
    let note = crate::core::notes::fight_stopped(
        &stopped.paths,
        object.describe(),
        (&object.release, stopped.revision),
        (FIGHT_REVERTS, humantime::format_duration(FIGHT_WINDOW)),
        other,
    );
    let event = events::event(Reason::RevertFight, note, None);
    if let Err(e) = cluster.publish(&event, &live.object_ref(ar)).await {
        events::not_recorded(Reason::RevertFight, &e);
    }
}
