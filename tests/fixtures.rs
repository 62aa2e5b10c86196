//! Every recorded fixture decodes, and every recorded AdmissionReview gets the decision a user
//! would expect at the moment it was recorded (tests/fixtures/cluster-capture/README.md tells
//! the story: helm install, upgrade, kubectl drift, a failed upgrade and rollback, uninstall,
//! and a namespace deletion).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use helm_locker::decide::{decide, Allowed, Decision};
use helm_locker::index::Index;
use helm_locker::policy::Config;
use helm_locker::release::{decode_secret, parse_release_file, SecretRef};
use helm_locker::review::{parse_head, parse_review};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn sorted_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

#[test]
fn every_release_fixture_decodes() {
    let mut decoded = 0;
    for dir in ["helm3-releases", "cluster-capture/releases"] {
        for file in sorted_files(&fixtures().join(dir)) {
            if file.extension().is_some_and(|e| e == "md") {
                continue;
            }
            let entries = parse_release_file(&std::fs::read_to_string(&file).unwrap()).unwrap();
            assert!(!entries.is_empty(), "{}", file.display());
            for entry in entries {
                let secret =
                    entry.unwrap_or_else(|(s, e)| panic!("{}: {s:?}: {e}", file.display()));
                let manifest = helm_locker::manifest::parse_manifest(&secret.release.manifest);
                assert!(!manifest.objects.is_empty(), "{}", file.display());
                assert_eq!(manifest.skipped, [], "{}", file.display());
                decoded += 1;
            }
        }
    }
    assert_eq!(decoded, 8 + 11);
}

#[test]
fn helm3_fixtures_have_the_documented_content() {
    let read = |name: &str| {
        let text = std::fs::read_to_string(fixtures().join("helm3-releases").join(name)).unwrap();
        parse_release_file(&text).unwrap().remove(0).unwrap()
    };
    let double = read("deckhouse-releaseWithDoubleFields.yaml");
    assert_eq!(
        (
            double.release.name.as_str(),
            double.release.namespace.as_str()
        ),
        ("fooing", "d8-system")
    );
    let index = Index::from_secrets([double]);
    let ingress = index
        .lookup("networking.k8s.io", "Ingress", Some("d8-system"), "foo")
        .expect("the Ingress is locked");
    // The duplicated `spec:` keeps its last value, as lenient parsers (and the API server) do.
    assert!(ingress.content().get("spec").is_some());

    let deprecated = read("deckhouse-helm3ReleaseWithDeprecated.yaml");
    assert_eq!(deprecated.secret.namespace, "appns");
    assert_eq!(deprecated.release.namespace, "default");
    let not_deployed = read("deckhouse-helm3NotDeployed.yaml");
    // Helm reads the payload, not the Secret's labels.
    assert_eq!(not_deployed.labels["status"], "superseded");
    assert_eq!(
        not_deployed.release.status,
        helm_locker::release::Status::Deployed
    );
    let configmap = read("kots-test-chart-2.yaml");
    assert_eq!(configmap.release.revision, 1);
    assert_eq!(configmap.release.apply_method, None);
}

struct Recorded {
    number: usize,
    file: String,
    body: String,
}

fn reviews() -> Vec<Recorded> {
    sorted_files(&fixtures().join("cluster-capture/reviews"))
        .into_iter()
        .map(|path| {
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            Recorded {
                number: file[..3].parse().unwrap(),
                body: std::fs::read_to_string(&path).unwrap(),
                file,
            }
        })
        .collect()
}

/// After the API server admitted a write to a release Secret, the watch sees it.
fn observe(index: &mut Index, body: &str) {
    let review: Value = serde_json::from_str(body).unwrap();
    let request = &review["request"];
    if request["kind"]["kind"] != "Secret" {
        return;
    }
    let object = if request["operation"] == "DELETE" {
        &request["oldObject"]
    } else {
        &request["object"]
    };
    if object["type"] != "helm.sh/release.v1" {
        return;
    }
    if request["operation"] == "DELETE" {
        index.remove_secret(&SecretRef {
            namespace: object["metadata"]["namespace"].as_str().unwrap().into(),
            name: object["metadata"]["name"].as_str().unwrap().into(),
        });
    } else {
        index.upsert(decode_secret(object).unwrap());
    }
}

