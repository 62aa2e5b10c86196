//! Where a release is stored, and for which namespace that lets it speak.
//!
//! Helm keeps a release in Secrets of the release's own namespace, and most releases are read
//! that way. Flux's helm-controller does not always: a HelmRelease in `flux-system` with
//! `spec.targetNamespace: apps` (and no `storageNamespace`, whose default is the HelmRelease's
//! namespace) keeps its Secrets in `flux-system` while the release, and every object it renders
//! without a namespace, is in `apps`. Such a Secret speaks for another namespace than its own,
//! which anyone who may create Secrets in one namespace could otherwise use to lock another's
//! objects.
//!
//! The rule: **a release stored outside its own namespace counts only when its author may create
//! Secrets in the release's namespace**, that is, could have stored the same release there,
//! where it would lock the same objects. So the layout grants nobody a lock they could not
//! make already. The author is the one the author webhook stamped ([`crate::author`]); a
//! revision that was never stamped counts only in a storage namespace the admin trusts, and only
//! kept by a driver the admin names for it ([`TrustedStorage`], `--trusted-storage-namespace`:
//! only controllers the admin runs write release Secrets there, as Flux's helm-controller in
//! `flux-system`). A stamp that fails (it does not verify, was replayed, is of an older locker,
//! or its revision went back) is never trusted: a writer can make any stamp fail, so "unknown"
//! must not be worth more than "known and refused". A known author without the right is never
//! trusted, whatever the namespace.
//! A release that counts is still second to one stored in its own namespace
//! ([`crate::Claims`]-owner rule), and the reverter still writes from it only what its author
//! may write.

use std::fmt;

use crate::author::{Access, Authorship, Unknown};
use crate::release::{Driver, ReleaseSecret, SecretError};

/// A storage namespace the admin trusts, for one driver: `flux-system` (Secrets, Helm's and
/// Flux's helm-controller's storage), `flux-system/secret`, or `flux-system/configmap` (release
/// ConfigMaps: named on their own, since who may write ConfigMaps in a namespace is usually a
/// wider set than who may write Secrets there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustedStorage {
    pub namespace: String,
    pub driver: Driver,
}

impl TrustedStorage {
    /// `NAMESPACE` or `NAMESPACE/DRIVER` (`secret` or `configmap`); `None` for anything else.
    pub fn parse(text: &str) -> Option<TrustedStorage> {
        let (namespace, driver) = match text.split_once('/') {
            Some((namespace, driver)) => (namespace, Driver::parse(driver)?),
            None => (text, Driver::default()),
        };
        let valid = !namespace.is_empty()
            && namespace.len() <= 63
            && namespace
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !namespace.starts_with('-')
            && !namespace.ends_with('-');
        valid.then(|| TrustedStorage {
            namespace: namespace.to_string(),
            driver,
        })
    }

    pub(crate) fn trusts(&self, secret: &ReleaseSecret) -> bool {
        self.namespace == secret.secret.namespace && self.driver == secret.secret.driver
    }
}

impl fmt::Display for TrustedStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.driver.as_str())
    }
}

/// What a release stored in another namespace asks of its author: the question, put to the
/// API server as the author (a SubjectAccessReview), is whether they may create Secrets in the
/// release's namespace (ConfigMaps, for a revision kept in a ConfigMap: whether they could have
/// stored it there with the same driver). `None` for a release stored in its own namespace
/// (nothing to ask).
pub fn storage_question(secret: &ReleaseSecret) -> Option<Access> {
    stored_elsewhere(secret).then(|| {
        Access::resource(
            "create",
            "",
            secret.secret.driver.resource(),
            Some(&secret.release.namespace),
            "",
        )
    })
}

fn stored_elsewhere(secret: &ReleaseSecret) -> bool {
    !secret.secret.namespace.is_empty() && secret.secret.namespace != secret.release.namespace
}

