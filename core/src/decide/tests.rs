use super::message::first_difference;
use super::*;
use crate::release::ReleaseSecret;
use crate::review::parse_review;
use serde_json::json;

const CHART: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {app: web}\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: reader}\nrules: []\n";

fn index(status: Status) -> Index {
    Index::from_secrets([crate::test_util::release_secret(
        "shop", "shop", 2, status, CHART,
    )])
}

fn deployment(replicas: i64, image: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"},
                                                                          "annotations": {"meta.helm.sh/release-name": "shop", "meta.helm.sh/release-namespace": "shop"}},
           "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "web", "image": image, "imagePullPolicy": "IfNotPresent"}]}}}})
}

// One argument per AdmissionRequest field the tests vary: a struct would only rename them.
#[allow(clippy::too_many_arguments)]
fn review(
    op: &str,
    kind: Value,
    resource: Value,
    sub: Option<&str>,
    name: &str,
    ns: Option<&str>,
    user: &str,
    object: Value,
    old: Value,
) -> String {
    let text = |v: &Value, f: &str| v[f].as_str().unwrap_or_default().to_string();
    let api_version =
        |v: &Value| crate::manifest::api_version(&text(v, "group"), &text(v, "version"));
    let mut review = crate::test_util::review(
        op,
        &api_version(&resource),
        &text(&kind, "kind"),
        &text(&resource, "resource"),
    )
    .kind(&api_version(&kind), &text(&kind, "kind"))
    .uid("u")
    .name(ns, name)
    .user(user)
    .object(object)
    .old_object(old);
    if let Some(sub) = sub {
        review = review.sub_resource(sub);
    }
    String::from_utf8(review.body()).unwrap()
}

/// The co-owner rule on a request's raw managedFields (what `decide` runs).
#[test]
fn a_server_side_apply_of_helms_fields_makes_a_co_owner() {
    let schema = Schema::builtin();
    let root = schema.root_or_deduced("v1", "ConfigMap");
    let chart = crate::tree::Tree::from(
        &json!({"metadata": {"name": "cfg"}, "data": {"greeting": "hi", "mode": "prod"}}),
    );
    let entry = |manager: &str, op: &str, fields: Value| json!({"manager": manager, "operation": op, "fieldsV1": fields});
    let helm = entry(
        "helm",
        "Apply",
        json!({"f:metadata": {"f:annotations": {"f:meta.helm.sh/release-name": {}}}, "f:data": {"f:greeting": {}, "f:mode": {}}}),
    );
    let object = |entries: Vec<Value>| json!({"metadata": {"name": "cfg", "managedFields": entries}, "data": {"greeting": "hi", "mode": "prod", "extra": "x"}});
    let claims = |manager: &str, new: &Value, old: Option<&Value>| {
        let body = crate::test_util::review("UPDATE", "v1", "ConfigMap", "configmaps")
            .uid("u")
            .name(Some("shop"), "cfg")
            .object(new.clone())
            .old_object(old.cloned().unwrap_or(Value::Null))
            .body();
        let review = parse_review(&body).unwrap();
        co_owner_claims(
            &schema,
            root,
            &chart,
            ("shop", "shop"),
            manager,
            &review.request,
        )
    };
    // kubectl applies the chart's own greeting and a key of its own: it co-owns greeting.
    let new = object(vec![
        helm.clone(),
        entry(
            "kubectl",
            "Apply",
            json!({"f:data": {"f:greeting": {}, "f:extra": {}}}),
        ),
    ]);
    let shared = claims("kubectl", &new, None);
    assert_eq!(shared, ["f:data.f:greeting"]);
    assert_eq!(describe_field_path(&shared[0]), "/data/greeting");
    // Only its own key: free. Helm applying: never a co-owner. An Update (kubectl patch): no.
    let own = object(vec![
        helm.clone(),
        entry("kubectl", "Apply", json!({"f:data": {"f:extra": {}}})),
    ]);
    assert!(claims("kubectl", &own, None).is_empty());
    assert!(claims("helm", &new, None).is_empty());
    let patch = object(vec![
        helm.clone(),
        entry("kubectl", "Update", json!({"f:data": {"f:greeting": {}}})),
    ]);
    assert!(claims("kubectl", &patch, None).is_empty());
    // Already co-owned before this write (an API server that keeps oldObject's managedFields).
    let before = object(vec![
        helm.clone(),
        entry("kubectl", "Apply", json!({"f:data": {"f:greeting": {}}})),
    ]);
    assert!(claims("kubectl", &new, Some(&before)).is_empty());
    // kube-apiserver 1.20 shows the new entries in oldObject too: not "already co-owned".
    assert_eq!(claims("kubectl", &new, Some(&new)), ["f:data.f:greeting"]);
    // Helm's entry is the one owning the release annotation, whatever its manager's name.
    let renamed = object(vec![
        entry(
            "helm-controller",
            "Apply",
            json!({"f:metadata": {"f:annotations": {"f:meta.helm.sh/release-name": {}}}, "f:data": {"f:greeting": {}}}),
        ),
        entry("kubectl", "Apply", json!({"f:data": {"f:greeting": {}}})),
    ]);
    assert!(claims("helm-controller", &renamed, None).is_empty());
    assert_eq!(claims("kubectl", &renamed, None), ["f:data.f:greeting"]);
    // An apply of Helm's annotations too (Flux's drift detection applies them with the chart)
    // shares their ownership: its entry, even listed first (entries of the same second are
    // ordered by manager name), is not Helm's.
    let sharing = object(vec![
        entry(
            "helm-controller",
            "Apply",
            json!({"f:metadata": {"f:annotations": {"f:meta.helm.sh/release-name": {}}}, "f:data": {"f:greeting": {}}}),
        ),
        helm.clone(),
    ]);
    assert_eq!(
        claims("helm-controller", &sharing, None),
        [
            "f:data.f:greeting",
            "f:metadata.f:annotations.f:meta.helm.sh/release-name"
        ]
    );
}

