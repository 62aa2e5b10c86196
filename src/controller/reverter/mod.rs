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
//! drift and deletes), `work` (the worker: leadership, pacing, retries), `reconcile` (one
//! attempt, step by step, carried in an `attempt::Attempt`), `hold` (a revision whose author is
//! not known), `plan` (what to write, and its dry run), `authorize` (the author's rights),
//! `fights` (backoff, fights, a lost lease), `write` and `recreate` (the writes and their
//! Events). `key` and `proofs` hold what the others share.

mod attempt;
mod authorize;
mod fights;
mod hold;
mod key;
mod plan;
mod proofs;
mod reconcile;
mod recreate;
mod watches;
mod work;
mod write;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::events::Recorder;
use kube::Client;
use tokio::sync::{mpsc, watch};

use crate::confirm::Confirm;
use crate::core::{Config, Index, LockedObject, Mode, ReleaseState, Status};
use crate::metrics::Metrics;
use crate::source::openapi::SharedSchema;

use self::key::ObjectKey;
use self::proofs::Proofs;

/// Which objects the reverter may touch: those of deployed releases whose mode is deny or
/// repair (warn only reports; off does nothing), while the reverter is not paused
/// (`ownership_returned`, which the `revert` switch turns off).
fn revertable<'i>(
    config: &Config,
    index: &'i Index,
    object: &LockedObject,
) -> Option<(&'i ReleaseState, u64)> {
    if !config.ownership_returned {
        return None;
    }
    let state = index.release(&object.release)?;
    let newest = state.newest()?;
    if newest.status != Status::Deployed || state.objects.is_none() {
        return None;
    }
    let policy = config.policy(&state.key, &newest.labels, index.registration(&state.key));
    matches!(policy.mode, Mode::Deny | Mode::Repair).then_some((&**state, newest.revision))
}

pub(crate) struct Reverter {
    pub client: Client,
    pub index: Arc<crate::index_store::IndexStore>,
    /// The policy in force: a switch to `off`, or `revert: false`, takes effect on the next
    /// object ([`revertable`]).
    pub config: Arc<crate::live_config::LiveConfig>,
    pub schema: Arc<SharedSchema>,
    pub confirm: Arc<dyn Confirm>,
    pub leader: watch::Receiver<bool>,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    resources: Mutex<HashMap<GroupVersionKind, (ApiResource, bool)>>,
    /// The time of Helm's managedFields entry last compared with the lock, per object.
    attributions: std::sync::Mutex<HashMap<ObjectKey, String>>,
    /// Create deleted objects again (`--recreate`).
    recreate: bool,
    /// What the watches saw of each locked object's ownership.
    proofs: Mutex<Proofs>,
    /// Whether a revision's author may make a write (SubjectAccessReviews, cached).
    authors: crate::controller::author_check::AuthorChecks,
    /// Objects left drifted because their revision's author may not write them (or is not
    /// known), with the revision's Secret: each reported once per revision.
    refused: Mutex<HashMap<ObjectKey, String>>,
    /// Objects of releases whose newest revision's author is not known: the revision the
    /// reverter first saw each under, and the paths where it then differed from that revision
    /// (held at what is live, never written from it: [`crate::core::held_paths`]).
    held: Mutex<HashMap<ObjectKey, (u64, Vec<String>)>>,
    /// Reverts of the same fields, and the fights with another writer stopped.
    fights: Mutex<crate::core::Fights<ObjectKey>>,
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
        Reverter {
            index,
            config,
            schema,
            confirm,
            leader,
            metrics,
            recorder,
            resources: Mutex::new(HashMap::new()),
            attributions: std::sync::Mutex::new(HashMap::new()),
            recreate,
            proofs: Mutex::new(Proofs::default()),
            authors: crate::controller::author_check::AuthorChecks::new(client.clone()),
            refused: Mutex::new(HashMap::new()),
            held: Mutex::new(HashMap::new()),
            fights: Mutex::new(Default::default()),
            client,
        }
    }

    /// Runs until aborted: watches follow the index; one worker reverts.
    pub(crate) async fn run(self: Arc<Self>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let follow = tokio::spawn(self.clone().follow_index(tx.clone()));
        self.work(rx, tx).await;
        follow.abort();
    }
}
