//! What helm-locker tells people outside an admission answer: the note of each Event it writes
//! (on a drifted object, a release's Secret, a LockException, its switches ConfigMap). A
//! denial's words are [`crate::decide`]'s (`decide/message.rs`); every other sentence a person
//! reads is here, so that the wording is reviewed in one place and each says what to do.

use std::fmt::Display;

/// `Reverted`: drift put back.
pub fn reverted(
    paths: &str,
    release: impl Display,
    revision: u64,
    manager: impl Display,
) -> String {
    format!(
        "helm-locker put back {paths} to the values of release {release} revision {revision}, as field manager {manager}"
    )
}

/// `Recreated`: a deleted object made again.
pub fn recreated(release: impl Display, revision: u64) -> String {
    format!("helm-locker recreated this object from release {release} revision {revision}")
}

/// `OwnershipReturned`: a restore's fields given back to Helm's field manager.
pub fn ownership_returned(
    manager: impl Display,
    release: impl Display,
    revision: u64,
    what: impl Display,
) -> String {
    format!(
        "helm-locker handed back to Helm's field manager {manager} what another manager co-owned with the values of release {release} revision {revision}: {what}"
    )
}

/// `LockedObjectMissing`: an object of the release does not exist and is not made again.
pub fn missing(object: impl Display, release: impl Display, why: impl Display) -> String {
    format!(
        "{object} of release {release} does not exist; helm-locker does not create it ({why}). Run helm upgrade to create it."
    )
}

/// `RevertFight`: reverting stopped after another writer changed the fields back each time.
pub fn fight_stopped(
    paths: impl Display,
    object: impl Display,
    (release, revision): (impl Display, u64),
    (times, within): (usize, impl Display),
    other: impl Display,
) -> String {
    format!(
        "helm-locker stopped reverting {paths} of {object} to release {release} revision {revision}: it put them back {times} times within {within} and {other} changed them again each time. The admission lock stays; a new revision (helm upgrade) or a restart of helm-locker resumes reverting."
    )
}

/// `AuthorLacksRights`: the revision's author may not make the write the revert needs.
pub fn author_lacks_rights(
    object: impl Display,
    (release, revision): (impl Display, u64),
    author: impl Display,
    refused: &[String],
) -> String {
    format!(
        "helm-locker does not write {object} from release {release} revision {revision}: its author {author} may not {}. A revision acts only with its author's rights; helm upgrade by someone who may makes the release's objects locked and reverted again.",
        refused.join(", ")
    )
}

/// `UnknownAuthor`: nothing of this object is written from a revision whose author is not
/// known.
pub fn unknown_author_not_written(
    object: impl Display,
    (release, revision): (impl Display, u64),
    why: impl Display,
    scope: impl Display,
) -> String {
    format!(
        "helm-locker does not write {object} from release {release} revision {revision}: the revision's author is not known ({why}), and {scope}. helm upgrade makes the release's objects reverted again."
    )
}

/// `UnknownAuthor`: the paths where the object differed from such a revision at first sight
/// are held at what was live.
pub fn unknown_author_held(
    object: impl Display,
    (release, revision): (impl Display, u64),
    paths: &[String],
    why: impl Display,
) -> String {
    format!(
        "helm-locker holds {object} at what was live when it first saw it under release {release} revision {revision}, and never writes that revision's {}: its author is not known ({why}). helm upgrade makes the release's objects reverted to the chart again.",
        paths.join(", ")
    )
}

/// `ForeignRelease` / `ReleaseTooLarge`: a release Secret (or ConfigMap) not indexed.
pub fn release_ignored(kind: impl Display, why: impl Display) -> String {
    format!("helm-locker ignores this release {kind}: {why}")
}

/// `LockExceptionInvalid`.
pub fn exception_invalid(why: impl Display) -> String {
    format!("helm-locker does not honour this LockException: {why}")
}

/// `LockExceptionOpen`: until when, and whether the maximum cut it short of what was asked.
pub fn exception_open(until: impl Display, capped: Option<(impl Display, impl Display)>) -> String {
    match capped {
        Some((max, asked)) => format!(
            "helm-locker honours this LockException until {until}: {max} after its creation, the maximum (--exception-max-duration), not until {asked} as asked"
        ),
        None => format!("helm-locker honours this LockException until {until}"),
    }
}

/// `SwitchesInvalid`: the switches ConfigMap could not be read; the switches in force stay.
/// A key of the writers ConfigMap that is not a valid writer rule.
pub fn writer_rule_invalid(why: impl Display) -> String {
    format!("helm-locker did not load this writer rule ({why}); the other rules stay in force")
}

pub fn switches_invalid(why: impl Display) -> String {
    format!("helm-locker did not apply these switches ({why}); those in force stay")
}

/// `WriterRuleUsed`: the rules `ids` let `user` change `paths` of `object`.
pub fn writer_rule_used(
    ids: &[String],
    user: impl Display,
    paths: &[String],
    object: impl Display,
    release: impl Display,
) -> String {
    format!(
        "writer rule {} let {user} change {} of {object} (release {release})",
        ids.join(", "),
        paths.join(", ")
    )
}

