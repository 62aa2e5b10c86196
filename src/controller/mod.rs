//! The controllers that run beside the webhook in `helm-locker serve`: leader election, the
//! drift reverter and the HelmRelease registrations and status.

pub(crate) mod author_check;
pub(crate) mod helmreleases;
pub(crate) mod lease;
pub(crate) mod reverter;

use std::time::Duration;

/// How the controllers run.
#[derive(Clone, Debug)]
pub struct ControllerSettings {
    /// Revert drift (the Lease holder only).
    pub revert: bool,
    /// Create deleted objects again (only those proven to be the release's).
    pub recreate: bool,
    /// Namespace and name of the leader-election Lease.
    pub lease_namespace: String,
    pub lease_name: String,
    /// This replica's name in the Lease (the pod name).
    pub identity: String,
    /// How long a Lease not renewed stays with its holder.
    pub lease_duration: Duration,
}
