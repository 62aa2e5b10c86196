//! What the reverter keeps between reconciles: its parts, each in the room that uses it, with
//! its lock, its gauge and its `forget`.

use std::sync::Arc;

use crate::core::Index;
use crate::metrics::Metrics;

use super::authorize::Refusals;
use super::fights::FightLog;
use super::hold::Holds;
use super::kinds::KnownKinds;
use super::proofs::Proofs;
use super::watches::Attributions;

/// What the reverter keeps between reconciles, each part with its lock, its gauge and its
/// `forget`.
pub(super) struct Parts {
    /// What the watches saw of each locked object's ownership.
    pub(super) proofs: Proofs,
    /// Objects held at what was live for a revision whose author is not known.
    pub(super) holds: Holds,
    /// Objects left drifted for their revision's author, each reported once per revision.
    pub(super) refusals: Refusals,
    /// Each kind's resource and scope, as discovery answered.
    pub(super) kinds: KnownKinds,
    /// Helm's managedFields entry last compared with the lock, per object.
    pub(super) attributions: Attributions,
    /// Reverts of the same fields, and the fights with another writer stopped.
    pub(super) fights: FightLog,
}

impl Parts {
    pub(super) fn new(metrics: &Arc<Metrics>) -> Self {
        Parts {
            proofs: Proofs::new(metrics.clone()),
            holds: Holds::new(metrics.clone()),
            refusals: Refusals::new(metrics.clone()),
            kinds: KnownKinds::default(),
            attributions: Attributions::new(metrics.clone()),
            fights: FightLog::new(metrics.clone()),
        }
    }

    /// Forgets, for objects no release renders any more, what the reverter kept of them: the
    /// annotations the watches saw, the attribution last compared, a refusal reported, its
    /// reverts and a fight stopped.
    pub(super) fn forget_unclaimed(&self, index: &Index) {
        self.proofs.forget(index);
        self.attributions.forget(index);
        self.refusals.forget(index);
        self.fights.forget(index);
    }

    /// How many objects the parts keep something of (fights' reverts not counted: only
    /// stopped fights are told).
    #[cfg(test)]
    pub(super) fn kept(&self) -> usize {
        self.proofs.kept()
            + self.holds.kept()
            + self.refusals.kept()
            + self.attributions.kept()
            + self.fights.stopped()
    }
}