/// kube-apiserver writes JSON with Go's encoder, which escapes `<`, `>`, `&` and U+2028/9:
/// a manager named `ops&sre` appears as `ops\u0026sre` in the review, and is still found.
#[test]
fn a_co_owner_is_found_whatever_its_name_and_however_it_is_escaped() {
    for manager in ["ops-sre", "ops&sre", "<ops>", "ops\u{2028}sre"] {
        let mut new = deployment(3, "nginx:1.25");
        new["metadata"]["managedFields"] = json!([
            {"manager": "helm", "operation": "Apply", "fieldsV1": {"f:metadata": {"f:annotations": {"f:meta.helm.sh/release-name": {}}}, "f:spec": {"f:replicas": {}}}},
            {"manager": manager, "operation": "Apply", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]);
        let body = crate::test_util::review("UPDATE", "apps/v1", "Deployment", "deployments")
            .uid("u")
            .name(Some("shop"), "web")
            .user("alice")
            .field_manager(manager)
            .object(new)
            .old_object(deployment(3, "nginx:1.25"))
            .body();
        let body = crate::test_util::go_order(&String::from_utf8(body).unwrap());
        if manager != "ops-sre" {
            assert!(!body.contains(manager), "not escaped: {body}");
        }
        let d = decide_json(&index(Status::Deployed), &Config::default(), &body);
        let Decision::Deny(l) = &d else {
            panic!("{manager}: {d:?}")
        };
        assert!(l.message.contains("/spec/replicas"), "{}", l.message);
    }
}

/// Flux's drift detection: a server-side apply of the chart as `helm-controller`, a dry run, on
/// a release the Helm CLI installed (Helm's entry is `helm`'s). Stored, it would make
/// helm-controller a co-owner (denied, below); as a dry run nothing is kept, so only the values
/// it would write count: the chart's pass, another value is still denied.
#[test]
fn a_dry_run_makes_no_co_owner_but_its_values_are_still_locked() {
    let apply = |replicas: i64, dry_run: bool| {
        let mut new = deployment(replicas, "nginx:1.25");
        new["metadata"]["managedFields"] = json!([
            {"manager": "helm", "operation": "Apply", "fieldsV1": {"f:metadata": {"f:annotations": {"f:meta.helm.sh/release-name": {}}}, "f:spec": {"f:replicas": {}}}},
            {"manager": "helm-controller", "operation": "Apply", "fieldsV1": {"f:metadata": {"f:annotations": {"f:meta.helm.sh/release-name": {}}}, "f:spec": {"f:replicas": {}}}}]);
        let mut review = crate::test_util::review("UPDATE", "apps/v1", "Deployment", "deployments")
            .uid("u")
            .name(Some("shop"), "web")
            .user("system:serviceaccount:flux-system:helm-controller")
            .field_manager("helm-controller")
            .object(new)
            .old_object(deployment(3, "nginx:1.25"));
        if dry_run {
            review = review.dry_run();
        }
        let body = String::from_utf8(review.body()).unwrap();
        decide_json(&index(Status::Deployed), &Config::default(), &body)
    };
    let Decision::Deny(stored) = apply(3, false) else {
        panic!("a stored apply of Helm's fields by another manager makes a co-owner")
    };
    assert!(stored.message.contains("co-owner"), "{}", stored.message);
    assert!(matches!(
        apply(3, true),
        Decision::Allow(Allowed::NoLockedChange { .. })
    ));
    let Decision::Deny(other) = apply(7, true) else {
        panic!("a dry run of another value is denied as the write would be")
    };
    assert!(
        other.message.contains("/spec/replicas"),
        "{}",
        other.message
    );
}

fn decide_json(index: &Index, config: &Config, body: &str) -> Decision {
    decide(
        index,
        &Schema::builtin(),
        config,
        &parse_review(body.as_bytes()).unwrap().request,
    )
    .unwrap()
}

fn deploy_update(user: &str, new: Value, old: Value) -> String {
    review(
        "UPDATE",
        json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
        json!({"group": "apps", "version": "v1", "resource": "deployments"}),
        None,
        "web",
        Some("shop"),
        user,
        new,
        old,
    )
}

#[test]
fn with_a_registration_namespace_only_registered_unsuspended_releases_are_locked() {
    use crate::policy::{IgnoreRule, Registration};
    let config = Config {
        registration_namespace: Some("cattle-helm-system".into()),
        ..Config::default()
    };
    let write = deploy_update(
        "admin",
        deployment(7, "nginx:1.26"),
        deployment(3, "nginx:1.25"),
    );
    let mut idx = index(Status::Deployed);
    let d = decide_json(&idx, &config, &write);
    assert_eq!(
        d.explain(),
        "allowed: release shop/shop is not locked (no HelmRelease in cattle-helm-system registers it)"
    );
    let registration = Registration {
        helmrelease: "cattle-helm-system/shop".into(),
        ..Registration::default()
    };
    idx.set_registration(ReleaseKey::new("shop", "shop"), Some(registration.clone()));
    assert!(matches!(
        decide_json(&idx, &config, &write),
        Decision::Deny(_)
    ));
    // The HelmRelease's own ignore rules and exemptions add to the configuration's.
    let relaxed = Registration {
        ignore: vec![IgnoreRule {
            paths: vec!["/spec/template/spec/containers/*/image".into()],
            ..IgnoreRule::default()
        }],
        exempt: Some(crate::policy::Exemptions {
            users: vec!["ci-bot".into()],
            ..Default::default()
        }),
        mode: Some(Mode::Warn),
        ..registration.clone()
    };
    idx.set_registration(ReleaseKey::new("shop", "shop"), Some(relaxed));
    let Decision::Warn(locked) = decide_json(&idx, &config, &write) else {
        panic!("spec.mode warn")
    };
    assert_eq!(locked.changes.len(), 1, "{:?}", locked.changes);
    assert_eq!(locked.changes[0].path, "/spec/replicas");
    let by_bot = deploy_update(
        "ci-bot",
        deployment(7, "nginx:1.26"),
        deployment(3, "nginx:1.25"),
    );
    assert!(matches!(
        decide_json(&idx, &config, &by_bot),
        Decision::Allow(Allowed::Exempt { .. })
    ));
    let suspended = Registration {
        suspend: true,
        ..registration
    };
    idx.set_registration(ReleaseKey::new("shop", "shop"), Some(suspended));
    assert_eq!(
        decide_json(&idx, &config, &write).explain(),
        "allowed: release shop/shop is not locked (its HelmRelease cattle-helm-system/shop is suspended)"
    );
    idx.set_registration(ReleaseKey::new("shop", "shop"), None);
    assert!(decide_json(&idx, &config, &write).is_allowed());
}

fn release_secret(name: &str, revision: u64, status: Status) -> ReleaseSecret {
    crate::test_util::release_secret("shop", name, revision, status, CHART)
}

fn annotated(mut object: Value, release: &str) -> Value {
    object["metadata"]["annotations"] = json!({
        "meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": "shop"});
    object
}

#[test]
fn a_pending_release_cannot_take_over_an_object_another_release_holds() {
    // `other` renders the same Deployment and installs with --take-ownership (pending);
    // the object's annotations name `shop`, deployed: its lock holds.
    let index = Index::from_secrets([
        release_secret("shop", 2, Status::Deployed),
        release_secret("other", 1, Status::PendingInstall),
    ]);
    let old = annotated(deployment(3, "nginx:1.25"), "shop");
    let takeover = annotated(deployment(3, "nginx:1.25"), "other");
    // The head and the user cannot tell which release holds it: the whole review decides.
    let body = crate::test_util::go_order(&deploy_update("admin", takeover.clone(), old.clone()));
    let mut head = crate::review::read_head(body.as_bytes()).unwrap();
    assert!(head.read_user());
    let schema = Schema::builtin();
    let config = Config::default();
    let request = &head.review.request;
    let mut found = find(&index, &schema, request);
    assert_eq!(found.answer(&index, request), None);
    assert_eq!(found.check_user(&index, &config, request), None);
    // Carried on to the whole review, the annotations decide: `shop` holds it.
    let whole = head.rest().unwrap();
    let carried = decide_found(&index, &schema, &config, &whole.request, found).unwrap();
    let Decision::Deny(locked) = &carried else {
        panic!("{carried:?}")
    };
    assert_eq!(locked.release, ReleaseKey::new("shop", "shop"));
    let d = decide_json(
        &index,
        &Config::default(),
        &deploy_update("admin", takeover, old),
    );
    let Decision::Deny(locked) = &d else {
        panic!("{d:?}")
    };
    assert_eq!(locked.release, ReleaseKey::new("shop", "shop"));
    assert!(
        locked.message.contains("meta.helm.sh~1release-name"),
        "{}",
        locked.message
    );
    // Once the object names `other`, `other` at work opens it.
    let mine = annotated(deployment(3, "nginx:1.25"), "other");
    let d = decide_json(
        &index,
        &Config::default(),
        &deploy_update(
            "admin",
            annotated(deployment(4, "nginx:1.25"), "other"),
            mine,
        ),
    );
    assert!(
        matches!(d, Decision::Allow(Allowed::HelmAtWork { .. })),
        "{d:?}"
    );
}

#[test]
fn adding_an_owner_reference_is_a_delete() {
    let old = deployment(3, "nginx:1.25");
    let mut new = old.clone();
    new["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "u-1"}]);
    let d = decide_json(
        &index(Status::Deployed),
        &Config::default(),
        &deploy_update("admin", new.clone(), old.clone()),
    );
    let Decision::Deny(locked) = &d else {
        panic!("{d:?}")
    };
    assert!(
        locked.message.contains(
            "adds an owner reference the chart does not set (/metadata/ownerReferences/0)"
        ),
        "{}",
        locked.message
    );
    // Repair takes it out again.
    let repair = Config {
        mode: Mode::Repair,
        ..Config::default()
    };
    let d = decide_json(
        &index(Status::Deployed),
        &repair,
        &deploy_update("admin", new.clone(), old),
    );
    let Decision::Repair(_, patch) = d else {
        panic!("{d:?}")
    };
    let mut repaired = new.clone();
    json_patch::patch(&mut repaired, &patch).unwrap();
    assert_eq!(repaired["metadata"]["ownerReferences"], json!([]));
    // One that was already there is not this write's doing.
    let d = decide_json(
        &index(Status::Deployed),
        &Config::default(),
        &deploy_update("admin", new.clone(), new),
    );
    assert!(d.is_allowed(), "{d:?}");
}

#[test]
fn denies_a_chart_field_change_with_an_actionable_message() {
    let d = decide_json(
        &index(Status::Deployed),
        &Config::default(),
        &deploy_update(
            "admin",
            deployment(7, "nginx:1.25"),
            deployment(3, "nginx:1.25"),
        ),
    );
    let Decision::Deny(locked) = &d else {
        panic!("{d:?}")
    };
    assert_eq!(locked.message, "Deployment shop/web is locked by Helm release shop/shop (revision 2, deployed): /spec/replicas is 3 in the chart, this request sets 7. Change it with helm upgrade, or ask an admin.");
    assert_eq!(
        d.needs_confirmation(),
        Some(&ReleaseKey::new("shop", "shop"))
    );
}

#[test]
fn rules_two_to_four_allow() {
    let body = deploy_update(
        "admin",
        deployment(7, "nginx:1.25"),
        deployment(3, "nginx:1.25"),
    );
    for status in [
        Status::PendingUpgrade,
        Status::PendingInstall,
        Status::PendingRollback,
        Status::Uninstalling,
    ] {
        assert!(matches!(
            decide_json(&index(status), &Config::default(), &body),
            Decision::Allow(Allowed::HelmAtWork { .. })
        ));
    }
    for status in [Status::Superseded, Status::Uninstalled, Status::Unknown] {
        assert!(matches!(
            decide_json(&index(status), &Config::default(), &body),
            Decision::Allow(Allowed::NotLocked { .. })
        ));
    }
    let off = Config {
        mode: Mode::Off,
        ..Config::default()
    };
    assert!(matches!(
        decide_json(&index(Status::Deployed), &off, &body),
        Decision::Allow(Allowed::NotLocked { .. })
    ));
    let controller = deploy_update(
        "system:serviceaccount:kube-system:deployment-controller",
        deployment(7, "nginx:1.25"),
        deployment(3, "nginx:1.25"),
    );
    assert!(matches!(
        decide_json(&index(Status::Deployed), &Config::default(), &controller),
        Decision::Allow(Allowed::Exempt { .. })
    ));
}

#[test]
fn unowned_objects_and_unlocked_fields_are_allowed() {
    let mut other = deployment(7, "x");
    other["metadata"]["name"] = json!("other");
    let body = review(
        "UPDATE",
        json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
        json!({"group": "apps", "resource": "deployments"}),
        None,
        "other",
        Some("shop"),
        "admin",
        other.clone(),
        other,
    );
    assert_eq!(
        decide_json(&index(Status::Deployed), &Config::default(), &body),
        Decision::Allow(Allowed::NotOwned)
    );
    let mut annotated = deployment(3, "nginx:1.25");
    annotated["metadata"]["annotations"]["note"] = json!("hello");
    let d = decide_json(
        &index(Status::Deployed),
        &Config::default(),
        &deploy_update("admin", annotated, deployment(3, "nginx:1.25")),
    );
    assert!(matches!(d, Decision::Allow(Allowed::NoLockedChange { .. })));
}

#[test]
fn delete_is_denied_and_a_collection_delete_reads_the_old_object() {
    let body = review(
        "DELETE",
        json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
        json!({"group": "apps", "resource": "deployments"}),
        None,
        "",
        Some("shop"),
        "admin",
        Value::Null,
        deployment(3, "nginx:1.25"),
    );
    let Decision::Deny(l) = decide_json(&index(Status::Deployed), &Config::default(), &body) else {
        panic!()
    };
    assert!(l.delete);
    assert!(
        l.message.contains("deleting it is not allowed"),
        "{}",
        l.message
    );
    // The name is read as JSON reads it (escaped), and an object with no name is nobody's.
    let escaped = body.replacen(r#""name":"web""#, r#""name":"w\u0065b""#, 1);
    assert!(
        escaped.contains(r#""name":"w\u0065b","namespace":"shop""#),
        "{escaped}"
    );
    assert!(matches!(
        decide_json(&index(Status::Deployed), &Config::default(), &escaped),
        Decision::Deny(_)
    ));
    for metadata in [Value::Null, json!({}), json!({"generateName": "web"})] {
        let mut nameless: Value = serde_json::from_str(&body).unwrap();
        nameless["request"]["oldObject"]["metadata"] = metadata.clone();
        assert!(
            matches!(
                decide_json(
                    &index(Status::Deployed),
                    &Config::default(),
                    &nameless.to_string()
                ),
                Decision::Allow(Allowed::NotOwned)
            ),
            "{metadata}"
        );
    }
}

/// A collection DELETE names its object only in `oldObject`, which the head does not hold: the
/// head answers it only where no release renders anything, and the whole review elsewhere.
#[test]
fn a_delete_naming_no_object_is_answered_from_the_head_only_where_no_release_renders_anything() {
    let schema = Schema::builtin();
    let mut index = index(Status::Deployed);
    let delete = |kind: Value, resource: Value, ns: Option<&str>, old: Value| {
        review(
            "DELETE",
            kind,
            resource,
            None,
            "",
            ns,
            "admin",
            Value::Null,
            old,
        )
    };
    let deployments = || {
        (
            json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
            json!({"group": "apps", "resource": "deployments"}),
        )
    };
    let head_of = |body: &str, index: &Index| {
        let head = crate::review::parse_head(body.as_bytes()).expect("a head without a name");
        assert_eq!(head.request.name(), None);
        find(index, &schema, &head.request).answer(index, &head.request)
    };
    let (kind, resource) = deployments();
    let chart_web = delete(kind, resource, Some("shop"), deployment(3, "nginx:1.25"));
    // In the release's namespace: the whole review decides (here: the chart's Deployment).
    assert_eq!(head_of(&chart_web, &index), None);
    assert!(matches!(
        decide_json(&index, &Config::default(), &chart_web),
        Decision::Deny(_)
    ));
    // Where no release renders anything, the head answers what the whole review would.
    let (kind, resource) = deployments();
    let mut elsewhere = deployment(3, "nginx:1.25");
    elsewhere["metadata"]["namespace"] = json!("temp");
    let temp = delete(kind, resource, Some("temp"), elsewhere);
    assert_eq!(
        head_of(&temp, &index),
        Some(Decision::Allow(Allowed::NotOwned))
    );
    assert_eq!(
        decide_json(&index, &Config::default(), &temp),
        Decision::Allow(Allowed::NotOwned)
    );
    // Cluster-scoped (no namespace), or a Namespace (its own name as namespace): the whole
    // review decides.
    let role = delete(
        json!({"group": "rbac.authorization.k8s.io", "version": "v1", "kind": "ClusterRole"}),
        json!({"group": "rbac.authorization.k8s.io", "resource": "clusterroles"}),
        None,
        json!({"metadata": {"name": "reader"}}),
    );
    assert_eq!(head_of(&role, &index), None);
    let namespace = delete(
        json!({"group": "", "version": "v1", "kind": "Namespace"}),
        json!({"group": "", "resource": "namespaces"}),
        Some("temp"),
        json!({"metadata": {"name": "temp"}}),
    );
    assert_eq!(head_of(&namespace, &index), None);
    // Once the release is gone, its namespace holds nothing: answered from the head.
    index.remove_secret(
        &crate::test_util::release_secret("shop", "shop", 2, Status::Deployed, CHART).secret,
    );
    assert!(!index.holds_objects_in("shop"));
    assert_eq!(
        head_of(&chart_web, &index),
        Some(Decision::Allow(Allowed::NotOwned))
    );
}

/// The trust boundary (issue 24): a release's word reaches only objects that carry its
/// annotations, which only those who may write the object can put there.
#[test]
fn only_an_object_carrying_the_releases_annotations_is_locked() {
    let chart = format!("{CHART}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: victim-config, namespace: victim}}\ndata: {{mode: forged}}\n");
    let idx = index_of(&chart);
    let config = Config::default();
    let plain = |replicas| {
        let mut d = deployment(replicas, "nginx:1.25");
        d["metadata"].as_object_mut().unwrap().remove("annotations");
        d
    };
    // Stored without the annotations (made by someone else, or before Helm 3.2): free.
    let d = decide_json(&idx, &config, &deploy_update("alice", plain(7), plain(3)));
    assert!(
        matches!(&d, Decision::Allow(Allowed::Unproven { release }) if release.name == "shop"),
        "{d:?}"
    );
    assert!(d
        .explain()
        .contains("does not carry the release's meta.helm.sh annotations"));
    // Naming another release: not this one's either.
    let other = annotated(plain(3), "other");
    let d = decide_json(&idx, &config, &deploy_update("alice", plain(7), other));
    assert!(
        matches!(d, Decision::Allow(Allowed::Unproven { .. })),
        "{d:?}"
    );
    // Adding the release's annotations to an object that lacks them claims nothing stored.
    let claimed = annotated(plain(7), "shop");
    assert!(decide_json(&idx, &config, &deploy_update("alice", claimed, plain(3))).is_allowed());
    // Stored with them: locked, and removing them is a change of what Helm owns.
    let d = decide_json(
        &idx,
        &config,
        &deploy_update("alice", plain(3), deployment(3, "nginx:1.25")),
    );
    assert!(
        matches!(&d, Decision::Deny(l) if l.proof == OwnerProof::Shown),
        "{d:?}"
    );

    let configmap = |data: &str, annotations: Option<(&str, &str)>| {
        let mut c = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "victim-config", "namespace": "victim"}, "data": {"mode": data}});
        if let Some((name, namespace)) = annotations {
            c["metadata"]["annotations"] = json!({"meta.helm.sh/release-name": name, "meta.helm.sh/release-namespace": namespace});
        }
        c
    };
    let write = |op: &str, user: &str, new: Value, old: Value| {
        review(
            op,
            json!({"group": "", "version": "v1", "kind": "ConfigMap"}),
            json!({"group": "", "version": "v1", "resource": "configmaps"}),
            None,
            "victim-config",
            Some("victim"),
            user,
            new,
            old,
        )
    };
    // Another team's own ConfigMap in another namespace: its writes and its delete are free.
    let theirs = configmap("theirs", None);
    for (op, new) in [
        ("UPDATE", configmap("changed", None)),
        ("DELETE", Value::Null),
    ] {
        let d = decide_json(&idx, &config, &write(op, "bob", new, theirs.clone()));
        assert!(
            matches!(d, Decision::Allow(Allowed::Unproven { .. })),
            "{op}: {d:?}"
        );
    }
    // A CREATE outside the release's namespace is locked only when it claims the release.
    let d = decide_json(
        &idx,
        &config,
        &write("CREATE", "bob", configmap("theirs", None), Value::Null),
    );
    assert!(
        matches!(d, Decision::Allow(Allowed::Unproven { .. })),
        "{d:?}"
    );
    let d = decide_json(
        &idx,
        &config,
        &write(
            "CREATE",
            "bob",
            configmap("theirs", Some(("shop", "shop"))),
            Value::Null,
        ),
    );
    assert!(matches!(d, Decision::Deny(_)), "{d:?}");
    // In the release's own namespace, a CREATE is compared with the chart as before.
    let create = review(
        "CREATE",
        json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
        json!({"group": "apps", "version": "v1", "resource": "deployments"}),
        None,
        "web",
        Some("shop"),
        "alice",
        plain(7),
        Value::Null,
    );
    assert!(matches!(
        decide_json(&idx, &config, &create),
        Decision::Deny(_)
    ));
}

/// A CREATE has no stored object: a field the chart sets that the new object leaves out,
/// or a keyed item under another key, is a change (the next helm upgrade puts it back).
#[test]
fn a_create_is_compared_with_the_whole_chart() {
    let create = |object: Value| {
        review(
            "CREATE",
            json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
            json!({"group": "apps", "version": "v1", "resource": "deployments"}),
            None,
            "web",
            Some("shop"),
            "alice",
            object,
            Value::Null,
        )
    };
    let mut exact = deployment(3, "nginx:1.25");
    exact["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("Helm");
    let idx = index(Status::Deployed);
    let d = decide_json(&idx, &Config::default(), &create(exact.clone()));
    assert!(d.is_allowed(), "{d:?}");
    let mut no_image = exact.clone();
    no_image["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("image");
    let Decision::Deny(l) = decide_json(&idx, &Config::default(), &create(no_image)) else {
        panic!("a CREATE without the chart's image was allowed")
    };
    assert_eq!(l.changes[0].path, "/spec/template/spec/containers/0/image");
    let mut renamed = exact.clone();
    renamed["spec"]["template"]["spec"]["containers"][0]["name"] = json!("api");
    assert!(matches!(
        decide_json(&idx, &Config::default(), &create(renamed)),
        Decision::Deny(_)
    ));
    let mut unlabelled = exact;
    unlabelled["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("app.kubernetes.io/managed-by");
    assert!(matches!(
        decide_json(&idx, &Config::default(), &create(unlabelled)),
        Decision::Deny(_)
    ));
}

/// On a release Helm applies server-side, a CREATE of the chart's own content by another
/// field manager is denied: that manager would co-own every field it set, and the next
/// helm upgrade that changes one fails with a conflict. Helm's own apply is not.
#[test]
fn a_create_by_another_field_manager_of_a_server_side_release_is_denied() {
    let mut secret = crate::test_util::release_secret("shop", "shop", 2, Status::Deployed, CHART);
    secret.release.apply_method = Some("ssa".into());
    let ssa = Index::from_secrets([secret]);
    let created = |manager: &str, operation: &str, owns_annotation: bool| {
        let mut object = deployment(3, "nginx:1.25");
        object["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("Helm");
        let mut fields = json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}});
        if owns_annotation {
            fields["f:metadata"] = json!({"f:annotations": {"f:meta.helm.sh/release-name": {}}});
        }
        object["metadata"]["managedFields"] = json!([{"manager": manager, "operation": operation,
            "apiVersion": "apps/v1", "fieldsType": "FieldsV1", "fieldsV1": fields}]);
        review(
            "CREATE",
            json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
            json!({"group": "apps", "version": "v1", "resource": "deployments"}),
            None,
            "web",
            Some("shop"),
            "alice",
            object,
            Value::Null,
        )
    };
    let d = decide_json(
        &ssa,
        &Config::default(),
        &created("kubectl-create", "Update", true),
    );
    let Decision::Deny(l) = &d else {
        panic!("a kubectl create of a server-side release's object was allowed: {d:?}")
    };
    assert!(
        l.message.contains("field manager \"kubectl-create\""),
        "{}",
        l.message
    );
    assert!(l.message.contains("/spec/replicas"), "{}", l.message);
    // With the reverter running, the restore is allowed: the reverter hands the restorer's
    // share of Helm's fields back to Helm (revert_plan::ownership_return). A value other
    // than the chart's stays denied.
    let reverting = Config {
        ownership_returned: true,
        ..Config::default()
    };
    let d = decide_json(&ssa, &reverting, &created("kubectl-create", "Update", true));
    assert!(d.is_allowed(), "{d:?}");
    let mut other =
        serde_json::from_str::<Value>(&created("kubectl-create", "Update", true)).unwrap();
    other["request"]["object"]["spec"]["replicas"] = json!(5);
    let d = decide_json(&ssa, &reverting, &other.to_string());
    assert!(matches!(d, Decision::Deny(_)), "{d:?}");
    // Helm's own apply (an Apply entry owning the release annotation) is not a co-owner.
    let d = decide_json(&ssa, &Config::default(), &created("helm", "Apply", true));
    assert!(d.is_allowed(), "{d:?}");
    // Another applier that leaves Helm's annotation to others still co-owns the fields.
    let d = decide_json(&ssa, &Config::default(), &created("ops", "Apply", false));
    assert!(matches!(d, Decision::Deny(_)), "{d:?}");
    // A client-side (Helm 3 style) release has no conflicts to fear: compared by content.
    let d = decide_json(
        &index(Status::Deployed),
        &Config::default(),
        &created("kubectl-create", "Update", true),
    );
    assert!(d.is_allowed(), "{d:?}");
}

/// A Scale or an Eviction holds no annotations: the server reads them before a deny.
#[test]
fn a_scale_is_denied_only_once_the_stored_object_proves_its_owner() {
    let scale = |r| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": r}});
    let body = review(
        "UPDATE",
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
        json!({"group": "apps", "version": "v1", "resource": "deployments"}),
        Some("scale"),
        "web",
        Some("shop"),
        "admin",
        scale(5),
        scale(3),
    );
    let d = decide_json(&index(Status::Deployed), &Config::default(), &body);
    assert!(
        matches!(&d, Decision::Deny(l) if l.proof == OwnerProof::ToRead),
        "{d:?}"
    );
    let shop = ReleaseKey::new("shop", "shop");
    assert_eq!(prove(d.clone(), Some(&shop)), d);
    for read in [None, Some(&ReleaseKey::new("shop", "other"))] {
        assert!(matches!(
            prove(d.clone(), read),
            Decision::Allow(Allowed::Unproven { .. })
        ));
    }
    // A decision the request already proved is not read again.
    let update = deploy_update(
        "admin",
        deployment(7, "nginx:1.25"),
        deployment(3, "nginx:1.25"),
    );
    let d = decide_json(&index(Status::Deployed), &Config::default(), &update);
    assert_eq!(prove(d.clone(), None), d);
}

/// Every subresource kube-apiserver 1.20, 1.28, 1.34 and 1.36 serves for writes (read from
/// their recorded `/openapi/v2` paths, `../shared/fixtures/openapi`: 1.20 serves 39, 1.36
/// 44) is decided on purpose, as docs/subresources.md says. A newer version's new
/// subresource belongs in one of these lists, with what it writes in that document.
#[test]
fn every_subresource_served_from_1_20_to_1_36_is_decided_on_purpose() {
    const LOCKED: &[&str] = &[
        "deployments/scale",
        "replicasets/scale",
        "statefulsets/scale",
        "replicationcontrollers/scale",
        "namespaces/finalize",
        "pods/eviction",
        "pods/resize",
        "apiservices/status",
        "certificatesigningrequests/status",
        "cronjobs/status",
        "customresourcedefinitions/status",
        "daemonsets/status",
        "deployments/status",
        "flowschemas/status",
        "horizontalpodautoscalers/status",
        "ingresses/status",
        "jobs/status",
        "namespaces/status",
        "nodes/status",
        "persistentvolumeclaims/status",
        "persistentvolumes/status",
        "poddisruptionbudgets/status",
        "pods/status",
        "prioritylevelconfigurations/status",
        "replicasets/status",
        "replicationcontrollers/status",
        "resourceclaims/status",
        "resourcequotas/status",
        "servicecidrs/status",
        "services/status",
        "statefulsets/status",
        "validatingadmissionpolicies/status",
        "volumeattachments/status",
    ];
    // Persist nothing a chart sets: approval of a CSR, a token, a binding of an unscheduled
    // Pod, ephemeral containers (never in a manifest), and CONNECT.
    const NOT_LOCKED: &[&str] = &[
        "certificatesigningrequests/approval",
        "serviceaccounts/token",
        "pods/binding",
        "pods/ephemeralcontainers",
        "pods/attach",
        "pods/exec",
        "pods/portforward",
        "pods/proxy",
        "nodes/proxy",
        "services/proxy",
    ];
    let index = index(Status::Deployed);
    let schema = Schema::builtin();
    for (path, locked) in LOCKED
        .iter()
        .map(|p| (p, true))
        .chain(NOT_LOCKED.iter().map(|p| (p, false)))
    {
        let (resource, sub) = path.split_once('/').unwrap();
        let body = review(
            "UPDATE",
            json!({"group": "", "version": "v1", "kind": "Thing"}),
            json!({"group": "", "version": "v1", "resource": resource}),
            Some(sub),
            "web",
            Some("shop"),
            "admin",
            json!({}),
            json!({}),
        );
        let review = parse_review(body.as_bytes()).unwrap();
        let head = find(&index, &schema, &review.request).answer(&index, &review.request);
        let never = matches!(head, Some(Decision::Allow(Allowed::Subresource)));
        assert_eq!(!never, locked, "{path}");
    }
}

/// `pods/resize` (1.33+) writes a Pod's containers' resources: a chart's Pod is locked
/// there as through the Pod itself; other subresources of a Pod are not.
#[test]
fn a_resize_of_a_charts_pod_is_a_write_of_the_pod() {
    let chart = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: once\nspec:\n  containers:\n  - name: app\n    image: busybox\n    resources:\n      requests: {cpu: 100m}\n";
    let index = Index::from_secrets([crate::test_util::release_secret(
        "shop",
        "shop",
        1,
        Status::Deployed,
        chart,
    )]);
    let pod = |cpu: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "once", "namespace": "shop",
        "annotations": {"meta.helm.sh/release-name": "shop", "meta.helm.sh/release-namespace": "shop"}},
        "spec": {"containers": [{"name": "app", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}})
    };
    let write = |sub: &str, cpu: &str| {
        review(
            "UPDATE",
            json!({"group": "", "version": "v1", "kind": "Pod"}),
            json!({"group": "", "version": "v1", "resource": "pods"}),
            Some(sub),
            "once",
            Some("shop"),
            "admin",
            pod(cpu),
            pod("100m"),
        )
    };
    let config = Config::default();
    let Decision::Deny(l) = decide_json(&index, &config, &write("resize", "2")) else {
        panic!("a resize of the chart's cpu request was allowed")
    };
    assert_eq!(
        l.changes[0].path,
        "/spec/containers/0/resources/requests/cpu"
    );
    assert!(decide_json(&index, &config, &write("resize", "0.1")).is_allowed());
    assert!(decide_json(&index, &config, &write("ephemeralcontainers", "2")).is_allowed());
}

