//! The pure core's hot paths: `cargo bench --bench core`.
//!
//! - decide() for an object no release owns (the fast path every unrelated write takes);
//! - decide() for a write to a locked ~20 KB Deployment (parsing object and oldObject included),
//!   denied (replicas changed) and allowed (a controller's update that changes no chart field);
//! - re-indexing one release of 200 objects in an index of 1,000 releases;
//! - index memory against the decompressed manifest bytes (printed once);
//! - reading one release Secret of 30 objects as the watch does: decoded, then decoded and its
//!   author stamp verified (the cost the author-rights check adds at start-up, per Secret).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use helm_locker_core::{
    decide, decide_found, find, parse_review, Config, Index, ReleaseDriver, ReleaseSecret, Status,
};
use serde_json::json;

fn manifest(release: &str, objects: usize) -> String {
    let mut out = String::new();
    for i in 0..objects {
        out.push_str(&format!(
            "---\n# Source: app/templates/o{i}.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {release}-web-{i}\n  labels:\n    app.kubernetes.io/name: app\n    app.kubernetes.io/instance: {release}\n    app.kubernetes.io/managed-by: Helm\nspec:\n  replicas: 3\n  selector:\n    matchLabels: {{app.kubernetes.io/name: app, app.kubernetes.io/instance: {release}}}\n  template:\n    metadata:\n      labels: {{app.kubernetes.io/name: app, app.kubernetes.io/instance: {release}}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n        env:\n        - {{name: A, value: \"1\"}}\n        resources:\n          limits: {{cpu: \"0.5\", memory: 1Gi}}\n        ports:\n        - containerPort: 80\n"
        ));
    }
    out
}

fn secret(ns: &str, name: &str, objects: usize) -> ReleaseSecret {
    let mut secret = helm_locker_core::test_util::release_secret(
        ns,
        name,
        1,
        Status::Deployed,
        &manifest(name, objects),
    );
    secret.release.chart = "app-1.0.0".into();
    secret.release.apply_method = Some("ssa".into());
    secret
}

fn cluster(releases: usize, objects: usize) -> Index {
    Index::from_secrets((0..releases).map(|i| secret(&format!("ns{i}"), &format!("r{i}"), objects)))
}

