use super::*;

#[test]
fn the_documented_rule_reads_and_writes_back_the_same() {
    let text = "id: shop-web-scaler\nwriters:\n  serviceAccounts: [ops/scaler]\n  fieldManager: scaler\nobjects:\n  release: {namespace: shop, name: shop}\n  group: apps\n  kind: Deployment\n  names: [shop-web]\npaths: [/spec/replicas]\nuntil: \"2027-03-01T00:00:00Z\"\nreason: the scaler sizes shop-web by queue length\nacceptedBy: alice@example.com\n";
    let rule: WriterRule = serde_saphyr::from_str(text).unwrap();
    assert_eq!(rule.writers.service_accounts, ["ops/scaler"]);
    assert_eq!(rule.objects.release.namespace.as_deref(), Some("shop"));
    assert_eq!(rule.paths, ["/spec/replicas"]);
    let again: WriterRule =
        serde_saphyr::from_str(&serde_saphyr::to_string(&rule).unwrap()).unwrap();
    assert_eq!(again, rule);
    assert!(serde_saphyr::from_str::<WriterRule>("id: x\nwho: [a]\n").is_err());
}

fn rule(text: &str) -> WriterRule {
    serde_saphyr::from_str(text).unwrap()
}

const SCALER: &str = "id: shop-web-scaler\nwriters: {serviceAccounts: [ops/scaler]}\nobjects: {release: {namespace: shop, name: shop}, group: apps, kind: Deployment, names: [web]}\npaths: [/spec/replicas, '/spec/template/spec/containers/[name=web]/image']\nreason: sizes web\n";

fn writer<'a>(username: &'a str, groups: &[&'a str], manager: Option<&'a str>) -> RuleWriter<'a> {
    RuleWriter {
        username,
        groups: groups.to_vec(),
        field_manager: manager,
    }
}

#[test]
fn a_valid_rule_passes_and_each_mistake_is_named_with_the_rules_id() {
    assert_eq!(rule(SCALER).validate(), Ok(()));
    let cases = [
        ("id: Shop_Web\n", "the id must be"),
        ("writers: {}\n", "names no writer"),
        (
            "writers: {serviceAccounts: [scaler]}\n",
            "is not namespace/name",
        ),
        ("objects: {kind: ''}\n", "objects.kind is required"),
        ("paths: [spec/replicas]\n", "is not a JSON Pointer"),
        ("paths: ['/']\n", "is not a JSON Pointer"),
        (
            "paths: ['/spec/containers/[name]/image']\n",
            "segment \"[name]\"",
        ),
        ("until: next tuesday\n", "is not an RFC 3339 time"),
    ];
    for (change, want) in cases {
        let mut value: serde_json::Value = serde_saphyr::from_str(SCALER).unwrap();
        let patch: serde_json::Value = serde_saphyr::from_str(change).unwrap();
        for (k, v) in patch.as_object().unwrap() {
            value[k] = v.clone();
        }
        let bad: WriterRule = serde_json::from_value(value).unwrap();
        let err = bad.validate().unwrap_err();
        assert!(err.to_string().contains(want), "{change}: {err}");
        assert!(
            err.to_string()
                .starts_with(&format!("writer rule {:?}", bad.id)),
            "{err}"
        );
    }
}

#[test]
fn ids_are_unique_across_every_source_and_one_bad_rule_leaves_the_others() {
    let a = rule(SCALER);
    let mut b = a.clone();
    b.reason = "again".into();
    let mut c = a.clone();
    c.id = "other".into();
    let mut bad = a.clone();
    bad.id = "broken".into();
    bad.paths = vec!["x".into()];
    let (good, errors) = validate_rules(vec![a.clone(), b, bad, c.clone()]);
    assert_eq!(good, vec![a, c]);
    assert_eq!(errors.len(), 2);
    assert!(errors[0].to_string().contains("same id"), "{}", errors[0]);
    assert_eq!(errors[1].id, "broken");
}

