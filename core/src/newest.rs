//! A release's newest revision as its payloads say, for the fresh read before a denial and the
//! reverter's re-check (rule 7).
//!
//! Whoever may create Secrets in a namespace may label one `owner=helm,name=ops,status=
//! pending-upgrade,version=99` without any release in it. Labels are the writer's word; only a
//! payload that decodes is a revision. So the newest revision is the highest `version` among the
//! Secrets whose payload decodes into a release of this name and namespace, stored where it is, and its status is the
//! payload's: a Secret that does not decode opens nothing and counts for nothing.

use crate::release::{release_secret_from_parts, ReleaseKey, SecretRef, Status};

/// The newest revision of `release` and its status among `secrets` (each a Secret's reference
/// and its `data.release` as a Kubernetes client returns it, i.e. Helm's own base64 layer), as
/// their payloads say; `None` when no payload is a revision of `release`. Labels are not read.
pub fn newest_revision<'a>(
    release: &ReleaseKey,
    secrets: impl IntoIterator<Item = (SecretRef, &'a [u8])>,
) -> Option<(u64, Status)> {
    secrets
        .into_iter()
        .filter(|(secret, _)| secret.namespace == release.storage_namespace())
        .filter_map(|(secret, payload)| {
            release_secret_from_parts(secret, Default::default(), payload).ok()
        })
        // Of this name, of this namespace, stored where this release is.
        .filter(|decoded| decoded.key() == *release)
        .map(|decoded| (decoded.release.revision, decoded.release.status))
        .max_by_key(|(revision, _)| *revision)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use std::io::Write as _;

    /// Helm's layer of a release: base64 of gzip of JSON.
    fn payload(json: &str) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(json.as_bytes()).unwrap();
        base64::engine::general_purpose::STANDARD
            .encode(gz.finish().unwrap())
            .into_bytes()
    }

    fn revision(name: &str, namespace: &str, version: u64, status: &str) -> Vec<u8> {
        payload(&format!(
            r#"{{"name":"{name}","namespace":"{namespace}","version":{version},"info":{{"status":"{status}"}},"manifest":""}}"#
        ))
    }

    fn secret(namespace: &str, name: &str) -> SecretRef {
        SecretRef {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn ops() -> ReleaseKey {
        ReleaseKey::new("team", "ops")
    }

    #[test]
    fn the_newest_revision_is_the_highest_payload_version_with_its_payload_status() {
        let (v1, v2) = (
            revision("ops", "team", 1, "superseded"),
            revision("ops", "team", 2, "deployed"),
        );
        let secrets = [
            (secret("team", "sh.helm.release.v1.ops.v2"), v2.as_slice()),
            (secret("team", "sh.helm.release.v1.ops.v1"), v1.as_slice()),
        ];
        assert_eq!(
            newest_revision(&ops(), secrets),
            Some((2, Status::parse("deployed")))
        );
        assert_eq!(newest_revision(&ops(), []), None);
    }

    #[test]
    fn a_secret_that_does_not_decode_opens_nothing_and_counts_for_nothing() {
        // The attack: labels saying pending-upgrade, version 99, and no release inside.
        let deployed = revision("ops", "team", 2, "deployed");
        for garbage in [
            &b""[..],
            b"not base64!",
            b"H4sIAAAAAAAA",
            b"e30=", /* "{}": no version */
        ] {
            let secrets = [
                (secret("team", "sh.helm.release.v1.ops.v99"), garbage),
                (
                    secret("team", "sh.helm.release.v1.ops.v2"),
                    deployed.as_slice(),
                ),
            ];
            assert_eq!(
                newest_revision(&ops(), secrets),
                Some((2, Status::parse("deployed"))),
                "{garbage:?}"
            );
        }
    }

    #[test]
    fn a_payload_of_another_release_or_namespace_is_not_a_revision_of_this_one() {
        let deployed = revision("ops", "team", 2, "deployed");
        let other_name = revision("web", "team", 9, "pending-upgrade");
        let other_namespace = revision("ops", "a-tenant", 9, "pending-upgrade");
        let secrets = [
            (
                secret("team", "sh.helm.release.v1.ops.v2"),
                deployed.as_slice(),
            ),
            // A valid release of another name, in a Secret named (and labelled) as this one's.
            (
                secret("team", "sh.helm.release.v1.ops.v9"),
                other_name.as_slice(),
            ),
            // Naming another namespace: a release of a-tenant stored in team, another release.
            (
                secret("team", "sh.helm.release.v1.ops.v10"),
                other_namespace.as_slice(),
            ),
            // The same release, stored in another namespace.
            (
                secret("a-tenant", "sh.helm.release.v1.ops.v11"),
                other_namespace.as_slice(),
            ),
        ];
        assert_eq!(
            newest_revision(&ops(), secrets),
            Some((2, Status::parse("deployed")))
        );
    }

    /// Flux's layout: the release of `apps` whose Secrets are in `flux-system` is read there;
    /// the same name stored in `apps` itself, or a release of `flux-system`, is another one.
    #[test]
    fn a_release_stored_in_another_namespace_is_read_where_it_is_stored() {
        let flux = ReleaseKey::stored("apps", "ops", "flux-system");
        let stored = revision("ops", "apps", 3, "pending-upgrade");
        let own = revision("ops", "flux-system", 9, "pending-upgrade");
        let secrets = || {
            [
                (
                    secret("flux-system", "sh.helm.release.v1.ops.v3"),
                    stored.as_slice(),
                ),
                (
                    secret("flux-system", "sh.helm.release.v1.ops.v9"),
                    own.as_slice(),
                ),
                (
                    secret("apps", "sh.helm.release.v1.ops.v8"),
                    stored.as_slice(),
                ),
            ]
        };
        assert_eq!(
            newest_revision(&flux, secrets()),
            Some((3, Status::parse("pending-upgrade")))
        );
        assert_eq!(
            newest_revision(&ReleaseKey::new("apps", "ops"), secrets()),
            Some((3, Status::parse("pending-upgrade")))
        );
        assert_eq!(
            newest_revision(&ReleaseKey::new("flux-system", "ops"), secrets()),
            Some((9, Status::parse("pending-upgrade")))
        );
    }

    #[test]
    fn a_pending_payload_is_pending_whatever_the_labels() {
        let pending = revision("ops", "team", 3, "pending-upgrade");
        let deployed = revision("ops", "team", 2, "deployed");
        let secrets = [
            (
                secret("team", "sh.helm.release.v1.ops.v3"),
                pending.as_slice(),
            ),
            (
                secret("team", "sh.helm.release.v1.ops.v2"),
                deployed.as_slice(),
            ),
        ];
        assert_eq!(
            newest_revision(&ops(), secrets),
            Some((3, Status::parse("pending-upgrade")))
        );
    }
}