/// On a server-side release, a `/scale` write that keeps the replicas but names a field
/// manager may be a server-side apply, which from 1.22 makes the manager a co-owner of the
/// chart's replicas: denied. `kubectl scale` (no manager), a client-side release, and a
/// chart that leaves replicas to an autoscaler are not concerned.
#[test]
fn a_scale_to_the_same_replicas_naming_a_manager_is_denied_on_a_server_side_release() {
    let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": 3}});
    let write = |manager: Option<&str>| {
        let mut review = crate::test_util::review("UPDATE", "apps/v1", "Scale", "deployments")
            .kind("autoscaling/v1", "Scale")
            .uid("u")
            .name(Some("shop"), "web")
            .user("admin")
            .object(scale.clone())
            .old_object(scale.clone())
            .sub_resource("scale");
        if let Some(manager) = manager {
            review = review.field_manager(manager);
        }
        String::from_utf8(review.body()).unwrap()
    };
    let release = |chart: &str, ssa: bool| {
        let mut secret =
            crate::test_util::release_secret("shop", "shop", 2, Status::Deployed, chart);
        secret.release.apply_method = ssa.then(|| "ssa".into());
        Index::from_secrets([secret])
    };
    let config = Config::default();
    let d = decide_json(&release(CHART, true), &config, &write(Some("ops&sre")));
    let Decision::Deny(l) = &d else {
        panic!("{d:?}")
    };
    assert!(l.changes.is_empty(), "{l:?}");
    assert!(
        l.message.contains("names field manager \"ops&sre\"")
            && l.message.contains("/spec/replicas beside Helm"),
        "{}",
        l.message
    );
    // kubectl scale to the same value: no manager, no owner.
    assert!(decide_json(&release(CHART, true), &config, &write(None)).is_allowed());
    // A Helm 3 style release: no conflicts to fear.
    assert!(decide_json(&release(CHART, false), &config, &write(Some("ops"))).is_allowed());
    // A chart that leaves replicas out (an HPA sets them): Helm owns nothing there.
    let no_replicas = CHART.replace("  replicas: 3\n", "");
    assert_ne!(no_replicas, CHART);
    assert!(decide_json(&release(&no_replicas, true), &config, &write(Some("ops"))).is_allowed());
}