#[test]
fn a_rule_names_its_service_account_user_or_system_group_and_never_a_person_by_group() {
    let r = rule(SCALER);
    assert!(r.matches_writer(&writer("system:serviceaccount:ops:scaler", &[], None)));
    assert!(!r.matches_writer(&writer("system:serviceaccount:ops:other", &[], None)));
    assert!(!r.matches_writer(&writer("system:serviceaccount:dev:scaler", &[], None)));
    // A person whose name looks like the account's is not it.
    assert!(!r.matches_writer(&writer("ops/scaler", &[], None)));

    let mut by_group = r.clone();
    by_group.writers = Writers {
        groups: vec!["system:authenticated".into()],
        ..Writers::default()
    };
    // The attack: every person is in system:authenticated.
    assert!(!by_group.matches_writer(&writer("alice", &["system:authenticated"], None)));
    // Its control: a service account in the group is matched.
    assert!(by_group.matches_writer(&writer(
        "system:serviceaccount:ops:scaler",
        &["system:authenticated"],
        None
    )));

    let mut by_user = r.clone();
    by_user.writers = Writers {
        users: vec!["alice".into()],
        ..Writers::default()
    };
    assert!(by_user.matches_writer(&writer("alice", &[], None)));
    assert!(!by_user.matches_writer(&writer("bob", &[], None)));
}

#[test]
fn a_field_manager_narrows_the_writer() {
    let mut r = rule(SCALER);
    r.writers.field_manager = Some("scaler".into());
    let sa = "system:serviceaccount:ops:scaler";
    assert!(r.matches_writer(&writer(sa, &[], Some("scaler"))));
    assert!(!r.matches_writer(&writer(sa, &[], Some("kubectl-edit"))));
    assert!(!r.matches_writer(&writer(sa, &[], None)));
}

#[test]
fn a_rule_covers_its_release_kind_and_names_only() {
    let r = rule(SCALER);
    let release = ReleaseKey::new("shop", "shop");
    let other = ReleaseKey::new("dev", "shop");
    let labels = BTreeMap::from([("team".to_string(), "web".to_string())]);
    let object = |release, group, kind, name| RuleObject {
        release,
        labels: &labels,
        group,
        kind,
        name,
    };
    assert!(r.matches_object(&object(&release, "apps", "Deployment", "web")));
    assert!(!r.matches_object(&object(&other, "apps", "Deployment", "web")));
    assert!(!r.matches_object(&object(&release, "apps", "StatefulSet", "web")));
    assert!(!r.matches_object(&object(&release, "", "Deployment", "web")));
    assert!(!r.matches_object(&object(&release, "apps", "Deployment", "db")));
    let mut by_selector = r.clone();
    by_selector.objects.release = ReleaseMatch {
        selector: Some(LabelSelector::try_from("team=web".to_string()).unwrap()),
        ..ReleaseMatch::default()
    };
    by_selector.objects.names.clear();
    assert!(by_selector.matches_object(&object(&other, "apps", "Deployment", "db")));
    let none = BTreeMap::new();
    assert!(!by_selector.matches_object(&RuleObject {
        labels: &none,
        ..object(&other, "apps", "Deployment", "db")
    }));
}

#[test]
fn an_expired_rule_stops_matching() {
    let mut r = rule(SCALER);
    assert!(r.is_active(i64::MAX));
    r.until = Some("2027-03-01T00:00:00Z".into());
    let end = 1_803_859_200;
    assert!(r.is_active(end - 1));
    assert!(!r.is_active(end));
    let sa = writer("system:serviceaccount:ops:scaler", &[], None);
    let (release, labels) = (ReleaseKey::new("shop", "shop"), BTreeMap::new());
    let object = RuleObject {
        release: &release,
        labels: &labels,
        group: "apps",
        kind: "Deployment",
        name: "web",
    };
    assert!(r.allows(&sa, &object, "/spec/replicas", end - 1));
    assert!(!r.allows(&sa, &object, "/spec/replicas", end));
}