/// What a write to a locked object tried, as [`exception_used`] and its log line say it:
/// `delete X`, `write X`, or `change /a, /b of X`.
pub fn attempted_write(delete: bool, paths: &[String], object: impl Display) -> String {
    if delete {
        format!("delete {object}")
    } else if paths.is_empty() {
        format!("write {object}")
    } else {
        format!("change {} of {object}", paths.join(", "))
    }
}

/// `LockExceptionUsed`: an open LockException let `user` make the write `what`
/// ([`attempted_write`]), for `reason` (the exception's).
pub fn exception_used(
    exception: impl Display,
    user: impl Display,
    what: &str,
    release: impl Display,
    reason: impl Display,
) -> String {
    format!("LockException {exception} let {user} {what} (release {release}): {reason}")
}

/// `Locked`: a HelmRelease's release became locked (at `revision` when known).
pub fn release_locked(revision: Option<i64>) -> String {
    format!("release locked{}", revision_suffix(revision))
}

/// `Transitioning`: Helm started working on a HelmRelease's release; `description` is Helm's.
pub fn release_transitioning(revision: Option<i64>, description: impl Display) -> String {
    format!(
        "Helm is working on the release{}: {description}",
        revision_suffix(revision)
    )
}

fn revision_suffix(revision: Option<i64>) -> String {
    revision
        .map(|v| format!(" (revision {v})"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Events about writes let through and HelmRelease transitions say it as they did when
    /// their words were in the shell (docs and e2e tests read them).
    #[test]
    fn a_write_let_through_and_a_transition_read_as_before() {
        let paths = ["/spec/replicas".to_string(), "/spec/paused".to_string()];
        assert_eq!(
            writer_rule_used(&["scaler".into()], "ops", &paths[..1], "Deployment shop/web", "shop/shop"),
            "writer rule scaler let ops change /spec/replicas of Deployment shop/web (release shop/shop)"
        );
        let what = attempted_write(false, &paths, "Deployment shop/web");
        assert_eq!(
            what,
            "change /spec/replicas, /spec/paused of Deployment shop/web"
        );
        assert_eq!(
            attempted_write(true, &paths, "Deployment shop/web"),
            "delete Deployment shop/web"
        );
        assert_eq!(
            attempted_write(false, &[], "Deployment shop/web"),
            "write Deployment shop/web"
        );
        assert_eq!(
            exception_used("shop/inc-42", "alice", &what, "shop/shop", "INC-42"),
            "LockException shop/inc-42 let alice change /spec/replicas, /spec/paused of Deployment shop/web (release shop/shop): INC-42"
        );
        assert_eq!(release_locked(Some(3)), "release locked (revision 3)");
        assert_eq!(release_locked(None), "release locked");
        assert_eq!(
            release_transitioning(Some(4), "Upgrade in progress"),
            "Helm is working on the release (revision 4): Upgrade in progress"
        );
    }

    /// Each note names what happened and what a person does next, with the release and its
    /// revision where there is one.
    #[test]
    fn each_note_says_what_happened_and_what_to_do() {
        let release = "shop/shop";
        assert_eq!(
            reverted("/spec/replicas", release, 3, "helm"),
            "helm-locker put back /spec/replicas to the values of release shop/shop revision 3, as field manager helm"
        );
        assert!(missing(
            "Service shop/web",
            release,
            "deleted while helm-locker was away"
        )
        .ends_with("Run helm upgrade to create it."));
        let fight = fight_stopped(
            "/data",
            "ConfigMap shop/c",
            (release, 3),
            (3, "10m"),
            "argo",
        );
        assert!(fight.contains("3 times within 10m and argo"), "{fight}");
        let lacks = author_lacks_rights(
            "ClusterRole reader",
            (release, 2),
            "alice",
            &["patch clusterroles".into(), "escalate".into()],
        );
        assert!(lacks.contains("its author alice may not patch clusterroles, escalate."));
        let held = unknown_author_held(
            "Deployment shop/web",
            (release, 2),
            &["/spec".into()],
            "no stamp",
        );
        assert!(
            held.contains("never writes that revision's /spec: its author is not known (no stamp)")
        );
        assert_eq!(
            exception_open("2026-11-28T12:00:00Z", None::<(&str, &str)>),
            "helm-locker honours this LockException until 2026-11-28T12:00:00Z"
        );
        assert!(exception_open("t1", Some(("1day", "t2"))).ends_with("not until t2 as asked"));
        assert!(switches_invalid("mode: \"x\"").contains("those in force stay"));
        assert!(release_ignored("Secret", "too large")
            .starts_with("helm-locker ignores this release Secret"));
        assert!(exception_invalid("no users").ends_with("no users"));
        assert!(recreated(release, 4).ends_with("revision 4"));
        assert!(ownership_returned("helm", release, 4, "/data").ends_with(": /data"));
        assert!(unknown_author_not_written("x", (release, 1), "w", "s")
            .contains("not known (w), and s."));
    }
}
