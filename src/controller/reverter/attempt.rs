//! One attempt at reconciling a queued object: what it works with ([`Attempt`]), how it ends
//! ([`Outcome`]), or why it failed (an error, a conflict with a concurrent write); and how a
//! step of it ends the attempt early ([`Step`]).

use std::sync::Arc;

use serde_json::Value;

use crate::core::{HelmWriter, Index, LockedObject, ReleaseState};

use super::cluster::Place;
use super::key::{Job, ObjectKey};

/// What one attempt at reconciling one object works with, read once as it begins: the job, the
/// index as it then stood, the object and its release, its API, and the object as the API
/// server has it now. What lasts from one attempt to the next (the client, the config, the
/// metrics, what the watches saw) is the [`Reverter`](super::Reverter)'s.
pub(super) struct Attempt<'a> {
    pub(super) job: &'a Job,
    /// A write of this job just failed on a resourceVersion read before: if the object still
    /// has it, the failure was not a concurrent write.
    pub(super) stale: Option<&'a Conflict>,
    /// The index as the attempt began.
    pub(super) index: &'a Index,
    /// The object's release, revertable.
    pub(super) state: &'a ReleaseState,
    pub(super) object: Arc<LockedObject>,
    /// The release's newest revision: the one written from.
    pub(super) revision: u64,
    /// Where the object lives; whether discovery says the kind is namespaced: every question
    /// about the write is asked in that scope.
    pub(super) place: Place,
    /// The fresh read; `None`: the object is gone.
    pub(super) live: Option<Value>,
    /// Helm's field manager, as the write speaks.
    pub(super) writer: HelmWriter,
    /// Paths left as they are: opened by a LockException, or held for an unknown author.
    pub(super) ignore: Vec<String>,
    /// Paths writer rules give to the writer holding them: not drift, and on a release Helm
    /// applies server-side handed back to Helm's entry, value kept, so that the next `helm
    /// upgrade` does not conflict with the writer ([`crate::core::rule_held_paths`]).
    pub(super) ruled: Vec<String>,
    /// The newest revision's author is not known: it writes none of its content, only what was
    /// live where it holds: these paths ([`crate::core::held_object`]).
    pub(super) unknown_author: Option<Vec<String>>,
}

impl Attempt<'_> {
    pub(super) fn key(&self) -> &ObjectKey {
        &self.job.key
    }

    /// [`Attempt::ignore`] and [`Attempt::ruled`], as the comparisons take them: not drift.
    pub(super) fn ignored(&self) -> Vec<&str> {
        self.ignore
            .iter()
            .chain(&self.ruled)
            .map(String::as_str)
            .collect()
    }

    /// [`Attempt::ignore`] alone: what is not handed back to Helm.
    pub(super) fn not_handed_back(&self) -> Vec<&str> {
        self.ignore.iter().map(String::as_str).collect()
    }
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    InSync,
    /// Left as it is, for this reason (logged at debug, not counted).
    Skipped(SkipReason),
    /// The revision's author may not make the write, or is not known.
    Refused,
    Reverted,
    Recreated,
    /// Fields another manager co-owned with the chart's values are Helm's alone again.
    OwnershipReturned,
}

/// Why an object was left as it is; its words are the log line's (`not reverted`, `why`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SkipReason {
    /// Deleted with its owner (a garbage-collected dependent): not re-created.
    DeletedWithOwner,
    /// Missing, and left to `helm upgrade` (never seen carrying the release's annotations).
    LeftToHelmUpgrade,
    /// The release's state is not one the reverter writes back (not deployed, or failed).
    NotRevertable,
    /// A namespaced kind whose object names no namespace.
    NoNamespace,
    /// Its last revert failed and the backoff has not passed.
    BackingOff,
    /// Another writer changes it back each time: left to it until the fight is over.
    FightLeftToOther,
    /// The fight was just stopped.
    FightStopped,
    /// This replica is not the leader.
    NotLeader,
    /// It does not carry the release's `meta.helm.sh` annotations: Helm neither made nor
    /// adopted it.
    Unproven,
    /// No release locks it any more.
    NoLongerLocked,
    /// An open LockException opens it.
    OpenedByException,
    /// Its release changed since the job was queued: the index is read again first.
    ReleaseChanged,
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SkipReason::DeletedWithOwner => "deleted with its owner",
            SkipReason::LeftToHelmUpgrade => "missing; left to helm upgrade",
            SkipReason::NotRevertable => "release not revertable",
            SkipReason::NoNamespace => "no namespace for a namespaced kind",
            SkipReason::BackingOff => "backing off",
            SkipReason::FightLeftToOther => "a fight with another writer; left to it",
            SkipReason::FightStopped => "a fight with another writer; stopped",
            SkipReason::NotLeader => "not the leader",
            SkipReason::Unproven => "does not carry the release's meta.helm.sh annotations",
            SkipReason::NoLongerLocked => "no longer locked",
            SkipReason::OpenedByException => "opened by a LockException",
            SkipReason::ReleaseChanged => "the release changed; waiting for the index",
        })
    }
}

