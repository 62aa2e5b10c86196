//! Writes a synthetic cluster's Helm release Secrets for scale benchmarks, encoded exactly as
//! Helm 3/4 stores them (release JSON, gzip, base64, then the Secret's own base64 of
//! `data.release`), as a `List` that `helm-locker serve --releases-dir` reads. Also writes the
//! AdmissionReviews scripts/scale.sh sends (for objects of release `app-0`, present at every
//! size). Prints the total size of the manifests, decompressed.
//!
//!   cargo run --release --example synth_releases -- DIR RELEASES [OBJECTS_PER_RELEASE]

use serde_json::{json, Value};

fn release_secret(rel: &str, ns: &str, objects: usize, manifest_bytes: &mut usize) -> Value {
    let manifest = helm_locker_core::test_util::synthetic_manifest(rel, objects);
    *manifest_bytes += manifest.len();
    let release = json!({
        "name": rel, "namespace": ns, "version": 1,
        "info": {"status": "deployed", "description": "Install complete",
                 "first_deployed": "2026-11-01T10:00:00Z", "last_deployed": "2026-11-01T10:00:00Z"},
        "chart": {"metadata": {"name": rel, "version": "1.0.0", "apiVersion": "v2"},
                  "values": {"replicaCount": 2, "image": {"repository": "registry.example.com/app", "tag": "1.0.3"}}},
        "config": {"replicaCount": 2},
        "manifest": manifest,
    });
    helm_locker_core::test_util::release_secret_json(&release)
}

/// An AdmissionReview (v1) of an UPDATE from `old` to `object` by `user`.
fn review(uid: &str, object: Value, old: Value, user: &str, manager: &str) -> Value {
    let (group, version) = match object["apiVersion"]
        .as_str()
        .unwrap_or("v1")
        .split_once('/')
    {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (
            String::new(),
            object["apiVersion"].as_str().unwrap_or("v1").to_string(),
        ),
    };
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let resource = format!("{}s", kind.to_lowercase());
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "requestResource": {"group": group, "version": version, "resource": resource},
            "name": object["metadata"]["name"], "namespace": object["metadata"]["namespace"],
            "operation": "UPDATE",
            "userInfo": {"username": user, "groups": ["system:authenticated"]},
            "object": object, "oldObject": old,
            "dryRun": false,
            "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": manager}
        }
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, releases, objects) = match args.as_slice() {
        [_, dir, n] => (dir, n.parse::<usize>().expect("RELEASES"), 30),
        [_, dir, n, m] => (
            dir,
            n.parse().expect("RELEASES"),
            m.parse().expect("OBJECTS"),
        ),
        _ => {
            eprintln!("usage: synth_releases DIR RELEASES [OBJECTS_PER_RELEASE]");
            std::process::exit(2);
        }
    };
    let dir = std::path::Path::new(dir);
    std::fs::create_dir_all(dir.join("releases")).expect("create DIR/releases");
    let mut manifest_bytes = 0;
    let items: Vec<Value> = (0..releases)
        .map(|i| {
            release_secret(
                &format!("app-{i}"),
                &format!("team-{}", i % 100),
                objects,
                &mut manifest_bytes,
            )
        })
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(dir.join("releases/releases.json"), list.to_string()).expect("write releases");

    // Reviews for release app-0 (namespace team-0): a controller-style write that changes no
    // chart field (allowed after the full comparison), and a user's change (denied).
    let mut configmap: Value =
        serde_saphyr::from_str(&helm_locker_core::test_util::synthetic_object("app-0", 1).1)
            .expect("the template");
    configmap["metadata"]["namespace"] = json!("team-0");
    configmap["metadata"]["annotations"] =
        json!({"meta.helm.sh/release-name": "app-0", "meta.helm.sh/release-namespace": "team-0"});
    let mut seen = configmap.clone();
    seen["metadata"]["annotations"]["controller/seen"] = json!("true");
    let allowed = review(
        "00000000-0000-0000-0000-000000000001",
        seen,
        configmap.clone(),
        "system:serviceaccount:tools:labeler",
        "labeler",
    );
    let mut edited = configmap.clone();
    edited["data"]["feature-flags"] = json!("a,b");
    let denied = review(
        "00000000-0000-0000-0000-000000000002",
        edited,
        configmap,
        "alice",
        "kubectl-edit",
    );
    std::fs::write(dir.join("review-locked-allowed.json"), allowed.to_string()).expect("write");
    std::fs::write(dir.join("review-denied.json"), denied.to_string()).expect("write");
    println!("{manifest_bytes}");
}
