//! One driver per release: Helm reads a release from one driver (`HELM_DRIVER`: Secrets by
//! default, or ConfigMaps), so a revision kept by the other one is not part of the release Helm
//! sees. Read as one, whoever may write only the other kind (a Role that grants ConfigMaps and
//! not Secrets) could add a newer revision to a release kept in Secrets and make the lock, the
//! reverter and the hand-over follow it.
//!
//! **The release's driver** is the driver of its earliest created revision (the API server's
//! `creationTimestamp`, which no writer chooses; revisions without one, or created in the same
//! second, by their number; then Secrets, Helm's default). Helm creates revision 1 where the
//! release is installed and every later one after it, so a writer who arrives later never
//! makes her driver the release's, whichever direction she writes in, and a history found at
//! install (unstamped) keeps counting beside her revision.
//!
//! **A revision kept by the other driver counts only as a release stored elsewhere does**
//! ([`crate::storage`], invariant 8): when its known author may create the release's driver's
//! kind in the release's namespace (a SubjectAccessReview as that author: could have kept the
//! same revision with the release's driver, as Helm run with another `HELM_DRIVER` by someone
//! who may write both kinds does when a release moves driver). Without a known author it counts
//! only in a storage namespace the admin trusts (`--trusted-storage-namespace`); a known author
//! without the right never counts. Otherwise it is reported and ignored: it opens, locks and
//! reverts nothing, and is never "a revision seen" (`WentBack`).

use crate::author::{Access, Authorship, Unknown};
use crate::release::{Driver, ReleaseSecret, SecretError};
use crate::storage::TrustedStorage;

/// One revision as the driver rule reads it: its driver, when the API server created it (Unix
/// seconds; `None` when not read from it), and its number.
pub type Kept = (Driver, Option<i64>, u64);

/// The release's driver among its revisions: the driver of the earliest created one (by number
/// where a time is missing or equal, then Secrets first). `None` without revisions.
pub fn release_driver(revisions: impl IntoIterator<Item = Kept>) -> Option<Driver> {
    revisions
        .into_iter()
        .min_by_key(|&(driver, created, revision)| {
            // A revision without a time sorts after every timed one: a time is the API
            // server's word, a number the writer's.
            (created.is_none(), created, revision, driver)
        })
        .map(|(driver, _, _)| driver)
}

/// What a revision kept by another driver than its release's (`release_driver`) asks of its
/// author: may they create the release's driver's kind in the release's namespace? `None` when
/// it is kept by the release's driver (nothing to ask).
pub fn driver_question(secret: &ReleaseSecret, release_driver: Driver) -> Option<Access> {
    (secret.secret.driver != release_driver).then(|| {
        Access::resource(
            "create",
            "",
            release_driver.resource(),
            Some(&secret.release.namespace),
            "",
        )
    })
}