#[test]
fn a_rule_path_covers_the_paths_below_it_by_segment_star_and_item_keys() {
    let mut r = rule(SCALER);
    r.paths = vec![
        "/spec/replicas".into(),
        "/spec/template/spec/containers/[name=web]/image".into(),
        "/spec/template/metadata/annotations/*".into(),
        "/spec/template/spec/containers/[name=web]/ports/[containerPort=80]".into(),
    ];
    for covered in [
        "/spec/replicas",
        "/spec/template/spec/containers/[name=web]/image",
        "/spec/template/metadata/annotations/restartedAt",
        "/spec/template/spec/containers/[name=web]/ports/[containerPort=80,protocol=TCP]/hostPort",
    ] {
        assert!(r.covers_path(covered), "{covered}");
    }
    for free in [
        "/spec/replicasX",
        "/spec",
        "/spec/template/spec/containers/[name=sidecar]/image",
        "/spec/template/spec/containers/0/image",
        "/spec/template/spec/containers/[name=web]/command",
        "/spec/template/metadata/labels/app",
        "/spec/template/spec/containers/[name=web]/ports/[containerPort=8080,protocol=TCP]",
    ] {
        assert!(!r.covers_path(free), "{free}");
    }
}

#[test]
fn no_rule_gives_away_helms_marks_or_owner_references() {
    let mut r = rule(SCALER);
    r.paths = vec!["/metadata".into()];
    assert!(r.covers_path("/metadata/labels/app"));
    assert!(!r.covers_path("/metadata/annotations/meta.helm.sh~1release-name"));
    assert!(!r.covers_path("/metadata/labels/app.kubernetes.io~1managed-by"));
    assert!(!r.covers_path("/metadata/ownerReferences/0"));
}

#[test]
fn an_index_path_is_keyed_by_the_schemas_list_map_keys() {
    let schema = crate::schema::Schema::builtin();
    let root = schema.root_or_deduced("apps/v1", "Deployment");
    let object = serde_json::json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [
        {"name": "sidecar", "image": "envoy"},
        {"name": "web", "image": "nginx", "args": ["a", "b"], "ports": [{"containerPort": 80}],
         "env": [{"name": "A/B", "value": "1"}]}
    ]}}}});
    let keyed = |path: &str| keyed_path(&schema, root, &object, path);
    assert_eq!(keyed("/spec/replicas"), "/spec/replicas");
    assert_eq!(
        keyed("/spec/template/spec/containers/1/image"),
        "/spec/template/spec/containers/[name=web]/image"
    );
    // Two keys, the omitted protocol at its default; an atomic list keeps its index.
    assert_eq!(
        keyed("/spec/template/spec/containers/1/ports/0"),
        "/spec/template/spec/containers/[name=web]/ports/[containerPort=80,protocol=TCP]"
    );
    assert_eq!(
        keyed("/spec/template/spec/containers/1/args/1"),
        "/spec/template/spec/containers/[name=web]/args/1"
    );
    // A key value with a slash is escaped as one segment.
    assert_eq!(
        keyed("/spec/template/spec/containers/1/env/0/value"),
        "/spec/template/spec/containers/[name=web]/env/[name=A~1B]/value"
    );
    // An item the object does not have stays an index.
    assert_eq!(
        keyed("/spec/template/spec/containers/5/image"),
        "/spec/template/spec/containers/5/image"
    );
}

#[test]
fn a_helmreleases_rule_can_only_name_its_own_release() {
    let release = ReleaseKey::new("shop", "shop");
    // The attack: a HelmRelease for shop/shop gives writers another namespace's release.
    let mut foreign = rule(SCALER);
    foreign.id = "foreign".into();
    foreign.objects.release = ReleaseMatch {
        namespace: Some("payments".into()),
        name: Some("payments".into()),
        selector: None,
    };
    // Its control: the same rule naming its own release, and one naming none (bound to it).
    let own = rule(SCALER);
    let mut unnamed = rule(SCALER);
    unnamed.id = "unnamed".into();
    unnamed.objects.release = ReleaseMatch::default();
    let (good, refused) = registration_rules(&release, &[foreign, own.clone(), unnamed.clone()]);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].id, "foreign");
    assert!(
        refused[0].reason.contains("names another release"),
        "{}",
        refused[0]
    );
    assert_eq!(good.len(), 2);
    for bound in &good {
        assert_eq!(bound.objects.release.namespace.as_deref(), Some("shop"));
        assert_eq!(bound.objects.release.name.as_deref(), Some("shop"));
    }
    // Bound, the unnamed rule no longer reaches another release's objects.
    let (other, labels) = (ReleaseKey::new("payments", "payments"), BTreeMap::new());
    let elsewhere = RuleObject {
        release: &other,
        labels: &labels,
        group: "apps",
        kind: "Deployment",
        name: "web",
    };
    assert!(unnamed.matches_object(&elsewhere));
    assert!(!good[1].matches_object(&elsewhere));
}