#[test]
fn scale_is_a_write_to_the_parents_replicas() {
    let scale = |r| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": r}});
    let body = review(
        "UPDATE",
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
        json!({"group": "apps", "version": "v1", "resource": "deployments"}),
        Some("scale"),
        "web",
        Some("shop"),
        "admin",
        scale(5),
        scale(3),
    );
    let Decision::Deny(l) = decide_json(&index(Status::Deployed), &Config::default(), &body) else {
        panic!()
    };
    assert_eq!(l.changes[0].path, "/spec/replicas");
    // `kubectl scale --replicas=0`: the Scale carries no replicas (omitempty).
    let to_zero = review(
        "UPDATE",
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
        json!({"group": "apps", "version": "v1", "resource": "deployments"}),
        Some("scale"),
        "web",
        Some("shop"),
        "admin",
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "shop"}, "spec": {}}),
        scale(3),
    );
    let Decision::Deny(l) = decide_json(&index(Status::Deployed), &Config::default(), &to_zero)
    else {
        panic!()
    };
    assert!(
        l.message
            .contains("/spec/replicas is 3 in the chart, this request sets 0"),
        "{}",
        l.message
    );
    let hpa_free = Config {
        ignore: vec![crate::policy::IgnoreRule {
            paths: vec!["/spec/replicas".into()],
            target: crate::policy::Target {
                kind: Some("Deployment".into()),
                ..Default::default()
            },
        }],
        ..Config::default()
    };
    assert!(decide_json(&index(Status::Deployed), &hpa_free, &body).is_allowed());
    let status = review(
        "UPDATE",
        json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
        json!({"group": "apps", "resource": "deployments"}),
        Some("status"),
        "web",
        Some("shop"),
        "admin",
        deployment(9, "x"),
        deployment(3, "nginx:1.25"),
    );
    // Through status only metadata can stick: spec is the chart's business elsewhere.
    assert!(matches!(
        decide_json(&index(Status::Deployed), &Config::default(), &status),
        Decision::Allow(Allowed::NoLockedChange { .. })
    ));
    let mut relabelled = deployment(3, "nginx:1.25");
    relabelled["metadata"]["labels"]["app"] = json!("other");
    let status = review(
        "UPDATE",
        json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
        json!({"group": "apps", "resource": "deployments"}),
        Some("status"),
        "web",
        Some("shop"),
        "admin",
        relabelled,
        deployment(3, "nginx:1.25"),
    );
    let d = decide_json(&index(Status::Deployed), &Config::default(), &status);
    let Decision::Deny(locked) = &d else {
        panic!("{d:?}")
    };
    assert!(
        locked
            .message
            .contains("/metadata/labels/app is \"web\" in the chart"),
        "{}",
        locked.message
    );
}

#[test]
fn warn_and_repair_modes() {
    let body = deploy_update(
        "admin",
        deployment(7, "nginx:1.27"),
        deployment(3, "nginx:1.25"),
    );
    let warn = Config {
        mode: Mode::Warn,
        ..Config::default()
    };
    let d = decide_json(&index(Status::Deployed), &warn, &body);
    assert!(matches!(&d, Decision::Warn(l) if l.changes.len() == 2));
    assert!(d.needs_confirmation().is_none());
    let repair = Config {
        mode: Mode::Repair,
        ..Config::default()
    };
    let Decision::Repair(_, patch) = decide_json(&index(Status::Deployed), &repair, &body) else {
        panic!()
    };
    let mut object = deployment(7, "nginx:1.27");
    json_patch::patch(&mut object, &patch).unwrap();
    assert_eq!(object, deployment(3, "nginx:1.25"));
}

#[test]
fn a_fresh_pending_status_turns_a_deny_into_an_allow() {
    let d = decide_json(
        &index(Status::Deployed),
        &Config::default(),
        &deploy_update(
            "admin",
            deployment(7, "nginx:1.25"),
            deployment(3, "nginx:1.25"),
        ),
    );
    assert!(!confirm(d.clone(), Some(Status::Deployed)).is_allowed());
    assert!(!confirm(d.clone(), None).is_allowed());
    assert!(matches!(
        confirm(d, Some(Status::PendingUpgrade)),
        Decision::Allow(Allowed::HelmAtWork {
            confirmed: true,
            ..
        })
    ));
}

#[test]
fn a_secrets_values_are_not_quoted_in_the_message() {
    let chart = "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\ndata: {password: aHVudGVyMg==, user: YWRtaW4=}\n";
    // Revision 3 of the release owns only the Secret.
    let mut index = index(Status::Deployed);
    index.upsert(crate::test_util::release_secret(
        "shop",
        "shop",
        3,
        Status::Deployed,
        chart,
    ));
    let object = |password: Option<&str>| {
        let mut data = json!({"user": "YWRtaW4="});
        if let Some(p) = password {
            data["password"] = json!(p);
        }
        annotated(
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "shop"}, "data": data}),
            "shop",
        )
    };
    for new in [object(Some("c3RvbGVu")), object(None)] {
        let body = review(
            "UPDATE",
            json!({"group": "", "version": "v1", "kind": "Secret"}),
            json!({"group": "", "version": "v1", "resource": "secrets"}),
            None,
            "creds",
            Some("shop"),
            "admin",
            new,
            object(Some("aHVudGVyMg==")),
        );
        for mode in [Mode::Deny, Mode::Warn] {
            let config = Config {
                mode,
                ..Config::default()
            };
            let (Decision::Deny(l) | Decision::Warn(l)) = decide_json(&index, &config, &body)
            else {
                panic!()
            };
            assert!(
                l.message.contains("/data/password is set by the chart"),
                "{}",
                l.message
            );
            assert!(l.message.contains("not shown"), "{}", l.message);
            for value in ["aHVudGVyMg==", "c3RvbGVu", "YWRtaW4="] {
                assert!(!l.message.contains(value), "{}", l.message);
            }
        }
    }
}

#[test]
fn repair_mode_denies_a_write_its_patch_cannot_repair() {
    // Found by fuzzing (fuzz target `review`): a scale request without an object (or a
    // Scale without `spec`) got a patch adding /spec/replicas under a missing parent.
    let repair = Config {
        mode: Mode::Repair,
        ..Config::default()
    };
    let scale = |spec: Value| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "shop"}, "spec": spec});
    let body = |object: Value| {
        review(
            "UPDATE",
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
            json!({"group": "apps", "version": "v1", "resource": "deployments"}),
            Some("scale"),
            "web",
            Some("shop"),
            "admin",
            object,
            scale(json!({"replicas": 7})),
        )
    };
    for malformed in [Value::Null, json!({"kind": "Scale"})] {
        let d = decide_json(&index(Status::Deployed), &repair, &body(malformed));
        assert!(matches!(d, Decision::Deny(_)), "{d:?}");
    }
    // Scaled to 0, the Scale's `spec` is empty (replicas is omitempty): repaired.
    let d = decide_json(&index(Status::Deployed), &repair, &body(scale(json!({}))));
    let Decision::Repair(_, patch) = d else {
        panic!("{d:?}")
    };
    let mut object = scale(json!({}));
    json_patch::patch(&mut object, &patch).unwrap();
    assert_eq!(object["spec"]["replicas"], 3);
}

#[test]
fn a_long_value_is_shown_where_it_first_differs() {
    let config: String = (1..=40).map(|i| format!("key{i} = value{i}\n")).collect();
    let edited = config.replace("key23 = value23", "key23 = hacked");
    assert_eq!(
        first_difference("/data/app.conf", &json!(config), &json!(edited)).unwrap(),
        "/data/app.conf differs from the chart at line 23: \"key23 = value23\" in the chart, \"key23 = hacked\" in this request"
    );
    let shorter: String = config.lines().take(30).map(|l| format!("{l}\n")).collect();
    assert!(
        first_difference("/data/app.conf", &json!(config), &json!(shorter))
            .unwrap()
            .ends_with("at line 31: \"key31 = value31\" in the chart, the request ends before it")
    );
    let rule = |verbs: &[&str]| json!({"apiGroups": [""], "resources": ["pods", "services", "configmaps"], "verbs": verbs});
    let rules = json!([rule(&["get"]), rule(&["list"]), rule(&["watch"])]);
    let escalated = json!([rule(&["get"]), rule(&["list", "delete"]), rule(&["watch"])]);
    assert_eq!(
        first_difference("/rules", &rules, &escalated).unwrap(),
        "/rules/1/verbs is [\"list\"] in the chart, this request sets [\"list\",\"delete\"]"
    );
    let added = json!([
        rule(&["get"]),
        rule(&["list"]),
        rule(&["watch"]),
        rule(&["*"])
    ]);
    assert!(first_difference("/rules", &rules, &added)
        .unwrap()
        .starts_with("/rules has 3 items in the chart, this request adds {"));
    // Short values are shown whole, as before.
    assert_eq!(
        first_difference("/spec/replicas", &json!(3), &json!(7)),
        None
    );
}

#[test]
fn a_malformed_object_is_an_error_not_a_panic() {
    let body = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"apps","kind":"Deployment"},"name":"web","namespace":"shop","operation":"UPDATE","userInfo":{"username":"admin"},"object":"not an object but a string","oldObject":{"metadata":{"annotations":{"meta.helm.sh/release-name":"shop","meta.helm.sh/release-namespace":"shop"}}}}}"#;
    let d = decide_json(&index(Status::Deployed), &Config::default(), body);
    // A string where an object belongs changes every locked field: it is denied, not a crash.
    assert!(!d.is_allowed());
    assert!(decide(&index(Status::Deployed), &Schema::builtin(), &Config::default(), &parse_review(b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"kind\":{\"kind\":\"ClusterRole\",\"group\":\"rbac.authorization.k8s.io\"},\"operation\":\"DELETE\",\"oldObject\":{\"metadata\":{\"name\":7}}}}").unwrap().request).is_err());
}

fn index_of(manifest: &str) -> Index {
    let mut secret = release_secret("shop", 1, Status::Deployed);
    secret.release.manifest = manifest.into();
    Index::from_secrets([secret])
}

const IDENTITY_CHART: &str = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web\n  labels: {app: web}\nspec:\n  ingressClassName: nginx\n---\napiVersion: example.com/v1\nkind: Zone\nmetadata:\n  name: eu\n  namespace: wherever\nspec:\n  size: 3\n---\napiVersion: storage.k8s.io/v1\nkind: SomethingNew\nmetadata: {name: fresh}\nspec: {a: 1}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: once}\nspec:\n  containers: [{name: c, image: busybox}]\n";