/// Whether a release Secret's release counts: always in its own namespace; stored elsewhere,
/// when its known author may create Secrets in the release's namespace (`allowed`, the
/// authorizer's answer to [`storage_question`]; `None` when not asked), or it was never stamped
/// ([`Unknown::NotStamped`]) and is stored in a namespace and driver of `trusted`. Else the
/// error says why.
pub fn speaks_for_its_namespace(
    secret: &ReleaseSecret,
    trusted: &[TrustedStorage],
    allowed: Option<bool>,
) -> Result<(), SecretError> {
    if !stored_elsewhere(secret) {
        return Ok(());
    }
    let refuse = |why: String| {
        Err(SecretError::ForeignNamespace {
            release_namespace: secret.release.namespace.clone(),
            why,
        })
    };
    match (&secret.author, allowed) {
        (Authorship::Known(_), Some(true)) => Ok(()),
        (Authorship::Known(author), _) => refuse(format!(
            "its author {:?} may not create {}s in {:?}",
            author.username,
            secret.secret.driver.kind(),
            secret.release.namespace
        )),
        (Authorship::Unknown(Unknown::NotStamped), _) if trusted.iter().any(|t| t.trusts(secret)) => {
            Ok(())
        }
        (Authorship::Unknown(Unknown::NotStamped), _) => refuse(format!(
            "its author is not known ({}), and {:?} is not a trusted storage namespace for {}s (--trusted-storage-namespace {})",
            Unknown::NotStamped.as_str(),
            secret.secret.namespace,
            secret.secret.driver.kind(),
            TrustedStorage {
                namespace: secret.secret.namespace.clone(),
                driver: secret.secret.driver
            }
        )),
        (Authorship::Unknown(why), _) => refuse(format!(
            "its author is not known ({}); a stamp that fails is never trusted, even in a trusted storage namespace",
            why.as_str(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::author::{Author, Unknown};
    use crate::release::{ReleaseKey, Status};
    use crate::test_util::release_secret;
    use std::sync::Arc;

    fn flux(author: Authorship) -> ReleaseSecret {
        let mut secret = release_secret("flux-system", "apps-podinfo", 1, Status::Deployed, "");
        secret.release.namespace = "apps".into();
        secret.author = author;
        secret
    }

    fn controller() -> Authorship {
        Authorship::Known(Arc::new(Author {
            username: "system:serviceaccount:flux-system:helm-controller".into(),
            ..Author::default()
        }))
    }

    #[test]
    fn a_release_stored_in_its_own_namespace_asks_nothing_and_counts() {
        let own = release_secret("shop", "web", 1, Status::Deployed, "");
        assert_eq!(storage_question(&own), None);
        assert!(speaks_for_its_namespace(&own, &[], None).is_ok());
    }

    #[test]
    fn a_release_stored_elsewhere_asks_whether_its_author_may_create_secrets_in_its_namespace() {
        let question = storage_question(&flux(controller())).expect("a question");
        assert_eq!(
            (
                question.verb.as_str(),
                question.group.as_str(),
                question.resource.as_str(),
                question.namespace.as_deref(),
                question.name.as_str()
            ),
            ("create", "", "secrets", Some("apps"), "")
        );
        // Kept in a ConfigMap (Helm's ConfigMap driver): could its author have stored it there?
        let mut kept = flux(controller());
        kept.secret.driver = crate::release::Driver::ConfigMap;
        let question = storage_question(&kept).expect("a question");
        assert_eq!(
            (question.resource.as_str(), question.namespace.as_deref()),
            ("configmaps", Some("apps"))
        );
        let refused = speaks_for_its_namespace(&kept, &[], Some(false)).unwrap_err();
        assert!(
            refused.to_string().contains("may not create ConfigMaps"),
            "{refused}"
        );
        assert_eq!(
            ReleaseKey::stored("apps", "apps-podinfo", "flux-system").to_string(),
            "apps/apps-podinfo (stored in flux-system)"
        );
    }

    #[test]
    fn a_release_stored_elsewhere_counts_only_with_its_authors_right_or_a_trusted_namespace() {
        assert!(speaks_for_its_namespace(&flux(controller()), &[], Some(true)).is_ok());
        let refused = speaks_for_its_namespace(&flux(controller()), &[], Some(false));
        let message = refused.unwrap_err().to_string();
        assert!(
            message.contains("helm-controller") && message.contains("\"apps\""),
            "{message}"
        );
        // Trusting the storage namespace never overrides a known author's answer.
        let trusted = [TrustedStorage::parse("flux-system").unwrap()];
        assert!(speaks_for_its_namespace(&flux(controller()), &trusted, Some(false)).is_err());
        // Unknown authors: only in a trusted storage namespace.
        let unknown = flux(Authorship::Unknown(Unknown::NotStamped));
        let refused = speaks_for_its_namespace(&unknown, &[], None).unwrap_err();
        assert!(
            refused.to_string().contains("--trusted-storage-namespace"),
            "{refused}"
        );
        assert!(speaks_for_its_namespace(&unknown, &trusted, None).is_ok());
        let elsewhere = [TrustedStorage::parse("tenant").unwrap()];
        assert!(speaks_for_its_namespace(&unknown, &elsewhere, None).is_err());
    }

    #[test]
    fn a_trusted_storage_namespace_never_trusts_a_stamp_that_failed() {
        // generateName, a copied stamp, a replay, an old locker's stamp, a revision brought
        // back: each turns a known author without the right into "unknown"; none counts.
        let trusted = [TrustedStorage::parse("flux-system").unwrap()];
        for why in [
            Unknown::BadProof,
            Unknown::Replayed,
            Unknown::OldProof,
            Unknown::WentBack,
            Unknown::NotRead,
        ] {
            let refused = speaks_for_its_namespace(&flux(Authorship::Unknown(why)), &trusted, None)
                .expect_err("a failed stamp is not trusted");
            assert!(
                refused.to_string().contains("never trusted")
                    && refused.to_string().contains(why.as_str()),
                "{refused}"
            );
        }
        let never_stamped = flux(Authorship::Unknown(Unknown::NotStamped));
        assert!(speaks_for_its_namespace(&never_stamped, &trusted, None).is_ok());
    }

    #[test]
    fn a_trusted_storage_namespace_trusts_only_the_drivers_the_admin_names() {
        let mut config_map = flux(Authorship::Unknown(Unknown::NotStamped));
        config_map.secret.driver = Driver::ConfigMap;
        let secret = flux(Authorship::Unknown(Unknown::NotStamped));
        let secrets_only = [TrustedStorage::parse("flux-system").unwrap()];
        let refused = speaks_for_its_namespace(&config_map, &secrets_only, None).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("--trusted-storage-namespace flux-system/configmap"),
            "{refused}"
        );
        assert!(speaks_for_its_namespace(&secret, &secrets_only, None).is_ok());
        let config_maps = [TrustedStorage::parse("flux-system/configmap").unwrap()];
        assert!(speaks_for_its_namespace(&config_map, &config_maps, None).is_ok());
        assert!(speaks_for_its_namespace(&secret, &config_maps, None).is_err());
        let explicit = [TrustedStorage::parse("flux-system/secret").unwrap()];
        assert!(speaks_for_its_namespace(&secret, &explicit, None).is_ok());
    }

    #[test]
    fn a_trusted_storage_is_a_namespace_with_an_optional_driver() {
        let parsed = |t: &str| TrustedStorage::parse(t).map(|t| t.to_string());
        assert_eq!(parsed("flux-system").as_deref(), Some("flux-system/secret"));
        assert_eq!(
            parsed("flux-system/secret").as_deref(),
            Some("flux-system/secret")
        );
        assert_eq!(
            parsed("flux-system/configmap").as_deref(),
            Some("flux-system/configmap")
        );
        for bad in [
            "",
            "/configmap",
            "flux-system/",
            "flux-system/sql",
            "Flux",
            "a/b/c",
            "-x",
            " flux-system",
        ] {
            assert_eq!(parsed(bad), None, "{bad:?}");
        }
    }
}
