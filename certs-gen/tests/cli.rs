use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_certs-gen");

#[test]
fn generates_service_certificates_and_checks_their_expiry() {
    let dir = std::env::temp_dir().join(format!("certs-gen-test-{}", std::process::id()));
    let out = Command::new(BIN)
        .args([
            "--service",
            "hl",
            "--namespace",
            "ops",
            "--ip",
            "127.0.0.1",
            "--days",
            "20",
            "--secret",
            "hl-tls",
            "--out",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("hl.ops.svc.cluster.local"));
    for file in [
        "ca.crt",
        "tls.crt",
        "tls.key",
        "ca-bundle.b64",
        "secret.yaml",
        "webhook-configuration.yaml",
    ] {
        assert!(dir.join(file).exists(), "{file}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(dir.join("tls.key"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o600
        );
    }
    let secret = std::fs::read_to_string(dir.join("secret.yaml")).unwrap();
    assert!(secret.contains("type: kubernetes.io/tls") && secret.contains("namespace: ops"));
    // The CA is fine for years; the 20-day leaf is within the 30-day warning.
    let ca = Command::new(BIN)
        .arg("--check")
        .arg(dir.join("ca.crt"))
        .output()
        .unwrap();
    assert!(
        ca.status.success(),
        "{}",
        String::from_utf8_lossy(&ca.stdout)
    );
    let leaf = Command::new(BIN)
        .arg("--check")
        .arg(dir.join("tls.crt"))
        .output()
        .unwrap();
    assert_eq!(leaf.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&leaf.stdout).contains("CN=hl.ops.svc: expires"),
        "{}",
        String::from_utf8_lossy(&leaf.stdout)
    );
    assert!(String::from_utf8_lossy(&leaf.stdout).contains("expires soon"));
    let bad = Command::new(BIN)
        .arg("--check")
        .arg(dir.join("tls.key"))
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--kube-version` 1.28 or newer: webhook-configuration.yaml gives every webhook the shipped
/// matchConditions, and says so; an unreadable version is refused before anything is written.
#[test]
fn a_1_28_cluster_gets_the_match_conditions() {
    let dir = std::env::temp_dir().join(format!("certs-gen-mc-{}", std::process::id()));
    let out = Command::new(BIN)
        .args(["--kube-version", "v1.30.2", "--repair", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("matchConditions for Kubernetes 1.30"));
    let yaml = std::fs::read_to_string(dir.join("webhook-configuration.yaml")).unwrap();
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    let shipped = certs_gen::match_conditions().unwrap();
    let webhooks: Vec<_> = docs
        .iter()
        .flat_map(|d| d["webhooks"].as_array().unwrap().iter())
        .collect();
    assert_eq!(webhooks.len(), 4);
    let (author, locking): (Vec<&serde_json::Value>, Vec<&serde_json::Value>) = webhooks
        .iter()
        .copied()
        .partition(|w| w["name"] == "author.helm-locker.io");
    assert!(locking.iter().all(|w| w["matchConditions"] == shipped));
    // Every release Secret write must reach the author webhook.
    assert_eq!(author.len(), 1);
    assert!(author[0].get("matchConditions").is_none());
    std::fs::remove_dir_all(&dir).unwrap();

    let bad = Command::new(BIN)
        .args(["--kube-version", "banana", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a Kubernetes version"));
    assert!(!dir.exists());
}
