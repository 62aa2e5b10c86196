//! `kubectl locker vouch`: which revisions a vouch adopts, and what it shows before it does.
//!
//! A vouch makes its writer the author of a revision as it stands, so the reverter writes from
//! it with the voucher's rights. It therefore adopts by default only a revision with no known
//! author (no author stamp, or one that is no stamp at all), shows each one (its author or why
//! it has none, every object the reverter would write from it, RBAC and cluster-scoped ones
//! called out, and their drift from live), and is bound to what it read: the write carries the
//! `resourceVersion` as a precondition and the content's digest
//! ([`crate::core::VOUCH_CONTENT_ANNOTATION`]). Pure: [`super::kube_io`] reads and writes.

use std::collections::BTreeMap;

use crate::core::{scope_of, Author, KindScope, ReleaseSecret, AUTHOR_ANNOTATION};

use super::diff::DiffReport;

/// The newest revision of a release as read for a vouch, with what binds the vouch to it.
pub(crate) struct Candidate {
    pub revision: ReleaseSecret,
    pub annotations: BTreeMap<String, String>,
    pub resource_version: String,
    /// [`crate::core::vouch_content`] of the payload read.
    pub content: String,
}

/// Who the stored object says wrote a revision, as the plugin can tell without the locker's key.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Claimed {
    /// No author stamp, or one that does not name anyone: no author is known.
    Nobody(&'static str),
    /// A stamp naming this user (the plugin cannot check its proof; the locker does).
    Author(String),
}

/// The author a revision's annotations name.
pub(crate) fn claimed(annotations: &BTreeMap<String, String>) -> Claimed {
    match annotations.get(AUTHOR_ANNOTATION) {
        None => Claimed::Nobody(crate::core::UnknownAuthor::NotStamped.as_str()),
        Some(text) => match serde_json::from_str::<Author>(text) {
            Ok(author) if !author.username.is_empty() => Claimed::Author(author.username),
            _ => Claimed::Nobody("its author stamp names no one"),
        },
    }
}

/// Whether a vouch adopts a revision: one with no known author always; one with an author only
/// when asked for it by name (`--include-known-authors`, one RELEASE), never with `--all`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Eligible {
    Adopt,
    /// Skipped: it has an author (named), who stays its author.
    KnownAuthor(String),
}

pub(crate) fn eligible(claimed: &Claimed, include_known_authors: bool) -> Eligible {
    match claimed {
        Claimed::Nobody(_) => Eligible::Adopt,
        Claimed::Author(_) if include_known_authors => Eligible::Adopt,
        Claimed::Author(author) => Eligible::KnownAuthor(author.clone()),
    }
}

/// What a vouch for `candidate` adopts, for a person to read before saying yes: the revision,
/// its author or why it has none, the objects the reverter would write from it with the
/// voucher's rights (RBAC and cluster-scoped ones called out), and their drift from live
/// (`drift`: the diff of this revision alone, `None` when the live objects were not read).
pub(crate) fn show(candidate: &Candidate, drift: Option<&DiffReport>) -> String {
    let revision = &candidate.revision;
    let mut out = format!(
        "release {} revision {} ({}), in {} {}/{} (resourceVersion {})\n",
        revision.key(),
        revision.release.revision,
        revision.release.status,
        revision.secret.driver.kind(),
        revision.secret.namespace,
        revision.secret.name,
        candidate.resource_version,
    );
    match claimed(&candidate.annotations) {
        Claimed::Nobody(why) => out.push_str(&format!("  author: not known: {why}\n")),
        Claimed::Author(author) => out.push_str(&format!(
            "  author: {author} (vouching takes the revision over from them)\n"
        )),
    }
    let objects = crate::core::Index::from_secrets([revision.clone()]);
    let objects: Vec<_> = objects
        .releases()
        .into_iter()
        .flat_map(|s| s.objects.iter().flatten().cloned())
        .collect();
    out.push_str(&format!(
        "  vouching makes you its author: the reverter then writes these {} object(s) from it with your rights:\n",
        objects.len()
    ));
    let (mut rbac, mut cluster) = (0, 0);
    for object in &objects {
        let mut notes = Vec::new();
        if &*object.group == "rbac.authorization.k8s.io" {
            rbac += 1;
            notes.push("RBAC");
        }
        if scope_of(&object.group, &object.kind) == KindScope::Cluster {
            cluster += 1;
            notes.push("cluster-scoped");
        }
        let place = match &object.namespace {
            Some(ns) => format!("{ns}/{}", object.name),
            None => object.name.to_string(),
        };
        let notes = if notes.is_empty() {
            String::new()
        } else {
            format!("  [{}]", notes.join(", "))
        };
        out.push_str(&format!(
            "    {} {} {place}{notes}\n",
            object.api_version(),
            object.kind
        ));
    }
    if rbac + cluster > 0 {
        out.push_str(&format!(
            "  of them {rbac} RBAC and {cluster} cluster-scoped: read their content (kubectl locker why, helm get manifest) before you vouch\n"
        ));
    }
    match drift {
        None => out.push_str("  drift from live: not read\n"),
        Some(report) if !report.skipped.is_empty() => {
            for skipped in &report.skipped {
                out.push_str(&format!(
                    "  drift from live: not compared: {}\n",
                    skipped.reason
                ));
            }
        }
        Some(report) if report.differences.is_empty() => {
            out.push_str("  drift from live: none (the reverter would write nothing now)\n")
        }
        Some(report) => {
            out.push_str("  drift from live (what the reverter would put back):\n");
            for object in &report.differences {
                let place = match &object.namespace {
                    Some(ns) => format!("{ns}/{}", object.name),
                    None => object.name.clone(),
                };
                match object.state.as_str() {
                    "drifted" => {
                        for field in &object.fields {
                            out.push_str(&format!(
                                "    {} {place} {}: chart {}, live {}\n",
                                object.kind,
                                field.path,
                                super::show(Some(&field.chart)),
                                super::show(field.live.as_ref()),
                            ));
                        }
                    }
                    "missing" => out.push_str(&format!(
                        "    {} {place}: missing (recreated only if it was seen carrying the release's annotations)\n",
                        object.kind
                    )),
                    _ => out.push_str(&format!(
                        "    {} {place}: not read: {}\n",
                        object.kind,
                        object.error.as_deref().unwrap_or("unknown")
                    )),
                }
            }
        }
    }
    out
}