fn big_deployment(name: &str, replicas: u32) -> serde_json::Value {
    let env: Vec<_> = (0..300)
        .map(|i| json!({"name": format!("VAR_{i}"), "value": format!("value-{i}")}))
        .collect();
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ns1", "labels": {"app.kubernetes.io/name": "app", "app.kubernetes.io/instance": "r1", "app.kubernetes.io/managed-by": "Helm"},
            "annotations": {"meta.helm.sh/release-name": "r1", "meta.helm.sh/release-namespace": "ns1"}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app.kubernetes.io/name": "app", "app.kubernetes.io/instance": "r1"}},
            "template": {"metadata": {"labels": {"app.kubernetes.io/name": "app", "app.kubernetes.io/instance": "r1"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.25", "env": env, "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}, "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}}}})
}

fn review(
    kind: &str,
    group: &str,
    name: &str,
    object: serde_json::Value,
    old: serde_json::Value,
) -> String {
    let api_version = helm_locker_core::api_version(group, "v1");
    let review = helm_locker_core::test_util::review("UPDATE", &api_version, kind, "x")
        .uid("u")
        .name(Some("ns1"), name)
        .user("admin")
        .object(object)
        .old_object(old);
    String::from_utf8(review.body()).unwrap()
}

/// The recorded reviews `scripts/load.sh` sends in its locked runs (by number).
const RECORDED_LOCKED: &[&str] = &[
    "045", "049", "050", "052", "062", "063", "064", "065", "066", "068", "093", "094", "096",
    "108", "109", "113", "114",
];

fn benches(c: &mut Criterion) {
    let index = cluster(1_000, 30);
    let config = Config::default();
    let schema = helm_locker_core::Schema::builtin();

    let unowned = review(
        "ConfigMap",
        "",
        "not-in-any-chart",
        json!({"data": {"a": "b"}}),
        json!({"data": {}}),
    );
    let parsed = parse_review(unowned.as_bytes()).unwrap();
    let mut group = c.benchmark_group("decide");
    group.throughput(Throughput::Elements(1));
    group.bench_function("unowned object", |b| {
        b.iter(|| {
            decide(
                black_box(&index),
                &schema,
                &config,
                black_box(&parsed.request),
            )
            .unwrap()
        })
    });

    let locked = review(
        "Deployment",
        "apps",
        "r1-web-1",
        big_deployment("r1-web-1", 7),
        big_deployment("r1-web-1", 3),
    );
    println!(
        "locked Deployment review: {} bytes (object and oldObject)",
        locked.len()
    );
    let parsed_locked = parse_review(locked.as_bytes()).unwrap();
    assert!(!decide(&index, &schema, &config, &parsed_locked.request)
        .unwrap()
        .is_allowed());
    group.bench_function("locked 20 KB Deployment", |b| {
        b.iter(|| {
            decide(
                black_box(&index),
                &schema,
                &config,
                black_box(&parsed_locked.request),
            )
            .unwrap()
        })
    });
    // What the learning recorder adds to a warned or denied write (the decide above): one
    // observation of a realistic key, the entry already there (a writer that retries, a
    // controller that keeps trying) and new (the first write of its kind since the flush).
    let paths = ["/spec/replicas", "/spec/template/spec/containers/0/image"];
    let observation = helm_locker_core::LearningObservation {
        writer: "system:serviceaccount:ops:shop-autoscaler",
        field_manager: Some("kube-controller-manager"),
        operation: "UPDATE",
        subresource: Some("scale"),
        release_namespace: "shop",
        release_name: "shop",
        group: "apps",
        kind: "Deployment",
        object: "shop-web-0",
        paths: &paths,
        delete: false,
        from_pod: true,
        decision: "warn",
    };
    let mut learning = helm_locker_core::Learning::new();
    learning.observe(&observation, 0);
    group.bench_function(
        "learn: observe a would-be denial, 2 paths, entries there",
        |b| {
            let mut now = 0;
            b.iter(|| {
                now += 1;
                learning.observe(black_box(&observation), now);
            })
        },
    );
    let writers: Vec<String> = (0..100)
        .map(|i| format!("system:serviceaccount:ops:w{i}"))
        .collect();
    group.bench_function(
        "learn: observe a would-be denial, 2 paths, new entries (100, then flushed)",
        |b| {
            let mut learning = helm_locker_core::Learning::new();
            let mut i = 0;
            b.iter(|| {
                i += 1;
                if i % writers.len() == 0 {
                    black_box(learning.take_dirty());
                }
                let observation = helm_locker_core::LearningObservation {
                    writer: &writers[i % writers.len()],
                    ..observation
                };
                learning.observe(black_box(&observation), i as i64);
            })
        },
    );
    // The everyday locked write: a controller's update that changes no chart field (a status
    // and an annotation of its own), allowed.
    let mut updated = big_deployment("r1-web-1", 3);
    updated["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = json!("2");
    updated["status"] = json!({"replicas": 3, "readyReplicas": 3, "observedGeneration": 2});
    let mut current = big_deployment("r1-web-1", 3);
    current["status"] = json!({"replicas": 3, "readyReplicas": 2, "observedGeneration": 1});
    let unchanged = review("Deployment", "apps", "r1-web-1", updated, current);
    let parsed_unchanged = parse_review(unchanged.as_bytes()).unwrap();
    assert!(decide(&index, &schema, &config, &parsed_unchanged.request)
        .unwrap()
        .is_allowed());
    group.bench_function("locked 20 KB Deployment, no chart field changed", |b| {
        b.iter(|| {
            decide(
                black_box(&index),
                &schema,
                &config,
                black_box(&parsed_unchanged.request),
            )
            .unwrap()
        })
    });
    // The recorded writes to locked objects that change no chart field (what
    // scripts/load.sh's locked runs send), decided against the release they were recorded with.
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/cluster-capture");
    let recorded_index = Index::from_secrets(
        helm_locker_core::parse_release_file(
            &std::fs::read_to_string(root.join("releases/02-after-upgrade.json")).unwrap(),
        )
        .unwrap()
        .into_iter()
        .filter_map(Result::ok),
    );
    let recorded_bodies: Vec<String> = RECORDED_LOCKED
        .iter()
        .map(|n| {
            let dir = root.join("reviews");
            let file = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(n))
                .unwrap();
            std::fs::read_to_string(file).unwrap()
        })
        .collect();
    let recorded: Vec<_> = recorded_bodies
        .iter()
        .map(|body| parse_review(body.as_bytes()).unwrap())
        .collect();
    for review in &recorded {
        assert!(decide(&recorded_index, &schema, &config, &review.request)
            .unwrap()
            .is_allowed());
    }
    group.throughput(Throughput::Elements(recorded.len() as u64));
    group.bench_function(
        "17 recorded locked writes that change no chart field",
        |b| {
            b.iter(|| {
                for review in &recorded {
                    black_box(decide(&recorded_index, &schema, &config, &review.request).unwrap());
                }
            })
        },
    );
    // What the server does for each of them, from the body as the API server sends it (keys in
    // Go's field order): the head, the full parse, the decision.
    let go_ordered: Vec<String> = recorded_bodies
        .iter()
        .map(|b| helm_locker_core::test_util::go_order(b))
        .collect();
    group.bench_function(
        "server path: 17 recorded locked writes, head + parse + decide",
        |b| {
            b.iter(|| {
                for body in &go_ordered {
                    let body = black_box(body.as_bytes());
                    let head = helm_locker_core::read_head(body).unwrap();
                    let found = find(&recorded_index, &schema, &head.review.request);
                    assert!(found
                        .answer(&recorded_index, &head.review.request)
                        .is_none());
                    let review = head.rest().unwrap();
                    black_box(
                        decide_found(&recorded_index, &schema, &config, &review.request, found)
                            .unwrap(),
                    );
                }
            })
        },
    );
    // The fast path as the load mix meets it: every recorded review the head answers (writes
    // to objects no release owns), from the body in Go's key order.
    let answered_by_head: Vec<String> = std::fs::read_dir(root.join("reviews"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .map(|b| helm_locker_core::test_util::go_order(&b))
        .filter(|body| {
            helm_locker_core::read_head(body.as_bytes()).is_some_and(|head| {
                find(&recorded_index, &schema, &head.review.request)
                    .answer(&recorded_index, &head.review.request)
                    .is_some()
            })
        })
        .collect();
    group.throughput(Throughput::Elements(answered_by_head.len() as u64));
    group.bench_function(
        format!(
            "server path: {} recorded unowned writes, head + find + answer",
            answered_by_head.len()
        ),
        |b| {
            b.iter(|| {
                for body in &answered_by_head {
                    let head = helm_locker_core::read_head(black_box(body.as_bytes())).unwrap();
                    let request = &head.review.request;
                    black_box(
                        find(&recorded_index, &schema, request).answer(&recorded_index, request),
                    );
                }
            })
        },
    );
    group.bench_function(
        format!(
            "server path: {} recorded unowned writes, head only",
            answered_by_head.len()
        ),
        |b| {
            b.iter(|| {
                for body in &answered_by_head {
                    black_box(helm_locker_core::read_head(black_box(body.as_bytes())));
                }
            })
        },
    );
    group.throughput(Throughput::Elements(RECORDED_LOCKED.len() as u64));
    group.bench_function("server path: the heads of the 17", |b| {
        b.iter(|| {
            for body in &go_ordered {
                black_box(helm_locker_core::parse_head(black_box(body.as_bytes())));
            }
        })
    });
    group.bench_function("server path: the 17 parsed whole", |b| {
        b.iter(|| {
            for body in &go_ordered {
                black_box(parse_review(black_box(body.as_bytes())).unwrap());
            }
        })
    });
    group.throughput(Throughput::Elements(1));
    group.bench_function("parse review + unowned", |b| {
        b.iter(|| {
            let r = parse_review(black_box(unowned.as_bytes())).unwrap();
            decide(&index, &schema, &config, &r.request)
                .unwrap()
                .is_allowed()
        })
    });
    group.finish();

    let big_release = secret("ns5", "r5", 200);
    let mut group = c.benchmark_group("index");
    let text = big_release.release.manifest.clone();
    group.bench_function("parse the manifest of 200 objects (YAML only)", |b| {
        b.iter(|| helm_locker_core::parse_manifest(black_box(&text)))
    });
    group.bench_function("re-index one release of 200 objects", |b| {
        b.iter_batched(
            || index.clone(),
            |mut idx| idx.upsert(big_release.clone()),
            criterion::BatchSize::SmallInput,
        )
    });
    // A write to an object that no recent write touched unpacks its chart content, which the
    // index keeps compressed (zstd against a preset dictionary): a typical 0.6 kB Deployment,
    // and the 20 kB one of the locked-write benches.
    let first_object = |index: &Index| {
        index
            .releases()
            .iter()
            .find_map(|r| r.objects.iter().flatten().next().cloned())
            .expect("an object")
    };
    let typical = first_object(&Index::from_secrets([secret("ns8", "r8", 1)]));
    group.bench_function(
        "unpack a cold object's chart content, 0.6 kB Deployment",
        |b| b.iter(|| black_box(&typical).content()),
    );
    let big_manifest = format!(
        "---\n# Source: app/templates/big.yaml\n{}\n",
        big_deployment("r9-web", 3)
    );
    let big = first_object(&Index::from_secrets([
        helm_locker_core::test_util::release_secret(
            "ns9",
            "r9",
            1,
            Status::Deployed,
            &big_manifest,
        ),
    ]));
    group.bench_function(
        "unpack a cold object's chart content, 20 kB Deployment",
        |b| b.iter(|| black_box(&big).content()),
    );
    group.finish();

    // Admission latency against the size of the cluster: the head-only fast path for an object
    // no release owns (the review in the API server's key order, as it sends it), and a full
    // decision for a write to a locked Deployment of release r0 (present at every size).
    let deployment = big_deployment("r0-web-1", 3);
    let unowned_go = format!(
        r#"{{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{{"uid":"u","kind":{{"group":"","version":"v1","kind":"ConfigMap"}},"resource":{{"group":"","version":"v1","resource":"configmaps"}},"name":"not-in-any-chart","namespace":"ns0","operation":"UPDATE","userInfo":{{"username":"admin"}},"object":{deployment},"oldObject":{deployment}}}}}"#
    );
    let mut labelled = deployment.clone();
    labelled["metadata"]["labels"]["team"] = json!("payments");
    let locked_go = format!(
        r#"{{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{{"uid":"u","kind":{{"group":"apps","version":"v1","kind":"Deployment"}},"resource":{{"group":"apps","version":"v1","resource":"deployments"}},"name":"r0-web-1","namespace":"ns0","operation":"UPDATE","userInfo":{{"username":"admin"}},"object":{labelled},"oldObject":{deployment}}}}}"#
    );
    // The first locked write to an object since start (or since its content left the thread's
    // recent ones): each review of the 64 reaches another release's object, so the thread's
    // 32 recent contents and its last manifest text never hold it: the content is read from
    // the release's manifest frame and parsed.
    let first_writes: Vec<String> = (0..64)
        .map(|i| {
            locked_go
                .replace("\"r0-web-1\"", &format!("\"r{i}-web-1\""))
                .replace("\"namespace\":\"ns0\"", &format!("\"namespace\":\"ns{i}\""))
        })
        .collect();
    let mut group = c.benchmark_group("scale");
    for releases in [1, 1_000, 10_000] {
        let index = cluster(releases, 30);
        if releases >= 64 {
            let mut next = 0;
            group.bench_function(
                format!("parse + first locked write to its object, {releases} releases x 30"),
                |b| {
                    b.iter(|| {
                        next = (next + 1) % first_writes.len();
                        let r = parse_review(black_box(first_writes[next].as_bytes())).unwrap();
                        decide(&index, &schema, &config, &r.request)
                            .unwrap()
                            .is_allowed()
                    })
                },
            );
        }
        group.bench_function(format!("head + unowned, {releases} releases x 30"), |b| {
            b.iter(|| {
                let head = helm_locker_core::parse_head(black_box(unowned_go.as_bytes())).unwrap();
                decide(&index, &schema, &config, &head.request)
                    .unwrap()
                    .is_allowed()
            })
        });
        group.bench_function(
            format!("parse + locked write, {releases} releases x 30"),
            |b| {
                b.iter(|| {
                    let r = parse_review(black_box(locked_go.as_bytes())).unwrap();
                    decide(&index, &schema, &config, &r.request)
                        .unwrap()
                        .is_allowed()
                })
            },
        );
    }
    group.finish();

    let manifest_bytes: usize = (0..1_000)
        .map(|i| manifest(&format!("r{i}"), 30).len())
        .sum();
    let tree_bytes = helm_locker_core::test_util::packed_tree_bytes(&index);
    println!("manifests: {manifest_bytes} bytes decompressed; chart trees in the index: {tree_bytes} bytes ({:.2}x)", tree_bytes as f64 / manifest_bytes as f64);
}

/// What the author stamp adds to reading a release Secret (docs/performance.md).
fn author_benches(c: &mut Criterion) {
    use helm_locker_core::{
        authorship, release_secret_from_parts, stamp_annotations, Author, AuthorKey, SecretRef,
        Stamping, StoredSecret,
    };
    let release = helm_locker_core::test_util::release_json(
        "team",
        "ops",
        1,
        Status::Deployed,
        &manifest("ops", 30),
    );
    let payload = helm_locker_core::test_util::helm_payload(&release).into_bytes();
    let reference = SecretRef::secret("team", "sh.helm.release.v1.ops.v1");
    let key = AuthorKey::new(&[7u8; 32]).unwrap();
    let author = Author {
        username: "system:serviceaccount:ci:deployer".into(),
        groups: vec![
            "system:serviceaccounts".into(),
            "system:authenticated".into(),
        ],
        ..Author::default()
    };
    let annotations: std::collections::BTreeMap<String, String> = stamp_annotations(
        &key,
        ReleaseDriver::Secret,
        "team",
        &reference.name,
        &author,
        1_800_000_000,
        &payload,
    )
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let stamping = Stamping::new(key);
    let mut group = c.benchmark_group("release Secret read");
    group.throughput(Throughput::Bytes(payload.len() as u64));
    group.bench_function("decoded", |b| {
        b.iter(|| {
            release_secret_from_parts(reference.clone(), Default::default(), black_box(&payload))
                .unwrap()
        })
    });
    group.bench_function("decoded, author verified", |b| {
        b.iter(|| {
            let mut secret = release_secret_from_parts(
                reference.clone(),
                Default::default(),
                black_box(&payload),
            )
            .unwrap();
            secret.author = authorship(
                &stamping,
                StoredSecret {
                    driver: ReleaseDriver::Secret,
                    namespace: "team",
                    name: &reference.name,
                    annotations: Some(&annotations),
                    resource_version: Some("500"),
                    created: Some(1_800_000_000),
                    release: &payload,
                },
            );
            secret
        })
    });
    group.finish();

    // The author webhook (POST /stamp) on the same release, with a test hook: a CREATE is
    // stamped with its writer; an UPDATE by someone else (helm test's rewrite) decodes both
    // payloads to compare their content; one by the stored revision's own author (Helm
    // finishing or superseding its revision) decodes nothing.
    let mut base = release.clone();
    base["hooks"] = json!([{"name": "t", "kind": "ConfigMap", "manifest": "kind: ConfigMap"}]);
    let mut tested = base.clone();
    tested["hooks"][0]["last_run"] = json!({"phase": "Succeeded"});
    let base = helm_locker_core::test_util::helm_payload(&base).into_bytes();
    let tested = helm_locker_core::test_util::helm_payload(&tested).into_bytes();
    let secret =
        |payload: &[u8], annotations: Option<&std::collections::BTreeMap<String, String>>| {
            use base64::Engine as _;
            json!({
                "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                "metadata": {"name": reference.name, "namespace": "team",
                             "creationTimestamp": "2027-01-15T08:00:00Z", "annotations": annotations},
                "data": {"release": base64::engine::general_purpose::STANDARD.encode(payload)},
            })
        };
    let review = |old: serde_json::Value, user: &str| {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "namespace": "team", "name": reference.name,
                        "operation": if old.is_null() { "CREATE" } else { "UPDATE" },
                        "userInfo": {"username": user}, "object": secret(&tested, None), "oldObject": old},
        }))
        .unwrap()
    };
    let by = |user: &str| {
        let author = Author {
            username: user.into(),
            ..Author::default()
        };
        stamp_annotations(
            &stamping.key,
            ReleaseDriver::Secret,
            "team",
            &reference.name,
            &author,
            1_800_000_000,
            &base,
        )
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect::<std::collections::BTreeMap<_, _>>()
    };
    let create = review(serde_json::Value::Null, "admin");
    let (alices, admins) = (by("alice"), by("admin"));
    let rewrite = review(secret(&base, Some(&alices)), "admin");
    let own = review(secret(&base, Some(&admins)), "admin");
    let mut group = c.benchmark_group("author webhook");
    for (name, body) in [
        ("CREATE", &create),
        ("UPDATE by another writer", &rewrite),
        ("UPDATE by its author", &own),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                helm_locker_core::stamp_review(&stamping.key, black_box(body), 1_800_000_100)
                    .unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(core, benches, author_benches);
criterion_main!(core);