#[test]
fn another_group_serving_the_kind_reaches_the_same_locked_object() {
    let idx = index_of(IDENTITY_CHART);
    let ingress = |class: &str| {
        annotated(
            json!({"apiVersion": "extensions/v1beta1", "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
        "spec": {"ingressClassName": class}}),
            "shop",
        )
    };
    let write = |group: &str, version: &str, new: Value| {
        review(
            "UPDATE",
            json!({"group": group, "version": version, "kind": "Ingress"}),
            json!({"group": group, "version": version, "resource": "ingresses"}),
            None,
            "web",
            Some("shop"),
            "admin",
            new,
            ingress("nginx"),
        )
    };
    for (group, version) in [("extensions", "v1beta1"), ("networking.k8s.io", "v1beta1")] {
        let d = decide_json(
            &idx,
            &Config::default(),
            &write(group, version, ingress("other")),
        );
        let Decision::Deny(l) = &d else {
            panic!("{group}/{version}: {d:?}")
        };
        assert!(
            l.message.contains(&format!(
                "this request uses {}",
                crate::manifest::api_version(group, version)
            )),
            "{}",
            l.message
        );
        // Unchanged outside metadata, a label the chart does not set: allowed.
        let mut labelled = ingress("nginx");
        labelled["metadata"]["labels"]["team"] = json!("a");
        assert!(
            decide_json(&idx, &Config::default(), &write(group, version, labelled)).is_allowed()
        );
    }
    // A restore (CREATE) through the other group: the same content at the same paths is
    // no change; another class is.
    let create = |new: Value| {
        review(
            "CREATE",
            json!({"group": "extensions", "version": "v1beta1", "kind": "Ingress"}),
            json!({"group": "extensions", "version": "v1beta1", "resource": "ingresses"}),
            None,
            "web",
            Some("shop"),
            "admin",
            new,
            Value::Null,
        )
    };
    let mut restored = ingress("nginx");
    restored["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("Helm");
    let d = decide_json(&idx, &Config::default(), &create(restored.clone()));
    assert!(d.is_allowed(), "{d:?}");
    restored["spec"]["ingressClassName"] = json!("other");
    let d = decide_json(&idx, &Config::default(), &create(restored));
    let Decision::Deny(l) = &d else {
        panic!("{d:?}")
    };
    assert_eq!(l.changes[0].path, "/spec/ingressClassName");
    // A group that does not serve Ingress is another object.
    let d = decide_json(
        &idx,
        &Config::default(),
        &write("example.com", "v1", ingress("other")),
    );
    assert!(matches!(d, Decision::Allow(Allowed::NotOwned)), "{d:?}");
}

/// Through autoscaling/v1, the API server converts the annotation
/// `autoscaling.alpha.kubernetes.io/metrics` into the v2 `spec.metrics` the chart owns.
#[test]
fn a_conversion_annotation_is_the_field_it_becomes() {
    let chart = "apiVersion: autoscaling/v2beta2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web}\nspec:\n  maxReplicas: 4\n  metrics:\n  - type: Resource\n    resource: {name: memory, target: {type: Utilization, averageUtilization: 80}}\n";
    let idx = index_of(chart);
    let hpa = |annotations: Value| {
        annotated(
            json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "shop"}, "spec": {"maxReplicas": 4}}),
            "shop",
        )
        .as_object()
        .cloned()
        .map(|mut o| {
            for (k, v) in annotations.as_object().unwrap() {
                o["metadata"]["annotations"][k] = v.clone();
            }
            Value::Object(o)
        })
        .unwrap()
    };
    let write = |new: Value| {
        review(
            "UPDATE",
            json!({"group": "autoscaling", "version": "v1", "kind": "HorizontalPodAutoscaler"}),
            json!({"group": "autoscaling", "version": "v1", "resource": "horizontalpodautoscalers"}),
            None,
            "web",
            Some("shop"),
            "alice",
            new,
            hpa(json!({})),
        )
    };
    let metrics =
        r#"[{"type":"Resource","resource":{"name":"memory","targetAverageUtilization":500}}]"#;
    let d = decide_json(
        &idx,
        &Config::default(),
        &write(hpa(
            json!({"autoscaling.alpha.kubernetes.io/metrics": metrics}),
        )),
    );
    let Decision::Deny(l) = &d else {
        panic!("{d:?}")
    };
    assert!(
        l.changes
            .iter()
            .any(|c| c.path == "/metadata/annotations/autoscaling.alpha.kubernetes.io~1metrics"),
        "{:?}",
        l.changes
    );
    // Another annotation is only an annotation.
    let d = decide_json(
        &idx,
        &Config::default(),
        &write(hpa(json!({"team": "web"}))),
    );
    assert!(d.is_allowed(), "{d:?}");
    // Through v2beta1, `behavior` travels the same way.
    let chart = "apiVersion: autoscaling/v2beta2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web}\nspec:\n  maxReplicas: 4\n  behavior:\n    scaleDown: {stabilizationWindowSeconds: 60}\n";
    let idx = index_of(chart);
    let v2beta1 = |annotations: Value| {
        let mut o = annotated(
            json!({"apiVersion": "autoscaling/v2beta1", "kind": "HorizontalPodAutoscaler",
                   "metadata": {"name": "web", "namespace": "shop"}, "spec": {"maxReplicas": 4}}),
            "shop",
        );
        for (k, v) in annotations.as_object().unwrap() {
            o["metadata"]["annotations"][k] = v.clone();
        }
        o
    };
    let body = review(
        "UPDATE",
        json!({"group": "autoscaling", "version": "v2beta1", "kind": "HorizontalPodAutoscaler"}),
        json!({"group": "autoscaling", "version": "v2beta1", "resource": "horizontalpodautoscalers"}),
        None,
        "web",
        Some("shop"),
        "alice",
        v2beta1(
            json!({"autoscaling.alpha.kubernetes.io/behavior": r#"{"ScaleDown":{"StabilizationWindowSeconds":600}}"#}),
        ),
        v2beta1(json!({})),
    );
    let d = decide_json(&idx, &Config::default(), &body);
    assert!(matches!(d, Decision::Deny(_)), "{d:?}");
}

#[test]
fn a_kind_of_unknown_scope_is_locked_in_the_scope_the_request_states() {
    let idx = index_of(IDENTITY_CHART);
    // A cluster-scoped custom resource: Helm ignores the chart's namespace for it.
    let delete = |group: &str, kind: &str, name: &str, ns: Option<&str>| {
        review(
            "DELETE",
            json!({"group": group, "version": "v1", "kind": kind}),
            json!({"group": group, "version": "v1", "resource": "whatever"}),
            None,
            name,
            ns,
            "admin",
            Value::Null,
            annotated(json!({"metadata": {"name": name}}), "shop"),
        )
    };
    for (group, kind, name) in [
        ("example.com", "Zone", "eu"),
        ("storage.k8s.io", "SomethingNew", "fresh"),
    ] {
        let cluster = decide_json(&idx, &Config::default(), &delete(group, kind, name, None));
        assert!(
            matches!(cluster, Decision::Deny(_)),
            "{kind} cluster-scoped: {cluster:?}"
        );
    }
    // Namespaced after all: in the chart's namespace, else the release's.
    let zone = decide_json(
        &idx,
        &Config::default(),
        &delete("example.com", "Zone", "eu", Some("wherever")),
    );
    assert!(matches!(zone, Decision::Deny(_)), "{zone:?}");
    let fresh = decide_json(
        &idx,
        &Config::default(),
        &delete("storage.k8s.io", "SomethingNew", "fresh", Some("shop")),
    );
    assert!(matches!(fresh, Decision::Deny(_)), "{fresh:?}");
    let elsewhere = decide_json(
        &idx,
        &Config::default(),
        &delete("example.com", "Zone", "eu", Some("shop")),
    );
    assert!(elsewhere.is_allowed(), "{elsewhere:?}");
}

#[test]
fn a_custom_resources_scale_writes_its_spec_replicas_path() {
    let idx = index_of(IDENTITY_CHART);
    let crd = json!({"spec": {"group": "example.com", "names": {"kind": "Zone"},
        "versions": [{"name": "v1", "subresources": {"scale": {"specReplicasPath": ".spec.size"}}}]}});
    let scale = |r| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "eu"}, "spec": {"replicas": r}});
    let body = |to| {
        review(
            "UPDATE",
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
            json!({"group": "example.com", "version": "v1", "resource": "zones"}),
            Some("scale"),
            "eu",
            None,
            "admin",
            scale(to),
            scale(3),
        )
    };
    let with_crd = Schema::empty().with_scale_paths([&crd]);
    let decide_with = |schema: &Schema, config: &Config, to| {
        decide(
            &idx,
            schema,
            config,
            &parse_review(body(to).as_bytes()).unwrap().request,
        )
        .unwrap()
    };
    let d = decide_with(&with_crd, &Config::default(), 5);
    let Decision::Deny(l) = &d else {
        panic!("{d:?}")
    };
    assert_eq!(l.changes[0].path, "/spec/size");
    assert!(
        l.message
            .contains("/spec/size is 3 in the chart, this request sets 5"),
        "{}",
        l.message
    );
    assert!(decide_with(&with_crd, &Config::default(), 3).is_allowed());
    // Without the CRD the chart's /spec/replicas is compared, which this chart does not set.
    assert!(decide_with(&Schema::empty(), &Config::default(), 5).is_allowed());
    // Repair puts the chart's value where the Scale holds it.
    let repair = Config {
        mode: Mode::Repair,
        ..Config::default()
    };
    let Decision::Repair(_, patch) = decide_with(&with_crd, &repair, 5) else {
        panic!()
    };
    let mut object = scale(5);
    json_patch::patch(&mut object, &patch).unwrap();
    assert_eq!(object["spec"]["replicas"], 3);
}