#[test]
fn a_bad_key_of_the_writers_configmap_is_named_and_the_good_ones_load() {
    let data: BTreeMap<String, String> = [
        ("shop-web-scaler.yaml", SCALER),
        ("notes.txt", "hello"),
        ("broken.yaml", "id: broken\nwho: [x]\n"),
        ("renamed.yaml", SCALER),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let (good, bad) = rules_of_configmap(&data);
    assert_eq!(good, vec![rule(SCALER)]);
    let named: Vec<&str> = bad.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(named, ["broken.yaml", "notes.txt", "renamed.yaml"]);
    assert!(
        bad[2].reason.contains("is not its key's name"),
        "{}",
        bad[2]
    );
}

#[test]
fn the_reverter_leaves_what_a_rule_gives_while_its_writer_holds_it() {
    let mut r = rule(SCALER);
    r.writers.field_manager = Some("scaler".into());
    let live = |manager: &str| {
        serde_json::json!({"metadata": {"managedFields": [
            {"manager": "helm", "operation": "Update", "fieldsV1": {"f:spec": {"f:template": {}}}},
            {"manager": manager, "operation": "Apply", "fieldsV1": {"f:spec": {"f:replicas": {},
                "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}}}}}}}}
        ]},
        "spec": {"replicas": 7, "template": {"spec": {"containers": [
            {"name": "sidecar", "image": "envoy"}, {"name": "web", "image": "nginx:2"}]}}}})
    };
    let (release, labels) = (ReleaseKey::new("shop", "shop"), BTreeMap::new());
    let object = RuleObject {
        release: &release,
        labels: &labels,
        group: "apps",
        kind: "Deployment",
        name: "web",
    };
    // Held by the rule's manager: both paths are left, the item found by its key.
    assert_eq!(
        rule_held_paths(&[&r], &object, &live("scaler"), None, 0),
        ["/spec/replicas", "/spec/template/spec/containers/1/image"]
    );
    // Another manager changed them: the rule gives them to the scaler only, so they are drift.
    assert!(rule_held_paths(&[&r], &object, &live("kubectl-edit"), None, 0).is_empty());
    // On a release Helm applies server-side, a path handed back to Helm's entry (value kept)
    // is still the scaler's; another manager's stays drift.
    assert_eq!(
        rule_held_paths(&[&r], &object, &live("python"), Some("python"), 0).len(),
        2
    );
    assert!(rule_held_paths(&[&r], &object, &live("kubectl-edit"), Some("python"), 0).is_empty());
    // A rule naming no manager leaves them whoever wrote them.
    let mut any = r.clone();
    any.writers.field_manager = None;
    assert_eq!(
        rule_held_paths(&[&any], &object, &live("kubectl-edit"), None, 0).len(),
        2
    );
    // Expired, or gone: drift again.
    any.until = Some("1970-01-01T00:00:00Z".into());
    assert!(rule_held_paths(&[&any], &object, &live("kubectl-edit"), None, 0).is_empty());
    assert!(rule_held_paths(&[], &object, &live("scaler"), None, 0).is_empty());
    // Another object of the release is not the rule's.
    let db = RuleObject {
        name: "db",
        ..object
    };
    assert!(rule_held_paths(&[&r], &db, &live("scaler"), None, 0).is_empty());
}