/// The line listing a revision a vouch skipped for its known author.
pub(crate) fn skipped(candidate: &Candidate, author: &str) -> String {
    let revision = &candidate.revision;
    format!(
        "skipped: release {} revision {} ({}): its author is {author}, who stays its author (to take it over, name it: kubectl locker vouch {} -n {} --include-known-authors)",
        revision.key(),
        revision.release.revision,
        revision.release.status,
        revision.release.name,
        revision.secret.namespace,
    )
}

/// A yes to "Vouch for it? [y/N]": `y` or `yes`, any case; anything else (an empty line, end of
/// input) is no.
pub(crate) fn confirmed(answer: &str) -> bool {
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Status;
    use helm_locker_core::test_util::release_secret;

    fn candidate(annotations: &[(&str, &str)]) -> Candidate {
        Candidate {
            revision: release_secret(
                "shop",
                "shop",
                2,
                Status::Deployed,
                super::super::tests::CHART,
            ),
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            resource_version: "4711".into(),
            content: "sha256:00".into(),
        }
    }

    #[test]
    fn a_tenants_revision_is_not_adopted_by_vouch_all() {
        // alice wrote the revision (stamped as her): --all skips it and says who she is.
        let alice = candidate(&[(
            AUTHOR_ANNOTATION,
            r#"{"username":"alice","groups":["system:authenticated"]}"#,
        )]);
        let author = claimed(&alice.annotations);
        assert_eq!(author, Claimed::Author("alice".into()));
        assert_eq!(
            eligible(&author, false),
            Eligible::KnownAuthor("alice".into())
        );
        let line = skipped(&alice, "alice");
        assert!(
            line.contains("shop/shop revision 2") && line.contains("its author is alice"),
            "{line}"
        );
        // Only named, with --include-known-authors, is it taken over.
        assert_eq!(eligible(&author, true), Eligible::Adopt);
    }

    #[test]
    fn a_revision_with_no_known_author_is_adopted() {
        let found = candidate(&[]);
        assert!(matches!(claimed(&found.annotations), Claimed::Nobody(_)));
        assert_eq!(
            eligible(&claimed(&found.annotations), false),
            Eligible::Adopt
        );
        // A stamp that names no one is no author either.
        for junk in ["not json", r#"{"username":""}"#] {
            let c = candidate(&[(AUTHOR_ANNOTATION, junk)]);
            assert_eq!(
                claimed(&c.annotations),
                Claimed::Nobody("its author stamp names no one")
            );
        }
    }

    #[test]
    fn the_show_names_the_revision_its_author_its_objects_and_calls_out_rbac_and_cluster_scope() {
        let found = candidate(&[]);
        let text = show(&found, None);
        assert!(
            text.contains("release shop/shop revision 2 (deployed)"),
            "{text}"
        );
        assert!(text.contains("resourceVersion 4711"), "{text}");
        assert!(
            text.contains("author: not known: written without the author webhook's stamp"),
            "{text}"
        );
        assert!(text.contains("with your rights"), "{text}");
        assert!(text.contains("apps/v1 Deployment shop/web\n"), "{text}");
        assert!(
            text.contains(
                "rbac.authorization.k8s.io/v1 ClusterRole reader  [RBAC, cluster-scoped]"
            ),
            "{text}"
        );
        assert!(text.contains("1 RBAC and 1 cluster-scoped"), "{text}");
        assert!(text.contains("drift from live: not read"), "{text}");
    }

    #[test]
    fn the_show_says_what_the_reverter_would_put_back() {
        let found = candidate(&[]);
        let index = crate::core::Index::from_secrets([found.revision.clone()]);
        let mut live = super::super::tests::live(
            &index,
            super::super::tests::live_deployment(7, "nginx:1.25"),
        );
        let role = live
            .keys()
            .find(|id| id.kind == "ClusterRole")
            .cloned()
            .unwrap();
        live.insert(role, super::super::Live::Missing);
        let schema = crate::core::Schema::embedded(crate::core::KubeVersion::NEWEST);
        let report = super::super::diff::diff(
            &index,
            &crate::core::Config::default(),
            &schema,
            &live,
            &Default::default(),
            0,
        );
        let text = show(&found, Some(&report));
        assert!(
            text.contains("Deployment shop/web /spec/replicas: chart 3, live 7"),
            "{text}"
        );
        assert!(text.contains("ClusterRole reader: missing"), "{text}");
        let calm = super::super::tests::live(
            &index,
            super::super::tests::live_deployment(3, "nginx:1.25"),
        );
        let report = super::super::diff::diff(
            &index,
            &crate::core::Config::default(),
            &schema,
            &calm,
            &Default::default(),
            0,
        );
        assert!(show(&found, Some(&report)).contains("drift from live: none"));
    }

    #[test]
    fn only_a_yes_confirms() {
        for yes in ["y", "Y\n", " yes "] {
            assert!(confirmed(yes), "{yes:?}");
        }
        for no in ["", "\n", "n", "no", "yess", "sure"] {
            assert!(!confirmed(no), "{no:?}");
        }
    }
}