/// A Scale names its parent by resource; the schema (the API server's paths, a CRD's
/// `names`) says which kind that is, irregular plurals included.
#[test]
fn a_scale_finds_its_parent_by_the_kind_the_api_server_names() {
    let chart = "apiVersion: goharbor.io/v1\nkind: Registry\nmetadata: {name: r}\nspec: {replicas: 2}\n---\napiVersion: zoo.example.com/v1\nkind: Mouse\nmetadata: {name: m}\nspec: {replicas: 2}\n";
    let idx = index_of(chart);
    let scale = |r| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "x"}, "spec": {"replicas": r}});
    let body = |group: &str, resource: &str, name: &str| {
        review(
            "UPDATE",
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
            json!({"group": group, "version": "v1", "resource": resource}),
            Some("scale"),
            name,
            Some("shop"),
            "admin",
            scale(0),
            scale(2),
        )
    };
    let decide_with = |schema: &Schema, body: String| {
        decide(
            &idx,
            schema,
            &Config::default(),
            &parse_review(body.as_bytes()).unwrap().request,
        )
        .unwrap()
    };
    let crd = |group: &str, plural: &str, kind: &str| json!({"spec": {"group": group, "names": {"plural": plural, "kind": kind}}});
    let crds = [
        crd("goharbor.io", "registries", "Registry"),
        crd("zoo.example.com", "mice", "Mouse"),
    ];
    let with_crds = Schema::empty().with_scale_paths(crds.iter());
    assert!(matches!(
        decide_with(&with_crds, body("goharbor.io", "registries", "r")),
        Decision::Deny(_)
    ));
    assert!(matches!(
        decide_with(&with_crds, body("zoo.example.com", "mice", "m")),
        Decision::Deny(_)
    ));
    // Without the CRDs: a regular plural is still read right; an irregular one is not known.
    assert!(matches!(
        decide_with(&Schema::empty(), body("goharbor.io", "registries", "r")),
        Decision::Deny(_)
    ));
    assert!(decide_with(&Schema::empty(), body("zoo.example.com", "mice", "m")).is_allowed());
    // The API server's own paths say the same for every kind it serves.
    let openapi = json!({"definitions": {}, "paths": {
        "/apis/zoo.example.com/v1/namespaces/{namespace}/mice/{name}": {"get": {"x-kubernetes-group-version-kind": {"group": "zoo.example.com", "version": "v1", "kind": "Mouse"}}},
        "/apis/zoo.example.com/v1/namespaces/{namespace}/mice/{name}/scale": {"get": {"x-kubernetes-group-version-kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}}}}});
    let served = Schema::from_openapi_v2(openapi.to_string().as_bytes()).unwrap();
    assert_eq!(
        served.kind_of_resource("zoo.example.com", "mice"),
        Some("Mouse")
    );
    assert_eq!(
        served.kind_of_resource("apps", "statefulsets"),
        Some("StatefulSet")
    );
    assert!(matches!(
        decide_with(&served, body("zoo.example.com", "mice", "m")),
        Decision::Deny(_)
    ));
    // The fast path reads the same schema.
    let head = body("zoo.example.com", "mice", "m");
    let request = parse_review(head.as_bytes()).unwrap().request;
    assert_eq!(find(&idx, &served, &request).answer(&idx, &request), None);
    assert!(find(&idx, &Schema::empty(), &request)
        .answer(&idx, &request)
        .is_some());
}

/// A failed upgrade leaves what Helm applied in place: the release stays locked at the
/// failed revision until a helm upgrade or rollback (pending while it works) succeeds.
#[test]
fn a_release_whose_newest_revision_failed_stays_locked() {
    let body = deploy_update(
        "alice",
        deployment(7, "nginx:1.25"),
        deployment(3, "nginx:1.25"),
    );
    let Decision::Deny(l) = decide_json(&index(Status::Failed), &Config::default(), &body) else {
        panic!()
    };
    assert!(l.message.contains("(revision 2, failed)"), "{}", l.message);
    for status in [Status::PendingUpgrade, Status::PendingRollback] {
        assert!(decide_json(&index(status), &Config::default(), &body).is_allowed());
    }
}

/// Break glass: an open LockException turns the denial of a write it covers into an allow
/// that names it; closed, or for another user, the denial stands.
#[test]
fn an_open_exception_excuses_the_writes_it_covers() {
    let exception = crate::exception::Exception {
        name: "shop/oncall".into(),
        release: ReleaseKey::new("shop", "shop"),
        users: vec!["oncall".into()],
        groups: vec![],
        objects: vec![],
        paths: vec!["/spec/replicas".into()],
        reason: "INC-42".into(),
        opened: 100,
        until: 200,
    };
    let deny = decide_json(
        &index(Status::Deployed),
        &Config::default(),
        &deploy_update(
            "oncall",
            deployment(7, "nginx:1.25"),
            deployment(3, "nginx:1.25"),
        ),
    );
    assert!(matches!(deny, Decision::Deny(_)));
    let no_groups: [&str; 0] = [];
    let d = excuse(deny.clone(), &[&exception], "oncall", &no_groups, 150);
    assert!(
        matches!(&d, Decision::Allow(Allowed::Excepted { exception, user, .. }) if exception == "shop/oncall" && user == "oncall"),
        "{d:?}"
    );
    assert!(
        d.explain()
            .contains("LockException shop/oncall opens release shop/shop to oncall (INC-42)"),
        "{}",
        d.explain()
    );
    assert_eq!(
        excuse(deny.clone(), &[&exception], "oncall", &no_groups, 200),
        deny
    );
    assert_eq!(
        excuse(deny.clone(), &[&exception], "mallory", &no_groups, 150),
        deny
    );
    let image = decide_json(
        &index(Status::Deployed),
        &Config::default(),
        &deploy_update(
            "oncall",
            deployment(7, "nginx:1.27"),
            deployment(3, "nginx:1.25"),
        ),
    );
    assert_eq!(
        excuse(image.clone(), &[&exception], "oncall", &no_groups, 150),
        image
    );
}

/// What Helm owns follows the markers of the cluster's version: the same write to the same
/// chart, decided with the embedded schema of each version (1.20's granular selectors became
/// atomic; lists without a marker were always atomic; finalizers are a set throughout).
#[test]
fn the_same_write_is_decided_by_the_versions_markers() {
    use crate::schema::KubeVersion;
    let chart = "apiVersion: v1\nkind: Service\nmetadata: {name: svc, finalizers: [example.com/keep]}\nspec:\n  selector: {app: web}\n  ports: [{port: 80, protocol: TCP}]\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      nodeSelector: {disk: ssd}\n      tolerations: [{key: dedicated, operator: Exists}]\n      containers:\n      - name: web\n        image: nginx\n        args: [--port=80]\n        env: [{name: A, value: a}]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: reader}\nrules: [{apiGroups: [''], resources: [pods], verbs: [get]}]\n";
    let idx = index_of(chart);
    let owned = |object: Value| annotated(object, "shop");
    let service = |selector: Value, finalizers: Value| {
        owned(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "svc", "namespace": "shop", "finalizers": finalizers},
        "spec": {"selector": selector, "ports": [{"port": 80, "protocol": "TCP"}]}}))
    };
    let deployment = |pod: Value| {
        owned(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"}, "spec": {"template": {"spec": pod}}}))
    };
    let pod = |node: Value, tolerations: Value, args: Value, env: Value| {
        json!({"nodeSelector": node,
        "tolerations": tolerations, "containers": [{"name": "web", "image": "nginx", "args": args, "env": env}]})
    };
    let base_pod = || {
        pod(
            json!({"disk": "ssd"}),
            json!([{"key": "dedicated", "operator": "Exists"}]),
            json!(["--port=80"]),
            json!([{"name": "A", "value": "a"}]),
        )
    };
    let role = |rules: Value| {
        owned(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "reader"}, "rules": rules}),
        )
    };
    let write =
        |kind: (&str, &str, &str, &str), name: &str, ns: Option<&str>, new: Value, old: Value| {
            let (group, version, kind, resource) = kind;
            review(
                "UPDATE",
                json!({"group": group, "version": version, "kind": kind}),
                json!({"group": group, "version": version, "resource": resource}),
                None,
                name,
                ns,
                "alice",
                new,
                old,
            )
        };
    let svc = ("", "v1", "Service", "services");
    let deploy = ("apps", "v1", "Deployment", "deployments");
    let cr = (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
    );
    let base_svc = service(json!({"app": "web"}), json!(["example.com/keep"]));
    let rule = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]});
    // (what, the write, allowed on 1.20, 1.28, 1.34, 1.36)
    let cases = [
        (
            "a Service selector key",
            write(
                svc,
                "svc",
                Some("shop"),
                service(
                    json!({"app": "web", "tier": "x"}),
                    json!(["example.com/keep"]),
                ),
                base_svc.clone(),
            ),
            [true, false, false, false],
        ),
        (
            "a nodeSelector key",
            write(
                deploy,
                "web",
                Some("shop"),
                deployment(pod(
                    json!({"disk": "ssd", "zone": "a"}),
                    json!([{"key": "dedicated", "operator": "Exists"}]),
                    json!(["--port=80"]),
                    json!([{"name": "A", "value": "a"}]),
                )),
                deployment(base_pod()),
            ),
            [true, false, false, false],
        ),
        (
            "a toleration",
            write(
                deploy,
                "web",
                Some("shop"),
                deployment(pod(
                    json!({"disk": "ssd"}),
                    json!([{"key": "dedicated", "operator": "Exists"}, {"key": "gpu", "operator": "Exists"}]),
                    json!(["--port=80"]),
                    json!([{"name": "A", "value": "a"}]),
                )),
                deployment(base_pod()),
            ),
            [false; 4],
        ),
        (
            "an argument",
            write(
                deploy,
                "web",
                Some("shop"),
                deployment(pod(
                    json!({"disk": "ssd"}),
                    json!([{"key": "dedicated", "operator": "Exists"}]),
                    json!(["--port=80", "--debug"]),
                    json!([{"name": "A", "value": "a"}]),
                )),
                deployment(base_pod()),
            ),
            [false; 4],
        ),
        (
            "an env var",
            write(
                deploy,
                "web",
                Some("shop"),
                deployment(pod(
                    json!({"disk": "ssd"}),
                    json!([{"key": "dedicated", "operator": "Exists"}]),
                    json!(["--port=80"]),
                    json!([{"name": "A", "value": "a"}, {"name": "B", "value": "b"}]),
                )),
                deployment(base_pod()),
            ),
            [true; 4],
        ),
        (
            "an RBAC rule",
            write(
                cr,
                "reader",
                None,
                role(
                    json!([rule.clone(), {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]),
                ),
                role(json!([rule.clone()])),
            ),
            [false; 4],
        ),
        (
            "another finalizer",
            write(
                svc,
                "svc",
                Some("shop"),
                service(
                    json!({"app": "web"}),
                    json!(["example.com/keep", "example.com/other"]),
                ),
                base_svc.clone(),
            ),
            [true; 4],
        ),
        (
            "the chart's finalizer removed",
            write(
                svc,
                "svc",
                Some("shop"),
                service(json!({"app": "web"}), json!([])),
                base_svc.clone(),
            ),
            [false; 4],
        ),
    ];
    for (what, body, expected) in cases {
        for (version, allowed) in KubeVersion::ALL.into_iter().zip(expected) {
            let d = decide(
                &idx,
                &Schema::embedded(version),
                &Config::default(),
                &parse_review(body.as_bytes()).unwrap().request,
            )
            .unwrap();
            assert_eq!(
                d.is_allowed(),
                allowed,
                "{what} on {version}: {}",
                d.explain()
            );
        }
    }
    assert_eq!(KubeVersion::parse("v1.30.2"), Some(KubeVersion::V1_28));
    assert_eq!(KubeVersion::parse("1.36"), Some(KubeVersion::V1_36));
    assert_eq!(KubeVersion::parse("1.19"), None);
}

#[test]
fn evicting_a_locked_pod_is_deleting_it() {
    let idx = index_of(IDENTITY_CHART);
    let evict = |user: &str, name: &str| {
        review(
            "CREATE",
            json!({"group": "policy", "version": "v1beta1", "kind": "Eviction"}),
            json!({"group": "", "version": "v1", "resource": "pods"}),
            Some("eviction"),
            name,
            Some("shop"),
            user,
            json!({"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": name, "namespace": "shop"}}),
            Value::Null,
        )
    };
    let d = decide_json(&idx, &Config::default(), &evict("admin", "once"));
    let Decision::Deny(l) = &d else {
        panic!("{d:?}")
    };
    assert!(
        l.message.contains("evicting it deletes it"),
        "{}",
        l.message
    );
    assert!(decide_json(
        &idx,
        &Config::default(),
        &evict("admin", "not-in-the-chart")
    )
    .is_allowed());
}

