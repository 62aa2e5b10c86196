//! A hand-over between releases: one release taking over objects another holds.
//!
//! Moving a release from the Helm CLI to Flux (whose helm-controller installs it again as
//! `<targetNamespace>-<name>`, taking ownership of existing objects by default) or to Fleet is a
//! `pending-install` of a *new* release whose Helm writes the new release's `meta.helm.sh`
//! annotations onto objects the old, still deployed release holds. The owner rule holds each
//! object for the release its stored annotations name, the old one, so the write is denied and
//! Flux retries and remediates until it gives up.
//!
//! The write is let through when its author could have freed the objects the plain way, by
//! uninstalling the holding release: **the taking release is at work (pending), the written
//! object names it, it renders the object, and the author stamped on its newest revision may
//! delete Secrets where the holding release is stored** (ConfigMaps, when Helm's ConfigMap
//! driver keeps it; a SubjectAccessReview as that author, asked by the server). So the hand-over grants nobody anything: whoever passes could delete
//! the holding release's Secrets and unlock every one of its objects. Anyone else stays denied.

use std::sync::Arc;

use crate::author::{Access, Author, Authorship};
use crate::index::{Index, ReleaseKey};
use crate::review::{Operation, Request};

use super::{Allowed, Decision};

/// A denied write that is a hand-over if its author may make it: the question to put to the
/// API server as `author`.
#[derive(Clone, Debug, PartialEq)]
pub struct HandOver {
    /// The release that holds the object (its stored annotations name it).
    pub from: ReleaseKey,
    /// The release at work whose Helm writes its own annotations onto the object.
    pub to: ReleaseKey,
    /// Who wrote `to`'s newest revision (its stamp).
    pub author: Arc<Author>,
    /// Whether `author` may delete Secrets where `from` is stored.
    pub question: Access,
}

/// The hand-over a denial may be, or `None`: not a denial; not an update whose new object names
/// another release than the holding one; that release not at work, not rendering the object, or
/// of no known author.
pub fn hand_over_question(
    index: &Index,
    request: &Request<'_>,
    decision: &Decision,
) -> Option<HandOver> {
    let Decision::Deny(locked) = decision else {
        return None;
    };
    if request.operation != Operation::Update || locked.delete {
        return None;
    }
    let named = super::find::annotated_release(request.object())?;
    if named.is(&locked.release) {
        return None;
    }
    let target = &locked.target;
    let group = target
        .api_version
        .rsplit_once('/')
        .map_or("", |(group, _)| group);
    let claims = index.find(
        group,
        &target.kind,
        target.namespace.as_deref(),
        &target.name,
    )?;
    // Of the releases of that name, the one stored in its own namespace first (as the owner
    // rule orders them).
    let mut taking = claims.all().filter(|c| c.release.is(&named));
    let first = taking.next()?;
    let claim = std::iter::once(first)
        .chain(taking)
        .find(|c| c.release.stored_in.is_none())
        .unwrap_or(first);
    let state = index.release(&claim.release)?;
    let newest = state.newest()?;
    if !newest.status.is_helm_at_work() {
        return None;
    }
    let Authorship::Known(author) = &newest.author else {
        return None;
    };
    // Uninstalling the holder deletes the objects its driver keeps it in.
    let holder_kept_in = index
        .release(&locked.release)
        .and_then(|s| s.newest())
        .map_or(crate::release::Driver::default(), |r| r.secret.driver);
    Some(HandOver {
        from: locked.release.clone(),
        to: (*claim.release).clone(),
        author: author.clone(),
        question: Access::resource(
            "delete",
            "",
            holder_kept_in.resource(),
            Some(locked.release.storage_namespace()),
            "",
        ),
    })
}

