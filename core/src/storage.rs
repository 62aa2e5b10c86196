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
//! revision whose author is not known counts only in a storage namespace the admin trusts
//! (`--trusted-storage-namespace`: only controllers the admin runs write Secrets there, as in
//! `flux-system`). A known author without the right is never trusted, whatever the namespace.
//! A release that counts is still second to one stored in its own namespace
//! ([`crate::Claims`]-owner rule), and the reverter still writes from it only what its author
//! may write.

use crate::author::{Access, Authorship};
use crate::release::{ReleaseSecret, SecretError};

/// What a release stored in another namespace asks of its author: the question, put to the
/// API server as the author (a SubjectAccessReview), is whether they may create Secrets in the
/// release's namespace. `None` for a release stored in its own namespace (nothing to ask).
pub fn storage_question(secret: &ReleaseSecret) -> Option<Access> {
    stored_elsewhere(secret)
        .then(|| Access::resource("create", "", "secrets", Some(&secret.release.namespace), ""))
}

fn stored_elsewhere(secret: &ReleaseSecret) -> bool {
    !secret.secret.namespace.is_empty() && secret.secret.namespace != secret.release.namespace
}

/// Whether a release Secret's release counts: always in its own namespace; stored elsewhere,
/// when its known author may create Secrets in the release's namespace (`allowed`, the
/// authorizer's answer to [`storage_question`]; `None` when not asked), or its author is not
/// known and it is stored in a namespace of `trusted`. Else the error says why.
pub fn speaks_for_its_namespace(
    secret: &ReleaseSecret,
    trusted: &[String],
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
            "its author {:?} may not create Secrets in {:?}",
            author.username, secret.release.namespace
        )),
        (Authorship::Unknown(_), _) if trusted.contains(&secret.secret.namespace) => Ok(()),
        (Authorship::Unknown(why), _) => refuse(format!(
            "its author is not known ({}), and {:?} is not a trusted storage namespace (--trusted-storage-namespace)",
            why.as_str(),
            secret.secret.namespace
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
        let trusted = ["flux-system".to_string()];
        assert!(speaks_for_its_namespace(&flux(controller()), &trusted, Some(false)).is_err());
        // Unknown authors: only in a trusted storage namespace.
        let unknown = flux(Authorship::Unknown(Unknown::NotStamped));
        let refused = speaks_for_its_namespace(&unknown, &[], None).unwrap_err();
        assert!(
            refused.to_string().contains("--trusted-storage-namespace"),
            "{refused}"
        );
        assert!(speaks_for_its_namespace(&unknown, &trusted, None).is_ok());
        let elsewhere = ["tenant".to_string()];
        assert!(speaks_for_its_namespace(&unknown, &elsewhere, None).is_err());
    }
}