/// A chart that renders a Deployment and a HorizontalPodAutoscaler on it: the autoscaler owns
/// `spec.replicas` by design, so the reverter finds no drift there (and drift reports count
/// none); at admission a person's write of it is still denied (the autoscaler itself writes as
/// the exempt control plane), and every other field stays locked. An autoscaler of another
/// object changes nothing.
#[test]
fn the_replicas_of_an_object_its_releases_autoscaler_targets_are_the_autoscalers() {
    let hpa = |target: &str| {
        format!("---\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {{name: web}}\nspec:\n  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {target}}}\n  minReplicas: 3\n  maxReplicas: 9\n")
    };
    let scaled = Index::from_secrets([crate::test_util::release_secret(
        "shop",
        "shop",
        2,
        Status::Deployed,
        &format!("{CHART}{}", hpa("web")),
    )]);
    let web = scaled
        .lookup("apps", "Deployment", Some("shop"), "web")
        .unwrap();
    assert_eq!(web.scaled_by.as_deref(), Some("web"));
    let config = Config::default();
    let update = deploy_update(
        "admin",
        deployment(7, "nginx:1.25"),
        deployment(3, "nginx:1.25"),
    );
    // A person's write of the replicas: still denied at admission.
    assert!(matches!(
        decide_json(&scaled, &config, &update),
        Decision::Deny(_)
    ));
    // The autoscaler's own, through scale as the controller manager: exempt.
    let scale = |r| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": r}});
    let body = review(
        "UPDATE",
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
        json!({"group": "apps", "version": "v1", "resource": "deployments"}),
        Some("scale"),
        "web",
        Some("shop"),
        "system:kube-controller-manager",
        scale(5),
        scale(3),
    );
    assert!(matches!(
        decide_json(&scaled, &config, &body),
        Decision::Allow(_)
    ));
    // The image is still the chart's.
    let image = deploy_update(
        "admin",
        deployment(3, "nginx:1.26"),
        deployment(3, "nginx:1.25"),
    );
    let Decision::Deny(locked) = decide_json(&scaled, &config, &image) else {
        panic!("the image is still locked")
    };
    assert_eq!(locked.changes.len(), 1);
    assert!(locked.changes[0].path.contains("image"));
    // The reverter: replicas are left to the autoscaler.
    let ignore = scaled.left_alone(&config, web, 0);
    let ignore: Vec<&str> = ignore.iter().map(String::as_str).collect();
    let mut live = deployment(7, "nginx:1.25");
    live["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("Helm");
    let drift = crate::revert_plan::drift(&Schema::builtin(), web, &live, &ignore);
    assert!(drift.is_empty(), "{drift:?}");
    // An autoscaler of another object locks replicas as before.
    let other = Index::from_secrets([crate::test_util::release_secret(
        "shop",
        "shop",
        2,
        Status::Deployed,
        &format!("{CHART}{}", hpa("api")),
    )]);
    assert!(other
        .lookup("apps", "Deployment", Some("shop"), "web")
        .unwrap()
        .scaled_by
        .is_none());
    let other_web = other
        .lookup("apps", "Deployment", Some("shop"), "web")
        .unwrap();
    let ignore = other.left_alone(&config, other_web, 0);
    let ignore: Vec<&str> = ignore.iter().map(String::as_str).collect();
    let drift = crate::revert_plan::drift(&Schema::builtin(), other_web, &live, &ignore);
    assert_eq!(drift.len(), 1, "{drift:?}");
    assert_eq!(drift[0].path, "/spec/replicas");
}

/// Endpoints hold sets (`subsets`, their addresses and ports) that the API server stores in
/// the order sent: a write of the same sets in another order is no change; an address added
/// or removed is. On a server-side release only while the reverter hands a writer's share of
/// Helm's fields back: another order taken by another manager would conflict with Helm's apply.
#[test]
fn endpoints_sets_are_compared_in_one_order() {
    const EP: &str = "apiVersion: v1\nkind: Endpoints\nmetadata: {name: external}\nsubsets:\n- addresses: [{ip: 10.0.0.9}, {ip: 10.0.0.1}]\n  ports: [{name: b, port: 90, protocol: TCP}, {name: a, port: 80, protocol: TCP}]\n";
    let endpoints = |ips: &[&str], ports: &[(&str, i64)]| {
        json!({"apiVersion": "v1", "kind": "Endpoints",
               "metadata": {"name": "external", "namespace": "shop",
                            "annotations": {"meta.helm.sh/release-name": "shop", "meta.helm.sh/release-namespace": "shop"},
                            "labels": {"app.kubernetes.io/managed-by": "Helm"}},
               "subsets": [{"addresses": ips.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>(),
                            "ports": ports.iter().map(|(n, p)| json!({"name": n, "port": p, "protocol": "TCP"})).collect::<Vec<_>>()}]})
    };
    let write = |op: &str, object: Value, old: Value| {
        review(
            op,
            json!({"group": "", "version": "v1", "kind": "Endpoints"}),
            json!({"group": "", "version": "v1", "resource": "endpoints"}),
            None,
            "external",
            Some("shop"),
            "alice",
            object,
            old,
        )
    };
    let stored = endpoints(&["10.0.0.9", "10.0.0.1"], &[("b", 90), ("a", 80)]);
    let reordered = endpoints(&["10.0.0.1", "10.0.0.9"], &[("a", 80), ("b", 90)]);
    let added = endpoints(
        &["10.0.0.1", "10.0.0.9", "10.0.0.7"],
        &[("a", 80), ("b", 90)],
    );
    let removed = endpoints(&["10.0.0.1"], &[("a", 80), ("b", 90)]);
    let client_side = Index::from_secrets([crate::test_util::release_secret(
        "shop",
        "shop",
        1,
        Status::Deployed,
        EP,
    )]);
    let config = Config::default();
    for (op, old) in [("CREATE", Value::Null), ("UPDATE", stored.clone())] {
        let d = decide_json(
            &client_side,
            &config,
            &write(op, reordered.clone(), old.clone()),
        );
        assert!(d.is_allowed(), "{op} in another order: {d:?}");
        for other in [&added, &removed] {
            let d = decide_json(
                &client_side,
                &config,
                &write(op, other.clone(), old.clone()),
            );
            let Decision::Deny(l) = d else {
                panic!("{op} of other addresses was allowed: {d:?}")
            };
            assert!(
                l.changes.iter().any(|c| c.path.starts_with("/subsets")),
                "{l:?}"
            );
        }
    }
    let mut secret = crate::test_util::release_secret("shop", "shop", 1, Status::Deployed, EP);
    secret.release.apply_method = Some("ssa".into());
    let server_side = Index::from_secrets([secret]);
    let update = write("UPDATE", reordered.clone(), stored.clone());
    let d = decide_json(&server_side, &config, &update);
    assert!(matches!(d, Decision::Deny(_)), "no reverter: {d:?}");
    let reverting = Config {
        ownership_returned: true,
        ..Config::default()
    };
    let d = decide_json(&server_side, &reverting, &update);
    assert!(d.is_allowed(), "{d:?}");
    let d = decide_json(&server_side, &reverting, &write("UPDATE", added, stored));
    assert!(matches!(d, Decision::Deny(_)), "{d:?}");
}

/// CRDs given to the offline commands (`review --crd`) decide custom resources as the live
/// locker does from the API server's `/openapi/v2`: a Gateway's `listeners` is a list keyed
/// by `name` (a listener added is merged, not a change of the chart's), and a `scale` of a
/// Cache writes its `specReplicasPath` (`.spec.size`), denied when it changes the chart's.
#[test]
fn custom_resources_are_decided_by_their_crds() {
    const CHART: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw}\nspec:\n  gatewayClassName: eg\n  listeners:\n  - {name: http, port: 80, protocol: HTTP}\n---\napiVersion: example.com/v1\nkind: Cache\nmetadata: {name: c}\nspec: {size: 3}\n";
    let gateway_crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "spec": {"group": "gateway.networking.k8s.io", "names": {"kind": "Gateway", "plural": "gateways"},
            "versions": [{"name": "v1", "served": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "metadata": {"type": "object"},
                "spec": {"type": "object", "properties": {
                    "gatewayClassName": {"type": "string"},
                    "listeners": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}, "protocol": {"type": "string"}}}}}}}}}}]}});
    let cache_crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "spec": {"group": "example.com", "names": {"kind": "Cache", "plural": "caches"},
            "versions": [{"name": "v1", "served": true,
                "subresources": {"scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}});
    let crds = [gateway_crd, cache_crd];
    let with = crate::schema::KubeVersion::V1_20;
    let schema = Schema::snapshot(with).unwrap().with_crds(crds.iter());
    let without = Schema::snapshot(with).unwrap();
    let index = Index::from_secrets([crate::test_util::release_secret(
        "shop",
        "shop",
        1,
        Status::Deployed,
        CHART,
    )]);
    let helm =
        json!({"meta.helm.sh/release-name": "shop", "meta.helm.sh/release-namespace": "shop"});
    let gateway = |listeners: Value| {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "shop", "annotations": helm, "labels": {"app.kubernetes.io/managed-by": "Helm"}},
        "spec": {"gatewayClassName": "eg", "listeners": listeners}})
    };
    let http = json!({"name": "http", "port": 80, "protocol": "HTTP"});
    let https = json!({"name": "https", "port": 443, "protocol": "HTTPS"});
    let update = review(
        "UPDATE",
        json!({"group": "gateway.networking.k8s.io", "version": "v1", "kind": "Gateway"}),
        json!({"group": "gateway.networking.k8s.io", "version": "v1", "resource": "gateways"}),
        None,
        "gw",
        Some("shop"),
        "alice",
        gateway(json!([http.clone(), https])),
        gateway(json!([http])),
    );
    let decided = |schema: &Schema, body: &str| {
        decide(
            &index,
            schema,
            &Config::default(),
            &parse_review(body.as_bytes()).unwrap().request,
        )
        .unwrap()
    };
    assert!(
        decided(&schema, &update).is_allowed(),
        "a listener added was denied"
    );
    assert!(
        matches!(decided(&without, &update), Decision::Deny(_)),
        "without the CRD the list is atomic"
    );
    let scale = |size: i64| {
        review(
            "UPDATE",
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
            json!({"group": "example.com", "version": "v1", "resource": "caches"}),
            Some("scale"),
            "c",
            Some("shop"),
            "alice",
            json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "c", "namespace": "shop"}, "spec": {"replicas": size}}),
            json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "c", "namespace": "shop"}, "spec": {"replicas": 3}}),
        )
    };
    let Decision::Deny(l) = decided(&schema, &scale(5)) else {
        panic!("a scale of the chart's size was allowed")
    };
    assert_eq!(l.changes[0].path, "/spec/size");
    assert!(decided(&schema, &scale(3)).is_allowed());
    assert!(
        decided(&without, &scale(5)).is_allowed(),
        "without the CRD the kind is unknown"
    );
}