/// What every step of an attempt returns: what it found for the next, or the attempt's end.
pub(super) type Step<T> = Result<T, End>;

/// How an attempt ends early: with its outcome, or failed.
#[derive(Debug)]
pub(super) enum End {
    Done(Outcome),
    Failed(Failure),
}

impl From<Outcome> for End {
    fn from(outcome: Outcome) -> Self {
        End::Done(outcome)
    }
}

/// A step's failure ends the attempt failed.
macro_rules! ends_failed {
    ($($error:ty),*) => {$(
        impl From<$error> for End {
            fn from(error: $error) -> Self {
                End::Failed(error.into())
            }
        }
    )*};
}
ends_failed!(
    Failure,
    RevertError,
    kube::Error,
    serde_json::Error,
    crate::confirm::ConfirmError
);

/// Why a revert failed: its retry waits a backoff.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RevertError {
    #[error("cannot find the API resource of {kind}")]
    Discovery {
        kind: String,
        #[source]
        source: kube::Error,
    },
    #[error("the API server refused")]
    Api(#[from] kube::Error),
    #[error("an object that does not read as JSON")]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Confirm(#[from] crate::confirm::ConfirmError),
    #[error("cannot ask the API server what the revision's author may do")]
    Author(#[source] kube::Error),
    #[error("the object changed under each of {tries} writes")]
    Raced {
        tries: usize,
        #[source]
        source: Option<kube::Error>,
    },
}

/// Why one attempt at a revert did not happen.
#[derive(Debug)]
pub(super) enum Failure {
    Error(RevertError),
    /// The object changed since it was read.
    Conflict(Conflict),
    /// A guarded write failed, and a fresh read shows the object unchanged: the failure was
    /// the write's own, not a concurrent write's.
    Unchanged,
}

impl From<RevertError> for Failure {
    fn from(error: RevertError) -> Self {
        Failure::Error(error)
    }
}

impl From<kube::Error> for Failure {
    fn from(error: kube::Error) -> Self {
        Failure::Error(RevertError::Api(error))
    }
}

impl From<serde_json::Error> for Failure {
    fn from(error: serde_json::Error) -> Self {
        Failure::Error(RevertError::Json(error))
    }
}

impl From<crate::confirm::ConfirmError> for Failure {
    fn from(error: crate::confirm::ConfirmError) -> Self {
        Failure::Error(RevertError::Confirm(error))
    }
}

impl Failure {
    /// A write's error; `guarded`: the resourceVersion its JSON patch tested. A failed test
    /// (422) or a change the API server saw under the write (409) means someone wrote since
    /// the read: a conflict, not an error of the revert.
    pub(super) fn of(error: kube::Error, guarded: Option<&str>) -> Failure {
        match guarded {
            Some(rv) if matches!(&error, kube::Error::Api(s) if s.code == 422 || s.code == 409) => {
                Failure::Conflict(Conflict {
                    resource_version: rv.to_string(),
                    error,
                })
            }
            _ => Failure::Error(RevertError::Api(error)),
        }
    }
}

/// A resourceVersion-guarded write that failed: the version it tested, and the API server's answer.
#[derive(Debug)]
pub(super) struct Conflict {
    pub(super) resource_version: String,
    pub(super) error: kube::Error,
}

#[cfg(test)]
mod tests {
    use super::*;
    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: message.into(),
            ..Default::default()
        }))
    }

    #[test]
    fn a_failed_resource_version_guard_is_a_conflict_and_other_errors_are_errors() {
        // kube-apiserver 1.20's answer to a JSON patch whose `test` op failed.
        let test_failed = || {
            api_error(
                422,
                "the server rejected our request due to an error in our request",
            )
        };
        match Failure::of(test_failed(), Some("42")) {
            Failure::Conflict(c) => {
                assert_eq!(c.resource_version, "42");
                assert!(c.error.to_string().contains("rejected our request"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            Failure::of(api_error(409, "the object has been modified"), Some("42")),
            Failure::Conflict(_)
        ));
        // No guard (a forced apply): a 422 is the revert's own error.
        assert!(matches!(
            Failure::of(test_failed(), None),
            Failure::Error(_)
        ));
        assert!(matches!(
            Failure::of(api_error(403, "forbidden"), Some("42")),
            Failure::Error(_)
        ));
    }
}