/// The kubectl writes that change fields the chart sets.
const DENIED: &[(usize, &str)] = &[
    (74, "/data/greeting is \"hi\" in the chart, this request sets \"hacked\""),
    (75, "/spec/replicas is 3 in the chart, this request sets 7"),
    (79, "/spec/replicas is 3 in the chart, this request sets 5"),
    (80, "/spec/replicas is 3 in the chart, this request sets 5"),
    (85, "/spec/template/spec/containers/0/image is \"nginx:1.25\" in the chart, this request sets \"nginx:1.27\""),
    (95, "/data/mode is \"production\" in the chart, this request sets \"debug\""),
    // The values are already drifted here (the recording allowed everything), but the apply
    // makes kubectl a co-owner of two fields Helm owns: the failed upgrade at 104 is exactly
    // that conflict.
    (97, "server-side apply by field manager \"kubectl\" claims /data/greeting, /data/mode, which Helm owns"),
    // The same apply again: 1.20 shows kubectl's entry in oldObject too (it shares the new
    // object's managedFields), so an existing co-ownership cannot be told from a new one.
    (98, "server-side apply by field manager \"kubectl\" claims /data/mode, which Helm owns"),
    // The server-side apply that owns only `mode` drops the drifted `greeting`: a chart field.
    (99, "/data/greeting is \"hi\" in the chart, this request removes it"),
    // `rules` is an atomic list (the API's schema): the whole list is one locked value.
    (100, "/rules is [{\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],\"verbs\":[\"get\",\"list\"]}] in the chart, this request sets [{\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],\"verbs\":[\"get\",\"list\",\"delete\"]}]"),
    (101, "/spec/size is 3 in the chart, this request sets 9"),
    (102, "deleting it is not allowed"),
];

#[test]
fn every_recorded_review_gets_the_decision_a_user_expects() {
    let config = Config::default();
    let mut index = Index::new();
    let mut seen = BTreeSet::new();
    let mut report = Vec::new();
    let mut fast_path = 0;
    for review in reviews() {
        let parsed = parse_review(review.body.as_bytes()).unwrap();
        let decision = decide(
            &index,
            &helm_locker::schema::Schema::builtin(),
            &config,
            &parsed.request,
        )
        .unwrap();
        // The server's fast path (the review's head only) answers only what the full review
        // would, and only for objects no release owns.
        if let Some(head) = parse_head(review.body.as_bytes()) {
            assert_eq!(head.request.uid, parsed.request.uid);
            assert_eq!(head.api_version, parsed.api_version);
            if let Ok(Some(fast)) = helm_locker::decide::decide_head(&index, &head.request) {
                assert_eq!(fast.explain(), decision.explain(), "{}", review.file);
                fast_path += 1;
            }
        }
        // Reading only what the write changes (prune.rs) decides as reading everything: with
        // oldObject re-encoded (pretty), no subtree is byte-equal and nothing is left out.
        let reencoded: Value = serde_json::from_str(&review.body).unwrap();
        if let Some(old) = reencoded["request"].get("oldObject") {
            if !old.is_null() {
                let pretty = serde_json::to_string_pretty(old).unwrap();
                let text = reencoded
                    .to_string()
                    .replace(&serde_json::to_string(old).unwrap(), &pretty);
                let whole = parse_review(text.as_bytes()).unwrap();
                let unpruned = decide(
                    &index,
                    &helm_locker::schema::Schema::builtin(),
                    &config,
                    &whole.request,
                )
                .unwrap();
                assert_eq!(unpruned, decision, "{}", review.file);
            }
        }
        let expected = DENIED.iter().find(|(n, _)| *n == review.number);
        match (&decision, expected) {
            (Decision::Deny(locked), Some((_, fragment))) => {
                assert!(
                    locked.message.contains(fragment),
                    "{}: {}",
                    review.file,
                    locked.message
                );
                assert!(
                    locked
                        .message
                        .contains("Helm release shop/shop (revision 2, deployed)"),
                    "{}",
                    locked.message
                );
                seen.insert(review.number);
            }
            (Decision::Allow(allowed), None) => {
                let field_manager = parsed.request.field_manager().unwrap_or_default();
                // Helm's own writes (field manager `python`, the SDK's program name) are
                // allowed because the release is pending, never by accident.
                if field_manager == "python"
                    && review.file.contains("-helm-")
                    && !review.file.contains("hook")
                    && !review.file.contains("namespace-")
                {
                    assert!(
                        matches!(allowed, Allowed::HelmAtWork { .. }),
                        "{}: {allowed:?}",
                        review.file
                    );
                }
                if review.file.contains("annotate-unmanaged")
                    || review.file.contains("kubectl-label-update-service")
                {
                    assert!(
                        matches!(allowed, Allowed::NoLockedChange { .. }),
                        "{}: {allowed:?}",
                        review.file
                    );
                }
            }
            _ => report.push(format!("{}: {}", review.file, decision.explain())),
        }
        observe(&mut index, &review.body);
    }
    assert!(
        report.is_empty(),
        "unexpected decisions:\n{}",
        report.join("\n")
    );
    assert_eq!(seen.len(), DENIED.len());
    // Status writes to Helm's objects (the deployment controller's) are judged on their metadata
    // since session 5, so they leave the fast path: 94 of 167 take it.
    assert!(
        fast_path >= 90,
        "only {fast_path} reviews took the fast path"
    );
}