/// The owner's proof is read as a map of strings is: escapes decoded, the last of a repeated
/// key counting, and nothing when any annotation is not a string.
#[test]
fn the_release_annotations_are_read_as_a_map_of_strings() {
    let release = ReleaseKey::new("shop", "shop");
    let proves = |annotations: &str| {
        let text =
            format!(r#"{{"metadata":{{"name":"web","annotations":{annotations}}},"spec":{{}}}}"#);
        let object = crate::review::RawObject::from_json(&text).unwrap();
        names_release(Some(object), &release)
    };
    let both = r#""meta.helm.sh/release-name":"shop","meta.helm.sh/release-namespace":"shop""#;
    assert!(proves(&format!("{{{both}}}")));
    assert!(proves(&format!(r#"{{"a":"b",{both},"z":""}}"#)));
    assert!(proves(
        r#"{"meta.helm.sh/release-name":"sh\u006fp","meta.helm.sh\/release-namespace":"shop"}"#
    ));
    assert!(!proves(r#"{"meta.helm.sh/release-name":"shop"}"#));
    assert!(!proves(
        r#"{"meta.helm.sh/release-name":"other","meta.helm.sh/release-namespace":"shop"}"#
    ));
    // The last of a repeated key counts.
    assert!(proves(&format!(
        r#"{{"meta.helm.sh/release-name":"other",{both}}}"#
    )));
    assert!(!proves(&format!(
        r#"{{{both},"meta.helm.sh/release-name":"other"}}"#
    )));
    // A value that is not a string: not a map of strings, so no proof.
    assert!(!proves(&format!(r#"{{{both},"count":1}}"#)));
    assert!(!proves(&format!(r#"{{{both},"gone":null}}"#)));
    assert!(!proves("{}"));
    assert!(!proves("null"));
    let none = crate::review::RawObject::from_json(r#"{"metadata":{"name":"web"}}"#).unwrap();
    assert!(!names_release(Some(none), &release));
}

/// Issue 60, attack 4: a release of another namespace (`a-tenant`, sorting before `shop`) that
/// renders shop's Deployment, pending, opens nothing: a subresource is decided by its parent's
/// owner, the release of the object's own namespace, and a write that shows the object's
/// annotations by the release they name.
#[test]
fn a_pending_claim_from_another_namespace_opens_nothing() {
    let foreign = |status| {
        let mut secret = crate::test_util::release_secret(
            "a-tenant",
            "x",
            1,
            status,
            &CHART.replace("name: web", "name: web\n  namespace: shop"),
        );
        secret.release.chart = "x-1".into();
        secret
    };
    let schema = Schema::builtin();
    let config = Config::default();
    let scale = |r| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": r}});
    let scale_body = review(
        "UPDATE",
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
        json!({"group": "apps", "version": "v1", "resource": "deployments"}),
        Some("scale"),
        "web",
        Some("shop"),
        "alice",
        scale(5),
        scale(3),
    );
    let update = deploy_update(
        "alice",
        deployment(7, "nginx:1.25"),
        deployment(3, "nginx:1.25"),
    );
    for status in [
        Status::PendingInstall,
        Status::PendingUpgrade,
        Status::Deployed,
    ] {
        let index =
            Index::from_secrets([release_secret("shop", 2, Status::Deployed), foreign(status)]);
        // A Scale carries no annotations: the parent's owner is the release of its namespace,
        // found without reading it.
        let review = parse_review(scale_body.as_bytes()).unwrap();
        let found = find(&index, &schema, &review.request);
        assert!(!found.owner_to_read());
        let d = decide_found(&index, &schema, &config, &review.request, found).unwrap();
        assert!(
            matches!(&d, Decision::Deny(l) if l.release == ReleaseKey::new("shop", "shop") && l.proof == OwnerProof::ToRead),
            "{status:?}: {d:?}"
        );
        // A write that shows the annotations: the release they name.
        let d = decide_json(&index, &config, &update);
        assert!(
            matches!(&d, Decision::Deny(l) if l.release == ReleaseKey::new("shop", "shop")),
            "{status:?}: {d:?}"
        );
    }
    // Control: the own namespace's release at work opens it (Helm upgrading it).
    let index = Index::from_secrets([
        release_secret("shop", 2, Status::PendingUpgrade),
        foreign(Status::Deployed),
    ]);
    assert!(matches!(
        decide_json(&index, &config, &scale_body),
        Decision::Allow(Allowed::HelmAtWork { .. })
    ));
}

/// A cluster-scoped object two releases of other namespaces claim: a Scale holds nothing that
/// says whose it is, so the stored object's annotations are read first; unread, a pending
/// claim still opens nothing while another claim locks the object.
#[test]
fn a_scale_of_an_object_only_other_namespaces_claim_reads_its_owner() {
    let crd_chart = |ns: &str, name: &str, status| {
        let mut s = crate::test_util::release_secret(
            ns,
            name,
            1,
            status,
            "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {replicas: 2}\n",
        );
        s.release.chart = format!("{name}-1");
        s
    };
    let index = Index::from_secrets([
        crd_chart("a-tenant", "x", Status::PendingInstall),
        crd_chart("team", "ops", Status::Deployed),
    ]);
    let schema = Schema::builtin();
    let config = Config::default();
    let scale = |r| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "w"}, "spec": {"replicas": r}});
    let body = review(
        "UPDATE",
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
        json!({"group": "example.com", "version": "v1", "resource": "widgets"}),
        Some("scale"),
        "w",
        None,
        "alice",
        scale(5),
        scale(2),
    );
    let review = parse_review(body.as_bytes()).unwrap();
    let request = &review.request;
    let decide_with = |owner: Option<Option<ReleaseKey>>| {
        let found = find(&index, &schema, request);
        assert!(found.owner_to_read());
        let found = match owner {
            Some(owner) => found.with_stored_owner(owner),
            None => found,
        };
        decide_found(&index, &schema, &config, request, found).unwrap()
    };
    let ops = ReleaseKey::new("team", "ops");
    // Read: the owner decides (team/ops locks it); the pending claim would have opened it.
    let d = decide_with(Some(Some(ops.clone())));
    assert!(matches!(&d, Decision::Deny(l) if l.release == ops), "{d:?}");
    let d = decide_with(Some(Some(ReleaseKey::new("a-tenant", "x"))));
    assert!(
        matches!(d, Decision::Allow(Allowed::HelmAtWork { .. })),
        "{d:?}"
    );
    // Not read (the read failed): the claim that locks decides, and the stored object's
    // annotations must still prove it before the denial stands.
    let d = decide_with(None);
    assert!(
        matches!(&d, Decision::Deny(l) if l.release == ops && l.proof == OwnerProof::ToRead),
        "{d:?}"
    );
}

/// The chart-exact restore, as the API server stores it: an Endpoints whose chart leaves a
/// port's protocol out comes back from a backup with `protocol: TCP` (filled in by the API
/// server), a Deployment whose chart says `hostIPC: false` without it (left out): both are the
/// chart's. Another protocol is not.
#[test]
fn a_restore_of_what_the_api_server_stored_is_the_charts() {
    let idx = index_of("apiVersion: v1\nkind: Endpoints\nmetadata: {name: ext}\nsubsets:\n- addresses: [{ip: 10.0.0.5}]\n  ports: [{name: http, port: 80}]\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      hostIPC: false\n      containers:\n      - {name: web, image: nginx, env: [{name: EMPTY, value: \"\"}]}\n");
    let create = |group: &str, kind: &str, resource: &str, name: &str, object: Value| {
        review(
            "CREATE",
            json!({"group": group, "version": "v1", "kind": kind}),
            json!({"group": group, "version": "v1", "resource": resource}),
            None,
            name,
            Some("shop"),
            "admin",
            annotated(object, "shop"),
            Value::Null,
        )
    };
    let endpoints = |protocol: &str| {
        json!({"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": "ext", "namespace": "shop", "labels": {"app.kubernetes.io/managed-by": "Helm"}},
            "subsets": [{"addresses": [{"ip": "10.0.0.5"}],
                "ports": [{"name": "http", "port": 80, "protocol": protocol}]}]})
    };
    let d = decide_json(
        &idx,
        &Config::default(),
        &create("", "Endpoints", "endpoints", "ext", endpoints("TCP")),
    );
    assert!(d.is_allowed(), "{d:?}");
    let d = decide_json(
        &idx,
        &Config::default(),
        &create("", "Endpoints", "endpoints", "ext", endpoints("UDP")),
    );
    let Decision::Deny(l) = &d else {
        panic!("{d:?}")
    };
    assert!(l.changes[0].path.starts_with("/subsets"), "{:?}", l.changes);
    let stored = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"app.kubernetes.io/managed-by": "Helm"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                "containers": [{"name": "web", "image": "nginx", "env": [{"name": "EMPTY"}],
                    "imagePullPolicy": "Always", "terminationMessagePath": "/dev/termination-log"}],
                "dnsPolicy": "ClusterFirst", "restartPolicy": "Always"}}}});
    let d = decide_json(
        &idx,
        &Config::default(),
        &create("apps", "Deployment", "deployments", "web", stored),
    );
    assert!(d.is_allowed(), "{d:?}");
}

fn scaler_rule(paths: &[&str]) -> crate::writer_rule::WriterRule {
    crate::writer_rule::WriterRule {
        id: "web-scaler".into(),
        writers: crate::writer_rule::Writers {
            service_accounts: vec!["ops/scaler".into()],
            ..Default::default()
        },
        objects: crate::writer_rule::Objects {
            release: crate::writer_rule::ReleaseMatch {
                namespace: Some("shop".into()),
                name: Some("shop".into()),
                selector: None,
            },
            group: "apps".into(),
            kind: "Deployment".into(),
            names: vec![],
        },
        paths: paths.iter().map(|p| p.to_string()).collect(),
        until: None,
        reason: "the scaler sizes web".into(),
        accepted_by: None,
    }
}

const SCALER: &str = "system:serviceaccount:ops:scaler";

fn by_rules(decision: Decision, rules: &[&crate::writer_rule::WriterRule], user: &str) -> Decision {
    let writer = crate::writer_rule::RuleWriter {
        username: user,
        groups: vec![],
        field_manager: None,
    };
    allow_by_rules(decision, rules, &writer, &Default::default(), 0)
}

#[test]
fn a_rule_lets_its_writer_change_its_paths_and_the_warning_names_it() {
    let idx = index(Status::Deployed);
    let config = Config::default();
    let write = deploy_update(
        SCALER,
        deployment(7, "nginx:1.25"),
        deployment(3, "nginx:1.25"),
    );
    let denied = decide_json(&idx, &config, &write);
    let rule = scaler_rule(&["/spec/replicas"]);
    let allowed = by_rules(denied.clone(), &[&rule], SCALER);
    let Decision::Allow(Allowed::ByRule {
        rules,
        user,
        paths,
        warning,
        ..
    }) = &allowed
    else {
        panic!("{allowed:?}");
    };
    assert_eq!(
        (rules.as_slice(), user.as_str()),
        (&["web-scaler".to_string()][..], SCALER)
    );
    assert_eq!(paths, &["/spec/replicas"]);
    assert!(
        warning.contains("writer rule web-scaler") && warning.contains("the scaler sizes web"),
        "{warning}"
    );
    assert!(!warning.contains('7'), "no value in the warning: {warning}");
    assert!(matches!(allowed.verdict(), crate::review::Verdict::Warn(w) if w == warning));
    // Another writer, the same write: still denied.
    let alice = deploy_update(
        "alice",
        deployment(7, "nginx:1.25"),
        deployment(3, "nginx:1.25"),
    );
    let denied_alice = decide_json(&idx, &config, &alice);
    assert!(matches!(
        by_rules(denied_alice, &[&rule], "alice"),
        Decision::Deny(_)
    ));
    // An expired rule lifts nothing.
    let mut expired = rule.clone();
    expired.until = Some("1970-01-01T00:00:00Z".into());
    assert!(matches!(
        by_rules(denied, &[&expired], SCALER),
        Decision::Deny(_)
    ));
}

#[test]
fn a_rule_covering_some_paths_leaves_the_decision_on_the_others_only() {
    let idx = index(Status::Deployed);
    let write = deploy_update(SCALER, deployment(7, "evil:1"), deployment(3, "nginx:1.25"));
    let rule = scaler_rule(&["/spec/replicas"]);
    for mode in [Mode::Deny, Mode::Warn, Mode::Repair] {
        let config = Config {
            mode,
            ..Config::default()
        };
        let decision = decide_json(&idx, &config, &write);
        let narrowed = by_rules(decision, &[&rule], SCALER);
        let (Decision::Deny(l) | Decision::Warn(l) | Decision::Repair(l, _)) = &narrowed else {
            panic!("{mode:?}: {narrowed:?}");
        };
        assert_eq!(
            l.keyed_paths,
            ["/spec/template/spec/containers/[name=web]/image"],
            "{mode:?}"
        );
        assert_eq!(l.changes.len(), 1);
        assert!(!l.message.contains("/spec/replicas"), "{}", l.message);
        assert!(l.message.contains("image"), "{}", l.message);
        if let Decision::Repair(_, patch) = &narrowed {
            let text = serde_json::to_string(patch).unwrap();
            assert!(
                !text.contains("replicas") && text.contains("image"),
                "{text}"
            );
        }
    }
}

#[test]
fn a_rule_never_lifts_a_delete() {
    let idx = index(Status::Deployed);
    let write = review(
        "DELETE",
        json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
        json!({"group": "apps", "version": "v1", "resource": "deployments"}),
        None,
        "web",
        Some("shop"),
        SCALER,
        Value::Null,
        deployment(3, "nginx:1.25"),
    );
    let denied = decide_json(&idx, &Config::default(), &write);
    assert!(matches!(&denied, Decision::Deny(l) if l.delete));
    let rule = scaler_rule(&["/spec", "/metadata"]);
    assert!(matches!(
        by_rules(denied, &[&rule], SCALER),
        Decision::Deny(_)
    ));
}

/// What learning records (`Locked::keyed_paths`) is what a rule names: a rule proposed from
/// those paths lets the same write through, wherever the item sits in the list.
#[test]
fn a_rule_made_from_a_denials_keyed_paths_lets_that_write_through() {
    let idx = index(Status::Deployed);
    let mut new = deployment(3, "nginx:1.26");
    let mut old = deployment(3, "nginx:1.25");
    let sidecar = json!({"name": "envoy", "image": "envoy"});
    for o in [&mut new, &mut old] {
        let containers = o["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .unwrap();
        containers.insert(0, sidecar.clone());
    }
    let write = deploy_update(SCALER, new, old);
    let denied = decide_json(&idx, &Config::default(), &write);
    let Decision::Deny(l) = &denied else {
        panic!("{denied:?}")
    };
    assert_eq!(l.changes[0].path, "/spec/template/spec/containers/1/image");
    assert_eq!(
        l.keyed_paths,
        ["/spec/template/spec/containers/[name=web]/image"]
    );
    let proposed: Vec<&str> = l.keyed_paths.iter().map(String::as_str).collect();
    let rule = scaler_rule(&proposed);
    assert_eq!(rule.validate(), Ok(()));
    assert!(matches!(
        by_rules(denied, &[&rule], SCALER),
        Decision::Allow(Allowed::ByRule { .. })
    ));
}

#[test]
fn what_decided_names_the_lock_or_the_rule_that_allowed() {
    let deny = decide_json(
        &index(Status::Deployed),
        &Config::default(),
        &deploy_update(
            "oncall",
            deployment(7, "nginx:1.25"),
            deployment(3, "nginx:1.25"),
        ),
    );
    assert_eq!(deny.decided_by(), ("locked", Some("shop/shop".to_string())));
    let exception = crate::exception::Exception {
        name: "shop/oncall".into(),
        release: ReleaseKey::new("shop", "shop"),
        users: vec!["oncall".into()],
        groups: vec![],
        objects: vec![],
        paths: vec![],
        reason: "INC-42".into(),
        opened: 100,
        until: 200,
    };
    let no_groups: [&str; 0] = [];
    let excused = excuse(deny, &[&exception], "oncall", &no_groups, 150);
    assert_eq!(
        excused.decided_by(),
        ("lock_exception", Some("shop/oncall".to_string()))
    );
    let exempt = Decision::Allow(Allowed::Exempt {
        release: ReleaseKey::new("shop", "shop"),
        user: "ci-bot".into(),
    });
    assert_eq!(exempt.decided_by(), ("exempt", Some("ci-bot".to_string())));
    let ruled = Decision::Allow(Allowed::ByRule {
        release: ReleaseKey::new("shop", "shop"),
        rules: vec!["hpa".into(), "oncall".into()],
        user: "hpa-controller".into(),
        paths: vec!["/spec/replicas".into()],
        warning: String::new(),
    });
    assert_eq!(
        ruled.decided_by(),
        ("writer_rule", Some("hpa,oncall".to_string()))
    );
    assert_eq!(
        Decision::Allow(Allowed::NotOwned).decided_by(),
        ("not_owned", None)
    );
}
