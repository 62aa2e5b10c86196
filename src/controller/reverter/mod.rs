//! The drift reverter: the second line behind the webhook. It watches every kind that locked
//! releases own (discovery + dynamic API; watches come and go with the releases), finds drift
//! with the webhook's own field comparison, and puts the chart's values back as Helm's field
//! manager (see [`crate::core::HelmWriter`]); a deleted object is created again, unless the chart gives it
//! owners (then the garbage collector deleted it with them).
//!
//! It writes nothing a release's author could not (docs/security.md): a release Secret is
//! written by whoever may create Secrets in its namespace, yet the reverter may write every
//! kind everywhere. So it patches only objects that carry the release's `meta.helm.sh`
//! annotations (or carried them when it last saw the same object), and creates a deleted object
//! only when it saw the object carry them before it went, or a HelmRelease in the registration
//! namespace (which only the admin may write) vouches for the release. Anything else is
//! reported: a Warning Event on the release Secret and `helm_locker_missing_objects`.
//!
//! Every replica watches and queues; only the Lease holder writes, and it checks leadership
//! right before each write. A write happens only after a fresh read of the release's newest
//! revision from the API server agrees with the index (deployed, same revision), so the
//! reverter never fights Helm mid-operation or with an index that lags behind an upgrade.
//!
//! Its rooms, in the order a queued object passes them: `watches` (one watch per kind; queues
//! drift and deletes, as `queueing` decides from the index and the policy), `work` (the work loop: leadership, pacing, retries, its `queue` fair across releases; what it remembers
//! between jobs is `worker`'s), `reconcile` (one attempt, step by step, carried in an
//! `attempt::Attempt`), `hold` (a revision whose author is not known), `plan` (what to write,
//! and its dry run), `authorize` (the author's rights), `fights` (backoff, fights, a lost
//! lease), `patch`, `write` and `recreate` (the writes and their Events). `cluster` is the API
//! calls the steps make, behind a trait; `key` names what is queued; `revertable` says which
//! objects the reverter may touch. Each map kept per object is a part in the room that uses
//! it, with its gauge and its `forget` (`proofs`, `hold::Holds`, `authorize::Refusals`,
//! `kinds::KnownKinds`, `watches::Attributions`, `fights::FightLog`), all of them in
//! `parts::Parts`.

mod attempt;
mod authorize;
mod cluster;
mod fights;
mod hold;
mod key;
mod kinds;
mod parts;
mod patch;
mod plan;
mod proofs;
mod queue;
mod queueing;
mod reconcile;
mod recreate;
mod revertable;
#[cfg(test)]
mod tests;
mod watches;
mod work;
mod worker;
mod write;

use std::sync::Arc;

use kube::runtime::events::Recorder;
use kube::Client;
use tokio::sync::{mpsc, watch};
use tracing::Instrument as _;

use crate::confirm::Confirm;
use crate::metrics::Metrics;
use crate::source::openapi::SharedSchema;

use self::cluster::{Cluster, KubeCluster};
use self::parts::Parts;
use self::reconcile::Reconcile;

pub(crate) struct Reverter {
    /// The watches' client; the steps' calls go through `cluster`.
    client: Client,
    index: Arc<crate::index_store::IndexStore>,
    /// The policy in force: a switch to `off`, or `revert: false`, takes effect on the next
    /// object ([`revertable`]).
    config: Arc<crate::live_config::LiveConfig>,
    schema: Arc<SharedSchema>,
    confirm: Arc<dyn Confirm>,
    leader: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
    cluster: Arc<dyn Cluster>,
    /// Create deleted objects again (`--recreate`).
    recreate: bool,
    parts: Parts,
}

impl Reverter {
    // The reverter's long-lived collaborators, each built by the server (src/server/mod.rs) and
    // shared with it: a struct of them would only be this one again under another name. What
    // changes per reconcile travels in an `Attempt`, not here.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        client: Client,
        index: Arc<crate::index_store::IndexStore>,
        config: Arc<crate::live_config::LiveConfig>,
        schema: Arc<SharedSchema>,
        confirm: Arc<dyn Confirm>,
        leader: watch::Receiver<bool>,
        metrics: Arc<Metrics>,
        recorder: Recorder,
        recreate: bool,
    ) -> Self {
        let cluster = Arc::new(KubeCluster {
            client: client.clone(),
            recorder,
            authors: crate::controller::author_check::AuthorChecks::new(client.clone()),
        });
        Reverter {
            index,
            config,
            schema,
            confirm,
            leader,
            parts: Parts::new(&metrics),
            metrics,
            cluster,
            recreate,
            client,
        }
    }

    /// A reconcile's view of the reverter.
    fn reconcile(&self) -> Reconcile<'_> {
        Reconcile {
            cluster: &*self.cluster,
            confirm: &*self.confirm,
            index: &self.index,
            config: &self.config,
            schema: &self.schema,
            leader: &self.leader,
            recreate: self.recreate,
            parts: &self.parts,
        }
    }

    /// Runs until aborted: watches follow the index; one worker reverts.
    pub(crate) async fn run(self: Arc<Self>) {
        let (tx, rx) = mpsc::unbounded_channel();
        // In the reverter's span, as are the per-kind watches it starts (each in its own).
        let follow = tokio::spawn(self.clone().follow_index(tx.clone()).in_current_span());
        work::work(self.reconcile(), &self.metrics, rx, tx).await;
        follow.abort();
    }
}
