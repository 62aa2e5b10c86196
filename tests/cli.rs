//! The offline commands, run as a user runs them.

use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_helm-locker");

fn fixture(path: &str) -> String {
    format!(
        "{}/tests/fixtures/cluster-capture/{path}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn review_denies_the_recorded_kubectl_patch_with_the_releases_message() {
    let out = Command::new(BIN)
        .args([
            "review",
            "--releases",
            &fixture("releases/02-after-upgrade.json"),
            &fixture("reviews/075-kubectl-patch-update-deployment-shop-web.json"),
            "--explain",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let response: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(response["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(response["kind"], "AdmissionReview");
    assert_eq!(
        response["response"]["uid"],
        "bcf08ace-cb5b-42c3-8fac-8dc8a080c31d"
    );
    assert_eq!(response["response"]["allowed"], false);
    assert_eq!(response["response"]["status"]["code"], 403);
    assert_eq!(response["response"]["status"]["reason"], "Forbidden");
    let message = response["response"]["status"]["message"].as_str().unwrap();
    for part in [
        "Helm release shop/shop",
        "/spec/replicas",
        "is 3 in the chart",
        "this request sets 7",
        // Traced in the chart stored in the release Secret, as the server does.
        "In the chart: /spec/replicas comes from values replicas.",
        "helm upgrade shop <shop chart> -n shop --reuse-values --set replicas=7",
    ] {
        assert!(message.contains(part), "{message}");
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Which schema decided is said first; the explanation follows.
    assert!(
        stderr.starts_with("helm-locker: the embedded schema of Kubernetes 1.36"),
        "{stderr}"
    );
    let explained = stderr.lines().nth(1).unwrap_or_default();
    assert!(explained.starts_with("denied: "), "{explained}");
    assert!(explained.contains("--set replicas=7"), "{explained}");
}

#[test]
fn review_in_repair_mode_prints_a_base64_json_patch() {
    let out = Command::new(BIN)
        .args([
            "review",
            "--mode",
            "repair",
            "--releases",
            &fixture("releases/02-after-upgrade.json"),
            &fixture("reviews/075-kubectl-patch-update-deployment-shop-web.json"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let response: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(response["response"]["allowed"], true);
    assert_eq!(response["response"]["patchType"], "JSONPatch");
    let patch = response["response"]["patch"]
        .as_str()
        .expect("the patch is a string, not a byte array");
    use base64::Engine;
    let patch: Value = serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(patch)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        patch,
        serde_json::json!([{"op": "replace", "path": "/spec/replicas", "value": 3}])
    );
}

#[test]
fn review_allows_an_unrelated_object_and_fails_only_on_unusable_input() {
    let out = Command::new(BIN)
        .args([
            "review",
            "--releases",
            &fixture("releases/02-after-upgrade.json"),
            &fixture("reviews/103-kubectl-create-unrelated-create-configmap-unrelated.json"),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let response: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(response["response"]["allowed"], true);

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"kind\": \"Pod\"}").unwrap();
    let out = Command::new(BIN)
        .args([
            "review",
            "--releases",
            &fixture("releases"),
            bad.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an AdmissionReview"));
}

#[test]
fn inspect_json_lists_releases_and_their_locked_objects() {
    let out = Command::new(BIN)
        .args([
            "inspect",
            "-o",
            "json",
            &fixture("releases/02-after-upgrade.json"),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let release = &json["releases"][0];
    assert_eq!(
        (release["name"].as_str(), release["namespace"].as_str()),
        (Some("shop"), Some("shop"))
    );
    assert_eq!(release["revision"], 2);
    assert_eq!(release["status"], "deployed");
    let objects = release["objects"].as_array().unwrap();
    assert_eq!(
        objects.len(),
        6,
        "hooks are not locked objects: {objects:?}"
    );
    // Each object with the template that renders it and the values its fields read, from the
    // chart stored in the release Secret.
    // A cluster-scoped object lies outside the release's namespace (a CREATE of it is locked
    // only when it names the release, README "Trust boundary").
    assert!(objects.contains(&serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "namespace": null, "name": "shop-reader", "template": "shop/templates/app.yaml", "values": [], "outsideReleaseNamespace": true})));
    assert!(objects.contains(&serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "shop-web", "template": "shop/templates/app.yaml", "values": ["replicas", "image", "cpu"], "outsideReleaseNamespace": false})));
    assert!(!objects.iter().any(|o| o["name"] == "shop-hook"));
}

#[test]
fn inspect_reads_standard_input_and_reports_corrupt_secrets_by_name_only() {
    let dir = tempfile::tempdir().unwrap();
    let corrupt = dir.path().join("corrupt.yaml");
    std::fs::write(&corrupt, "apiVersion: v1\nkind: Secret\ntype: helm.sh/release.v1\nmetadata: {name: sh.helm.release.v1.x.v1, namespace: ns}\ndata:\n  release: c2VjcmV0LXZhbHVlLWh1bnRlcjI=\n").unwrap();
    let out = Command::new(BIN)
        .args(["inspect", "-", corrupt.to_str().unwrap()])
        .stdin(std::fs::File::open(fixture("releases/01-after-install.json")).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("shop/shop revision 1 deployed chart shop-1.0.0 (locked)"),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Secret ns/sh.helm.release.v1.x.v1") && stderr.contains("not base64"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("hunter2") && !stderr.contains("c2VjcmV0"),
        "{stderr}"
    );
}

#[test]
fn owned_fields_matches_helms_managed_fields_and_reports_a_difference() {
    let dir = tempfile::tempdir().unwrap();
    // The live Deployment and Service as Helm created them (the recorded CREATE reviews).
    let live = |review: &str| -> Value {
        let text = std::fs::read_to_string(fixture(&format!("reviews/{review}"))).unwrap();
        let review: Value = serde_json::from_str(&text).unwrap();
        review["request"]["object"].clone()
    };
    let deployment = live("051-helm-install-create-deployment-shop-web.json");
    let service = live("050-helm-install-create-service-shop-svc.json");
    let list =
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [deployment, service]});
    let objects = dir.path().join("live.json");
    std::fs::write(&objects, list.to_string()).unwrap();
    let run = |objects: &std::path::Path| {
        Command::new(BIN)
            // Recorded on Kubernetes 1.20: compared with 1.20's schema.
            .args([
                "owned-fields",
                "--kube-version",
                "1.20",
                "--releases",
                &fixture("releases/01-after-install.json"),
            ])
            .arg(objects)
            .output()
            .unwrap()
    };
    let out = run(&objects);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for line in &lines {
        assert_eq!(line["manager"], "python", "{line}");
        assert_eq!(line["missing"], serde_json::json!([]), "{line}");
        assert_eq!(line["extra"], serde_json::json!([]), "{line}");
    }
    // Helm's entry claiming one more field than the chart sets: reported, exit status 1.
    let mut changed =
        deployment_with_extra_owned_field(live("051-helm-install-create-deployment-shop-web.json"));
    changed["kind"] = "Deployment".into();
    let single = dir.path().join("one.json");
    std::fs::write(&single, changed.to_string()).unwrap();
    let out = run(&single);
    assert_eq!(out.status.code(), Some(1));
    let line: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["missing"], serde_json::json!(["f:spec.f:paused"]));
}

fn deployment_with_extra_owned_field(mut deployment: Value) -> Value {
    let fields = &mut deployment["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"];
    fields["f:paused"] = serde_json::json!({});
    deployment
}

/// `review --crd`: a custom resource's `scale` is decided as the server decides it, the CRD
/// saying which kind the resource is (an irregular plural) and which field `scale` writes.
#[test]
fn review_reads_crds_for_a_custom_resources_scale() {
    use helm_locker_core::test_util::{release_json, release_secret_json};
    let dir = tempfile::tempdir().unwrap();
    let manifest =
        "apiVersion: zoo.example.com/v1\nkind: Mouse\nmetadata: {name: m}\nspec: {size: 2}\n";
    let release = release_json(
        "zoo",
        "zoo",
        1,
        helm_locker::core::Status::Deployed,
        manifest,
    );
    let releases = dir.path().join("releases.json");
    std::fs::write(&releases, release_secret_json(&release).to_string()).unwrap();
    let crd = dir.path().join("crd.yaml");
    std::fs::write(
        &crd,
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: mice.zoo.example.com}\nspec:\n  group: zoo.example.com\n  names: {plural: mice, kind: Mouse}\n  versions:\n  - name: v1\n    subresources:\n      scale: {specReplicasPath: .spec.size, statusReplicasPath: .status.size}\n",
    )
    .unwrap();
    let scale = |r: i64| serde_json::json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "m", "namespace": "zoo"}, "spec": {"replicas": r}});
    let review =
        helm_locker_core::test_util::review("UPDATE", "zoo.example.com/v1", "Scale", "mice")
            .kind("autoscaling/v1", "Scale")
            .sub_resource("scale")
            .uid("u")
            .name(Some("zoo"), "m")
            .user("alice")
            .object(scale(9))
            .old_object(scale(2));
    let body = dir.path().join("review.json");
    std::fs::write(&body, review.body()).unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "review",
            "--releases",
            releases.to_str().unwrap(),
            body.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    // Without the CRD, nothing says that `mice` are Mice: not found, allowed.
    assert_eq!(run(&[])["response"]["allowed"], true);
    let denied = run(&["--crd", crd.to_str().unwrap()]);
    assert_eq!(denied["response"]["allowed"], false);
    let message = denied["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("/spec/size is 2 in the chart, this request sets 9"),
        "{message}"
    );
}

/// `review` reads a CRD's schema as the API server does: a listener added to a chart's Gateway
/// is merged into a list keyed by `name`, not a change of an atomic list. The CRD comes from a
/// `--crd` folder, or from the chart's own `crds/` folder kept in the release.
#[test]
fn review_reads_crd_schemas_from_a_folder_or_the_charts_crds() {
    use base64::Engine;
    use helm_locker_core::test_util::{release_json, release_secret_json};
    let dir = tempfile::tempdir().unwrap();
    let manifest = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw}\nspec:\n  gatewayClassName: eg\n  listeners:\n  - {name: http, port: 80, protocol: HTTP}\n";
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gateways.gateway.networking.k8s.io}\nspec:\n  group: gateway.networking.k8s.io\n  names: {plural: gateways, kind: Gateway}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            properties:\n              gatewayClassName: {type: string}\n              listeners:\n                type: array\n                x-kubernetes-list-type: map\n                x-kubernetes-list-map-keys: [name]\n                items:\n                  type: object\n                  properties:\n                    name: {type: string}\n                    port: {type: integer}\n                    protocol: {type: string}\n";
    let release = release_json(
        "edge",
        "edge",
        1,
        helm_locker::core::Status::Deployed,
        manifest,
    );
    let plain = dir.path().join("plain.json");
    std::fs::write(&plain, release_secret_json(&release).to_string()).unwrap();
    let mut with_crds = release.clone();
    with_crds["chart"]["files"] = serde_json::json!([{"name": "crds/gateways.yaml",
        "data": base64::engine::general_purpose::STANDARD.encode(crd)}]);
    let charted = dir.path().join("charted.json");
    std::fs::write(&charted, release_secret_json(&with_crds).to_string()).unwrap();
    let crds = dir.path().join("crds");
    std::fs::create_dir_all(crds.join("gateway-api")).unwrap();
    std::fs::write(crds.join("gateway-api").join("gateways.yaml"), crd).unwrap();
    let gateway = |listeners: Value| {
        serde_json::json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "edge",
                     "annotations": {"meta.helm.sh/release-name": "edge", "meta.helm.sh/release-namespace": "edge"},
                     "labels": {"app.kubernetes.io/managed-by": "Helm"}},
        "spec": {"gatewayClassName": "eg", "listeners": listeners}})
    };
    let http = serde_json::json!({"name": "http", "port": 80, "protocol": "HTTP"});
    let https = serde_json::json!({"name": "https", "port": 443, "protocol": "HTTPS"});
    let review = helm_locker_core::test_util::review(
        "UPDATE",
        "gateway.networking.k8s.io/v1",
        "Gateway",
        "gateways",
    )
    .uid("u")
    .name(Some("edge"), "gw")
    .user("alice")
    .object(gateway(serde_json::json!([http.clone(), https])))
    .old_object(gateway(serde_json::json!([http])));
    let body = dir.path().join("review.json");
    std::fs::write(&body, review.body()).unwrap();
    let allowed = |releases: &std::path::Path, extra: &[&str]| {
        let mut args = vec![
            "review",
            "--releases",
            releases.to_str().unwrap(),
            body.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["response"]["allowed"].clone()
    };
    // Without a CRD the kind is unknown and its lists atomic: the added listener is a change.
    assert_eq!(allowed(&plain, &[]), false);
    assert_eq!(allowed(&plain, &["--crd", crds.to_str().unwrap()]), true);
    assert_eq!(allowed(&charted, &[]), true);
}