/// `decision` when the author may not hand over (`allowed` false), else the write allowed as a
/// hand-over.
pub fn hand_over(decision: Decision, hand_over: &HandOver, allowed: bool) -> Decision {
    if !allowed || !matches!(decision, Decision::Deny(_)) {
        return decision;
    }
    Decision::Allow(Allowed::HandedOver {
        from: hand_over.from.clone(),
        to: hand_over.to.clone(),
        author: hand_over.author.username.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Config;
    use crate::release::Status;
    use crate::review::parse_review;
    use crate::schema::Schema;
    use serde_json::{json, Value};

    const CHART: &str =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  colour: blue\n";

    fn object(release: &str, colour: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "settings", "namespace": "apps",
                            "annotations": {"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": "apps"}},
               "data": {"colour": colour}})
    }

    /// `cli` (the Helm CLI's, deployed) holds the ConfigMap; `apps-cli` (Flux's, stored in
    /// flux-system) renders it too, at `status`, written by `author`.
    fn index(status: Status, author: Option<&str>) -> Index {
        let cli = crate::test_util::release_secret("apps", "cli", 1, Status::Deployed, CHART);
        let mut flux =
            crate::test_util::release_secret("flux-system", "apps-cli", 1, status, CHART);
        flux.release.namespace = "apps".into();
        if let Some(name) = author {
            flux.author = Authorship::Known(Arc::new(Author {
                username: name.into(),
                ..Author::default()
            }));
        }
        Index::from_secrets([cli, flux])
    }

    fn decide(index: &Index, new: Value) -> (Decision, Option<HandOver>) {
        let body = crate::test_util::review("UPDATE", "v1", "ConfigMap", "configmaps")
            .uid("u")
            .name(Some("apps"), "settings")
            .user("system:serviceaccount:flux-system:helm-controller")
            .object(new)
            .old_object(object("cli", "blue"))
            .body();
        let review = parse_review(&body).unwrap();
        let decision = crate::decide(
            index,
            &Schema::builtin(),
            &Config::default(),
            &review.request,
        )
        .unwrap();
        let question = hand_over_question(index, &review.request, &decision);
        (decision, question)
    }

    #[test]
    fn a_release_at_work_taking_over_an_object_asks_whether_its_author_could_uninstall_the_holder()
    {
        let flux = "system:serviceaccount:flux-system:helm-controller";
        let index = index(Status::PendingInstall, Some(flux));
        let (decision, question) = decide(&index, object("apps-cli", "blue"));
        assert!(matches!(decision, Decision::Deny(_)), "{decision:?}");
        let question = question.expect("a hand-over");
        assert_eq!(question.from, ReleaseKey::new("apps", "cli"));
        assert_eq!(
            question.to,
            ReleaseKey::stored("apps", "apps-cli", "flux-system")
        );
        assert_eq!(question.author.username, flux);
        assert_eq!(
            (
                question.question.verb.as_str(),
                question.question.resource.as_str(),
                question.question.namespace.as_deref()
            ),
            ("delete", "secrets", Some("apps"))
        );
        let allowed = hand_over(decision.clone(), &question, true);
        assert!(
            allowed
                .explain()
                .contains("takes this object over from release apps/cli"),
            "{}",
            allowed.explain()
        );
        assert_eq!(hand_over(decision.clone(), &question, false), decision);
        // A holder kept by Helm's ConfigMap driver: could the author delete its ConfigMaps?
        let mut cli = crate::test_util::release_secret("apps", "cli", 1, Status::Deployed, CHART);
        cli.secret.driver = crate::release::Driver::ConfigMap;
        let mut index = index.clone();
        index.remove_secret(&crate::release::SecretRef::secret(
            "apps",
            "sh.helm.release.v1.cli.v1",
        ));
        index.upsert(cli);
        let (_, question) = decide(&index, object("apps-cli", "blue"));
        assert_eq!(
            question.expect("a hand-over").question.resource,
            "configmaps"
        );
    }

    #[test]
    fn no_hand_over_unless_the_write_names_a_release_at_work_of_a_known_author() {
        let flux = Some("system:serviceaccount:flux-system:helm-controller");
        // The taking release is deployed (not Helm at work).
        assert_eq!(
            decide(&index(Status::Deployed, flux), object("apps-cli", "blue")).1,
            None
        );
        // Its author is not known.
        assert_eq!(
            decide(
                &index(Status::PendingInstall, None),
                object("apps-cli", "blue")
            )
            .1,
            None
        );
        // The write keeps the holder's annotations (a change of a value, not a take-over).
        let (decision, question) =
            decide(&index(Status::PendingInstall, flux), object("cli", "red"));
        assert!(matches!(decision, Decision::Deny(_)));
        assert_eq!(question, None);
        // It names a release that does not render the object.
        assert_eq!(
            decide(
                &index(Status::PendingInstall, flux),
                object("other", "blue")
            )
            .1,
            None
        );
    }
}
