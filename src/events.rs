//! The Kubernetes Events helm-locker writes, declared once as the metrics are: each reason with
//! its type and its action, in [`Reason`]; what its note says is `crate::core::notes`' (one
//! function per reason). docs/operations.md's Events table lists every reason with its type and
//! action, and no other (scripts/check-docs.py reads the declaration below).
//!
//! Every Event is built by [`event`]; those sent through kube's recorder go by [`publish`], the
//! reverter's through its `Cluster`, the attempts through [`crate::attempts`]' own publisher
//! (one Event per attempt, rate-limited).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};

macro_rules! reasons {
    ($($(#[$doc:meta])* $reason:ident: $type_:ident, $action:literal;)+) => {
        /// Why helm-locker wrote an Event: its `reason`, and with it its type and `action`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub(crate) enum Reason {
            $($(#[$doc])* $reason,)+
        }

        impl Reason {
            /// Every reason, in declaration order.
            pub(crate) const ALL: &'static [Reason] = &[$(Reason::$reason,)+];

            /// The Event's `reason`, as `kubectl get events --field-selector reason=...` names it.
            pub(crate) fn as_str(self) -> &'static str {
                match self {
                    $(Reason::$reason => stringify!($reason),)+
                }
            }

            pub(crate) fn type_(self) -> EventType {
                match self {
                    $(Reason::$reason => EventType::$type_,)+
                }
            }

            /// The Event's `action`: what helm-locker did.
            pub(crate) fn action(self) -> &'static str {
                match self {
                    $(Reason::$reason => $action,)+
                }
            }
        }
    };
}

reasons! {
    /// A write to a locked field denied (on the object).
    LockedFieldChangeDenied: Warning, "Deny";
    /// A delete of a locked object denied (on the object).
    LockedObjectDeleteDenied: Warning, "Deny";
    /// A write to a locked field allowed with a warning (`--mode warn`; on the object).
    LockedFieldChangeWarned: Warning, "Warn";
    /// A write to a locked field put back by the mutating webhook (on the object).
    LockedFieldChangeRepaired: Warning, "Repair";
    /// A write to a locked field let through by a writer rule (on the object).
    WriterRuleUsed: Warning, "Allow";
    /// A write to a locked object let through by an open LockException (on the object).
    LockExceptionUsed: Warning, "Allow";
    /// A writer rule of the writers ConfigMap not loaded (on the ConfigMap).
    WriterRuleInvalid: Warning, "Ignore";
    /// A release too large, of too many objects, or over its namespace's bound: not indexed
    /// (on its Secret or ConfigMap).
    ReleaseTooLarge: Warning, "Ignore";
    /// A release stored in another namespace, or by another driver, that may not speak there:
    /// not indexed (on its Secret or ConfigMap).
    ForeignRelease: Warning, "Ignore";
    /// A LockException not honoured (on the LockException).
    LockExceptionInvalid: Warning, "Ignore";
    /// A LockException honoured, and until when (on the LockException).
    LockExceptionOpen: Normal, "Open";
    /// The switches ConfigMap not applied (on the ConfigMap).
    SwitchesInvalid: Warning, "Ignore";
    /// A HelmRelease's release became locked (on the HelmRelease).
    Locked: Normal, "Lock";
    /// Helm started working on a HelmRelease's release (on the HelmRelease).
    Transitioning: Normal, "Lock";
    /// Drift put back by the reverter (on the object).
    Reverted: Normal, "Revert";
    /// A locked object missing, left to `helm upgrade` (on the release's Secret).
    LockedObjectMissing: Warning, "Report";
    /// The reverter stopped reverting fields another writer keeps changing (on the object).
    RevertFight: Warning, "Stop";
    /// Drift not written back: the revision's author is not known (on the release's Secret).
    UnknownAuthor: Warning, "Refuse";
    /// Drift not written back: the revision's author may not make the write (on the release's
    /// Secret).
    AuthorLacksRights: Warning, "Refuse";
}

impl Reason {
    /// The reason an Event read from the cluster names, when it is one of these (`kubectl
    /// locker status` reads the reverter's).
    pub(crate) fn named(reason: &str) -> Option<Reason> {
        Reason::ALL.iter().copied().find(|r| r.as_str() == reason)
    }

    /// The type as the Event's `type` field spells it.
    pub(crate) fn type_name(self) -> &'static str {
        match self.type_() {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The Event for `reason`, saying `note`, about a second object when `related`.
pub(crate) fn event(reason: Reason, note: String, related: Option<ObjectReference>) -> Event {
    Event {
        type_: reason.type_(),
        reason: reason.as_str().into(),
        note: Some(note),
        action: reason.action().into(),
        secondary: related,
    }
}

/// Publishes the Event for `reason` about `regarding` through kube's recorder; a failure is
/// logged (at debug: an Event is a courtesy, the log line and the metric are the record).
pub(crate) async fn publish(
    recorder: &Recorder,
    regarding: &ObjectReference,
    reason: Reason,
    note: String,
) {
    let event = event(reason, note, None);
    if let Err(e) = recorder.publish(&event, regarding).await {
        not_recorded(reason, &e);
    }
}

/// Logs an Event that could not be written.
pub(crate) fn not_recorded(reason: Reason, error: &kube::Error) {
    tracing::debug!(error = %error, "could not record the {reason} event");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_has_its_own_name_type_and_action() {
        let names: std::collections::HashSet<&str> =
            Reason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(names.len(), Reason::ALL.len());
        let revert = event(Reason::Reverted, "put back".into(), None);
        assert_eq!(revert.reason, "Reverted");
        assert_eq!(revert.action, "Revert");
        assert!(matches!(revert.type_, EventType::Normal));
        let denied = event(Reason::LockedObjectDeleteDenied, String::new(), None);
        assert_eq!(
            (denied.reason.as_str(), denied.action.as_str()),
            ("LockedObjectDeleteDenied", "Deny")
        );
        assert_eq!(Reason::LockedObjectDeleteDenied.type_name(), "Warning");
        for reason in Reason::ALL {
            assert_eq!(Reason::named(reason.as_str()), Some(*reason));
        }
        assert_eq!(Reason::named("Scheduled"), None);
    }
}