/// Whether `secret` counts beside its release's other revisions (kept by `release_driver`):
/// always when kept by that driver; else when its known author may create that kind in the
/// release's namespace (`allowed`, the answer to [`driver_question`]; `None` when not asked),
/// or it was never stamped and is kept by a namespace and driver of `trusted` (a stamp that
/// fails is never trusted: [`crate::storage::speaks_for_its_namespace`]'s rule).
pub fn counts_beside_its_release(
    secret: &ReleaseSecret,
    release_driver: Driver,
    trusted: &[TrustedStorage],
    allowed: Option<bool>,
) -> Result<(), SecretError> {
    if secret.secret.driver == release_driver {
        return Ok(());
    }
    let refuse = |why: String| {
        Err(SecretError::OtherDriver {
            release: secret.key().to_string(),
            release_driver: release_driver.kind(),
            why,
        })
    };
    match (&secret.author, allowed) {
        (Authorship::Known(_), Some(true)) => Ok(()),
        (Authorship::Known(author), _) => refuse(format!(
            "the author of this {} revision, {:?}, may not create {}s in {:?}",
            secret.secret.driver.kind(),
            author.username,
            release_driver.kind(),
            secret.release.namespace
        )),
        (Authorship::Unknown(Unknown::NotStamped), _)
            if trusted.iter().any(|t| t.trusts(secret)) =>
        {
            Ok(())
        }
        (Authorship::Unknown(why), _) => refuse(format!(
            "the author of this {} revision is not known ({}), and {:?} is not a trusted storage namespace for {}s that were never stamped (--trusted-storage-namespace)",
            secret.secret.driver.kind(),
            why.as_str(),
            secret.secret.namespace,
            secret.secret.driver.kind()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::author::{Author, Unknown};
    use crate::release::Status;
    use crate::test_util::release_secret;
    use std::sync::Arc;

    fn by(username: &str) -> Authorship {
        Authorship::Known(Arc::new(Author {
            username: username.into(),
            ..Author::default()
        }))
    }

    /// Revision `revision` of `team/ops`, kept by `driver`, created at `created`.
    fn kept(driver: Driver, revision: u64, created: i64, author: Authorship) -> ReleaseSecret {
        let mut secret = release_secret("team", "ops", revision, Status::Deployed, "");
        secret.secret.driver = driver;
        secret.created = Some(created);
        secret.author = author;
        secret
    }

    fn of(secrets: &[&ReleaseSecret]) -> Option<Driver> {
        release_driver(
            secrets
                .iter()
                .map(|s| (s.secret.driver, s.created, s.release.revision)),
        )
    }

    /// (a) alice, who may write ConfigMaps and not Secrets in `team`, adds a ConfigMap v2 to
    /// the admin's release kept in Secrets: it is asked about Secrets, and her "no" ignores it.
    #[test]
    fn a_config_map_revision_beside_a_release_kept_in_secrets_counts_only_if_its_author_may_create_secrets(
    ) {
        let admin = kept(Driver::Secret, 1, 100, by("admin"));
        let alice = kept(Driver::ConfigMap, 2, 200, by("alice"));
        let driver = of(&[&admin, &alice]).expect("a driver");
        assert_eq!(driver, Driver::Secret);
        assert_eq!(driver_question(&admin, driver), None);
        assert!(counts_beside_its_release(&admin, driver, &[], None).is_ok());
        let question = driver_question(&alice, driver).expect("a question");
        assert_eq!(
            (
                question.verb.as_str(),
                question.resource.as_str(),
                question.namespace.as_deref()
            ),
            ("create", "secrets", Some("team"))
        );
        let refused = counts_beside_its_release(&alice, driver, &[], Some(false)).unwrap_err();
        let message = refused.to_string();
        assert!(
            message.contains("\"alice\"") && message.contains("kept in Secrets"),
            "{message}"
        );
        // Not asked (the authorizer could not answer) is a no.
        assert!(counts_beside_its_release(&alice, driver, &[], None).is_err());
        // The control: the same write by someone who may also create Secrets counts.
        assert!(counts_beside_its_release(&alice, driver, &[], Some(true)).is_ok());
    }

    /// (b) The drivers swapped: a Secret-only writer's Secret beside a release kept in
    /// ConfigMaps is asked about ConfigMaps.
    #[test]
    fn a_secret_revision_beside_a_release_kept_in_config_maps_counts_only_if_its_author_may_create_config_maps(
    ) {
        let admin = kept(Driver::ConfigMap, 1, 100, by("admin"));
        let bob = kept(Driver::Secret, 2, 200, by("bob"));
        let driver = of(&[&bob, &admin]).expect("a driver");
        assert_eq!(driver, Driver::ConfigMap);
        let question = driver_question(&bob, driver).expect("a question");
        assert_eq!(question.resource.as_str(), "configmaps");
        assert!(counts_beside_its_release(&bob, driver, &[], Some(false)).is_err());
        assert!(counts_beside_its_release(&admin, driver, &[], None).is_ok());
    }

    /// (c) A history found at install (no stamp) stays the release's beside a tenant's revision
    /// of the other driver, written later, whatever number she gives it: hers is what is asked
    /// about, the history is never un-counted.
    #[test]
    fn an_unstamped_history_keeps_its_driver_beside_a_later_revision_of_the_other_kind() {
        let history = [
            kept(
                Driver::Secret,
                4,
                100,
                Authorship::Unknown(Unknown::NotStamped),
            ),
            kept(
                Driver::Secret,
                5,
                150,
                Authorship::Unknown(Unknown::NotStamped),
            ),
        ];
        // A lower number than the history's (Helm pruned revisions 1-3) changes nothing: the
        // API server's time says who came first.
        for number in [1, 6, 99] {
            let alice = kept(Driver::ConfigMap, number, 200, by("alice"));
            let driver = of(&[&history[0], &history[1], &alice]).expect("a driver");
            assert_eq!(driver, Driver::Secret, "{number}");
            for revision in &history {
                assert!(counts_beside_its_release(revision, driver, &[], None).is_ok());
            }
            assert!(counts_beside_its_release(&alice, driver, &[], Some(false)).is_err());
        }
        // Her revision written while the author webhook is away (no stamp) counts no more.
        let unstamped = kept(
            Driver::ConfigMap,
            6,
            200,
            Authorship::Unknown(Unknown::NotStamped),
        );
        assert!(counts_beside_its_release(&unstamped, Driver::Secret, &[], None).is_err());
    }

    /// (d) A release that really moves driver (Helm run with another `HELM_DRIVER` by someone
    /// who may write both kinds) keeps working: its new revisions count, and after the old
    /// driver's revisions are deleted the new driver is the release's.
    #[test]
    fn a_release_moved_to_the_other_driver_by_someone_who_may_write_both_keeps_counting() {
        let old = kept(Driver::Secret, 1, 100, by("admin"));
        let moved = kept(Driver::ConfigMap, 2, 200, by("admin"));
        let driver = of(&[&old, &moved]).expect("a driver");
        assert_eq!(driver, Driver::Secret);
        assert!(counts_beside_its_release(&moved, driver, &[], Some(true)).is_ok());
        assert_eq!(of(&[&moved]), Some(Driver::ConfigMap));
        assert_eq!(driver_question(&moved, Driver::ConfigMap), None);
    }

    /// (e) In a storage namespace the admin trusts (helm-controller's `flux-system`), a
    /// revision without a known author counts beside the other driver's, as it counts for
    /// another namespace; a known author without the right still does not.
    #[test]
    fn a_trusted_storage_namespace_counts_an_unknown_author_of_the_other_driver_not_a_refused_one()
    {
        let mut flux = release_secret("flux-system", "apps-web", 2, Status::Deployed, "");
        flux.release.namespace = "apps".into();
        flux.secret.driver = Driver::ConfigMap;
        flux.author = Authorship::Unknown(Unknown::NotStamped);
        let trusted = [TrustedStorage::parse("flux-system/configmap").unwrap()];
        assert!(counts_beside_its_release(&flux, Driver::Secret, &trusted, None).is_ok());
        assert!(counts_beside_its_release(&flux, Driver::Secret, &[], None).is_err());
        // A bare namespace trusts Secrets only, and a stamp that fails is never trusted.
        let secrets_only = [TrustedStorage::parse("flux-system").unwrap()];
        assert!(counts_beside_its_release(&flux, Driver::Secret, &secrets_only, None).is_err());
        flux.author = Authorship::Unknown(Unknown::BadProof);
        assert!(counts_beside_its_release(&flux, Driver::Secret, &trusted, None).is_err());
        flux.author = by("alice");
        assert!(counts_beside_its_release(&flux, Driver::Secret, &trusted, Some(false)).is_err());
        let question = driver_question(&flux, Driver::Secret).expect("a question");
        assert_eq!(question.namespace.as_deref(), Some("apps"));
    }

    /// (f) A third driver (the tests' `Driver::Fake`) goes through the same gate by its spec
    /// alone: the earliest revision makes it the release's, a Secret written beside it is asked
    /// about its resource, and a refusal names its kind.
    #[test]
    fn a_third_drivers_release_asks_a_revision_of_another_driver_about_its_own_resource() {
        let admin = kept(Driver::Fake, 1, 100, by("admin"));
        let alice = kept(Driver::Secret, 2, 200, by("alice"));
        let driver = of(&[&alice, &admin]).expect("a driver");
        assert_eq!(driver, Driver::Fake);
        assert_eq!(driver_question(&admin, driver), None);
        let question = driver_question(&alice, driver).expect("a question");
        assert_eq!(
            (question.verb.as_str(), question.resource.as_str()),
            ("create", "fakestores")
        );
        let message = counts_beside_its_release(&alice, driver, &[], Some(false))
            .unwrap_err()
            .to_string();
        assert!(message.contains("FakeStores"), "{message}");
        assert!(counts_beside_its_release(&alice, driver, &[], Some(true)).is_ok());
        let trusted = [TrustedStorage::parse("team/fakestore").unwrap()];
        let mut unknown = kept(
            Driver::Fake,
            3,
            300,
            Authorship::Unknown(Unknown::NotStamped),
        );
        assert!(counts_beside_its_release(&unknown, Driver::Secret, &trusted, None).is_ok());
        unknown.secret.namespace = "other".into();
        assert!(counts_beside_its_release(&unknown, Driver::Secret, &trusted, None).is_err());
    }

    #[test]
    fn the_release_driver_is_the_earliest_created_revisions_then_by_number_then_secrets() {
        assert_eq!(release_driver([]), None);
        // Untimed revisions (read from a file) by number.
        assert_eq!(
            release_driver([(Driver::ConfigMap, None, 2), (Driver::Secret, None, 1)]),
            Some(Driver::Secret)
        );
        // A time beats a number: an untimed low number is not the earliest.
        assert_eq!(
            release_driver([(Driver::Secret, None, 1), (Driver::ConfigMap, Some(5), 3)]),
            Some(Driver::ConfigMap)
        );
        // The same second and number (a revision kept by both): Secrets, Helm's default.
        assert_eq!(
            release_driver([
                (Driver::ConfigMap, Some(5), 1),
                (Driver::Secret, Some(5), 1)
            ]),
            Some(Driver::Secret)
        );
    }
}