#[test]
fn the_replayed_release_state_matches_the_recorded_snapshots() {
    let snapshots = [
        (57, "01-after-install.json"),
        (73, "02-after-upgrade.json"),
        (111, "03-after-upgrade-after-drift.json"),
        (116, "04-after-rollback.json"),
        (151, "05-temp-installed.json"),
    ];
    let mut index = Index::new();
    for review in reviews() {
        observe(&mut index, &review.body);
        if let Some((_, file)) = snapshots.iter().find(|(n, _)| *n == review.number) {
            let text =
                std::fs::read_to_string(fixtures().join("cluster-capture/releases").join(file))
                    .unwrap();
            let from_snapshot = Index::from_secrets(
                parse_release_file(&text)
                    .unwrap()
                    .into_iter()
                    .map(Result::unwrap),
            );
            let summary = |index: &Index| {
                index
                    .releases()
                    .iter()
                    .filter(|s| from_snapshot.release(&s.key).is_some())
                    .map(|s| {
                        (
                            s.key.to_string(),
                            s.revisions
                                .values()
                                .map(|r| (r.revision, r.status))
                                .collect::<Vec<_>>(),
                            s.objects.as_ref().map(Vec::len),
                        )
                    })
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                summary(&index),
                summary(&from_snapshot),
                "after review {}",
                review.number
            );
        }
    }
}

#[test]
fn a_field_the_chart_does_not_set_is_free_even_without_exemptions() {
    // The token controller adds `secrets` to the chart's ServiceAccount (recorded during the
    // install); decided against the deployed release with no exemptions, it is still allowed.
    let text =
        std::fs::read_to_string(fixtures().join("cluster-capture/releases/02-after-upgrade.json"))
            .unwrap();
    let index = Index::from_secrets(
        parse_release_file(&text)
            .unwrap()
            .into_iter()
            .map(Result::unwrap),
    );
    let config = Config {
        exempt: Default::default(),
        ..Config::default()
    };
    let config = Config {
        exempt: helm_locker::policy::Exemptions {
            users: vec![],
            groups: vec![],
            service_account_namespaces: vec![],
            service_accounts: vec![],
        },
        ..config
    };
    for number in [48, 94] {
        let review = reviews().into_iter().find(|r| r.number == number).unwrap();
        let parsed = parse_review(review.body.as_bytes()).unwrap();
        let decision = decide(
            &index,
            &helm_locker::schema::Schema::builtin(),
            &config,
            &parsed.request,
        )
        .unwrap();
        assert!(
            matches!(decision, Decision::Allow(Allowed::NoLockedChange { .. })),
            "{}: {decision:?}",
            review.file
        );
    }
}

/// What helm-locker locks is what the API server itself attributed to Helm: every object Helm
/// created in the recording carries Helm's `Apply` entry in `managedFields`, written by
/// kube-apiserver 1.20; the set computed from the chart and the API's schema must equal it.
#[test]
fn owned_fields_equal_what_the_api_server_attributed_to_helm() {
    use helm_locker::ownership::{applied_object, attribution_of, helm_fields};
    use helm_locker::schema::Schema;
    let schema = Schema::builtin();
    let mut index = Index::new();
    let mut compared = Vec::new();
    for review in reviews() {
        let body: Value = serde_json::from_str(&review.body).unwrap();
        let request = &body["request"];
        observe(&mut index, &review.body);
        if request["operation"] != "CREATE" {
            continue;
        }
        let object = &request["object"];
        let Some((manager, fields)) = helm_fields(object, None) else {
            continue;
        };
        let api_version = object["apiVersion"].as_str().unwrap();
        let kind = object["kind"].as_str().unwrap();
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let name = object["metadata"]["name"].as_str().unwrap();
        let namespace = object["metadata"]["namespace"].as_str();
        let locked = index
            .lookup(group, kind, namespace, name)
            .unwrap_or_else(|| panic!("{}: not indexed", review.file));
        let release = &locked.release;
        let applied = applied_object(&locked.content(), (&release.name, &release.namespace));
        let root = schema.root_or_deduced(api_version, kind);
        let found = attribution_of(&schema, root, &applied, manager, fields);
        assert!(found.matches(), "{}: {found:?}", review.file);
        compared.push(kind.to_string());
    }
    // Two installs (shop, tmp) of six objects each, and the Service the failed upgrade
    // created again after `kubectl delete`.
    assert_eq!(compared.len(), 13, "{compared:?}");
}
