//! No log line, at any level, carries release or Secret data: `helm-locker serve` runs at
//! `--log trace` (every crate: hyper, h2, rustls, tokio) in text and in JSON format, reads a
//! release whose values, manifest, notes and hooks carry a canary string and release files that
//! do not decode (with the canary in the broken part), and answers allowed, denied and
//! malformed AdmissionReviews whose objects carry it too. Neither the canary, nor its base64,
//! nor a piece of the encoded release payload may appear on stdout or stderr. The lines it
//! reads name their spans: a denial its decision, the folder source its task.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

mod common;

use common::Http;

const BIN: &str = env!("CARGO_BIN_EXE_helm-locker");

/// Unique enough not to occur by chance in any log line.
const CANARY: &str = "qzx7canary";

fn b64(data: impl AsRef<[u8]>) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn release_secret(name: &str, namespace: &str, data_release: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"owner": "helm", "name": "leaky", "status": "deployed"}},
        "data": {"release": data_release},
    })
}

/// The Secret data the chart's own Secret holds, base64 as in a manifest.
fn chart_secret_value() -> String {
    b64(format!("{CANARY}-secret-data"))
}

fn release_json(manifest: &str) -> Value {
    json!({
        "name": "leaky", "namespace": "leak", "version": 1,
        "info": {"status": "deployed", "description": "Install complete",
                 "notes": format!("{CANARY}-notes")},
        "chart": {"metadata": {"name": "leaky", "version": "1.0.0"},
                  "values": {"password": format!("{CANARY}-chart-default")}},
        "config": {"password": format!("{CANARY}-values")},
        "manifest": manifest,
        "hooks": [{"name": "leaky-hook", "kind": "Job",
                   "manifest": format!("apiVersion: batch/v1\nkind: Job\nmetadata: {{name: leaky-hook}}\nspec: {{template: {{spec: {{containers: [{{name: x, image: \"{CANARY}-hook\"}}]}}}}}}\n")}],
        "apply_method": "ssa",
    })
}

fn manifest() -> String {
    format!(
        "---\n# Source: leaky/templates/config.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leaky-config\ndata:\n  token: {CANARY}-configmap\n---\n# Source: leaky/templates/secret.yaml\napiVersion: v1\nkind: Secret\nmetadata:\n  name: leaky-secret\ndata:\n  password: {}\n---\n# Source: leaky/templates/broken.yaml\nkind: [ {CANARY}-broken-document\n",
        chart_secret_value()
    )
}

/// Writes the release folder; returns the encoded payloads that must not be logged.
fn write_releases(dir: &Path) -> Vec<String> {
    let helm_layer = helm_locker_core::test_util::helm_payload(&release_json(&manifest()));
    let data_release = b64(&helm_layer);
    let write = |file: &str, value: &Value| {
        std::fs::write(dir.join(file), serde_json::to_vec_pretty(value).unwrap()).unwrap()
    };
    write(
        "leaky.json",
        &release_secret("sh.helm.release.v1.leaky.v1", "leak", &data_release),
    );
    // Releases that do not decode, each with the canary where it breaks.
    let mut bad_gzip = vec![0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0];
    bad_gzip.extend(format!("{CANARY}-bad-gzip").as_bytes());
    write(
        "bad-gzip.json",
        &release_secret("sh.helm.release.v1.bad.v1", "leak", &b64(b64(&bad_gzip))),
    );
    let bad_json = format!(r#"{{"name":"bad","version":"{CANARY}-bad-json","info":{{}}}}"#);
    write(
        "bad-json.json",
        &release_secret("sh.helm.release.v1.bad.v2", "leak", &b64(b64(&bad_json))),
    );
    let missing = format!(r#"{{"name":"bad","version":3,"manifest":"{CANARY}-no-info"}}"#);
    write(
        "missing-info.json",
        &release_secret("sh.helm.release.v1.bad.v3", "leak", &b64(b64(missing))),
    );
    write(
        "not-base64.json",
        &release_secret(
            "sh.helm.release.v1.bad.v4",
            "leak",
            &format!("{CANARY}-not-base64%%"),
        ),
    );
    std::fs::write(
        dir.join("broken.yaml"),
        format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: broken\ndata:\n  release: [{CANARY}-broken-yaml\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("truncated.json"),
        format!(r#"{{"kind":"Secret","data":{{"release":"{CANARY}-truncated"#),
    )
    .unwrap();
    vec![
        data_release[..48].to_string(),
        helm_layer[..48].to_string(),
        chart_secret_value(),
    ]
}

struct Server {
    child: Child,
    stdout: std::path::PathBuf,
    stderr: std::path::PathBuf,
}

impl Server {
    /// Stops the server, then reads everything it wrote.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.logs()
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap()
            + &std::fs::read_to_string(&self.stderr).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(work: &Path, releases: &Path, format: &str) -> (Server, SocketAddr, SocketAddr) {
    let stdout = work.join(format!("stdout-{format}.log"));
    let stderr = work.join(format!("stderr-{format}.log"));
    let child = Command::new(BIN)
        .args(["serve", "--self-signed", "--self-signed-dir"])
        .arg(work.join(format!("certs-{format}")))
        .arg("--releases-dir")
        .arg(releases)
        .args(["--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"])
        .args([
            "--log",
            "trace",
            "--log-format",
            format,
            "--poll-interval",
            "0.1",
        ])
        .env("RUST_LOG", "trace")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let server = Server {
        child,
        stdout,
        stderr,
    };
    let started = Instant::now();
    loop {
        let logs = server.logs();
        if let Some(line) = logs.lines().find(|l| l.contains("helm-locker serving")) {
            let field = |name: &str| -> SocketAddr {
                let at = line
                    .find(&format!("\"{name}\":\""))
                    .map(|i| i + name.len() + 4);
                let at = at.or_else(|| line.find(&format!(" {name}=")).map(|i| i + name.len() + 2));
                let rest = &line[at.unwrap_or_else(|| panic!("{name} in {line}"))..];
                rest[..rest.find(['"', ' ']).unwrap_or(rest.len())]
                    .parse()
                    .unwrap()
            };
            let (addr, admin) = (field("addr"), field("admin_addr"));
            return (server, addr, admin);
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the server did not start:\n{logs}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

async fn post(
    addr: SocketAddr,
    ca: &[u8],
    http2: bool,
    path: &str,
    body: Vec<u8>,
) -> (u16, String) {
    let http = if http2 { Http::Two } else { Http::One };
    let (status, body) = common::post(addr, ca, http, path, body).await;
    (status, String::from_utf8_lossy(&body).into_owned())
}

async fn get(addr: SocketAddr, path: &str) -> u16 {
    common::get(addr, path).await.0
}

fn review(operation: &str, kind: &str, name: &str, object: Value, old: Value) -> Vec<u8> {
    helm_locker_core::test_util::review(operation, "v1", kind, &format!("{}s", kind.to_lowercase()))
        .uid(&format!("uid-{operation}-{name}"))
        .name(Some("leak"), name)
        .user("mallory")
        .object(object)
        .old_object(old)
        .body()
}

/// What Helm writes on every object it creates: the locker locks only objects that carry it.
fn helm_annotations() -> Value {
    json!({"meta.helm.sh/release-name": "leaky", "meta.helm.sh/release-namespace": "leak"})
}

fn configmap(token: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "leaky-config", "namespace": "leak", "annotations": helm_annotations()},
           "data": {"token": token}})
}

fn secret(name: &str, password: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": name, "namespace": "leak", "annotations": helm_annotations()},
           "data": {"password": password}})
}

/// Sends every kind of request; returns the responses' bodies.
async fn exercise(addr: SocketAddr, admin: SocketAddr, ca: &[u8], releases: &Path) -> Vec<String> {
    let started = Instant::now();
    while get(admin, "/readyz").await != 200 {
        assert!(started.elapsed() < Duration::from_secs(30), "never ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let chart_token = format!("{CANARY}-configmap");
    let requested = format!("{CANARY}-requested");
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        // Denied: a locked ConfigMap field, and a locked Secret field.
        ("/validate", review("UPDATE", "ConfigMap", "leaky-config", configmap(&requested), configmap(&chart_token)), 200),
        ("/validate", review("UPDATE", "Secret", "leaky-secret", secret("leaky-secret", &b64(&requested)), secret("leaky-secret", &chart_secret_value())), 200),
        ("/validate", review("DELETE", "Secret", "leaky-secret", Value::Null, secret("leaky-secret", &chart_secret_value())), 200),
        // Allowed: an object no release owns, and a field the chart does not set.
        ("/validate", review("CREATE", "Secret", "other", secret("other", &b64(&requested)), Value::Null), 200),
        ("/validate", review("UPDATE", "Secret", "leaky-secret", {
            let mut s = secret("leaky-secret", &chart_secret_value());
            s["data"]["extra"] = json!(b64(&requested));
            s
        }, secret("leaky-secret", &chart_secret_value())), 200),
        ("/mutate", review("UPDATE", "ConfigMap", "leaky-config", configmap(&requested), configmap(&chart_token)), 200),
        // Malformed: not JSON, a bad field, an object that is not JSON, an unknown path.
        ("/validate", format!(r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","object":{{"data":"{requested}"#).into_bytes(), 400),
        ("/validate", format!(r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","kind":{{"kind":"Secret"}},"operation":"{requested}"}}}}"#).into_bytes(), 400),
        ("/validate", format!(r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","kind":{{"kind":"Secret"}},"operation":"DELETE","namespace":"leak","oldObject":{{"metadata":{{"name":7}},"data":"{requested}"}}}}}}"#).into_bytes(), 400),
        ("/elsewhere", requested.clone().into_bytes(), 404),
    ];
    let mut bodies = Vec::new();
    for (i, (path, body, status)) in cases.into_iter().enumerate() {
        let (got, reply) = post(addr, ca, i % 2 == 1, path, body).await;
        assert_eq!(got, status, "{path}: {reply}");
        bodies.push(reply);
    }
    // A release file that stops decoding while serving is reported on reload.
    std::fs::write(
        releases.join("later.json"),
        serde_json::to_vec(&release_secret(
            "sh.helm.release.v1.later.v1",
            "leak",
            &b64(b64(format!("{{\"name\":\"{CANARY}-later\""))),
        ))
        .unwrap(),
    )
    .unwrap();
    bodies
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_log_line_carries_release_or_secret_data() {
    for format in ["text", "json"] {
        let work = tempfile::tempdir().unwrap();
        let releases = work.path().join("releases");
        std::fs::create_dir(&releases).unwrap();
        let mut encoded = write_releases(&releases);
        encoded.push(b64(format!("{CANARY}-requested")));
        let (server, addr, admin) = start(work.path(), &releases, format);
        let ca = std::fs::read(work.path().join(format!("certs-{format}/ca.crt"))).unwrap();
        let bodies = exercise(addr, admin, &ca, &releases).await;
        // The ConfigMap denial shows the chart's value to the writer, as designed; the Secret's
        // denial does not.
        assert!(
            bodies[0].contains(&format!("{CANARY}-configmap")),
            "{}",
            bodies[0]
        );
        assert!(bodies[0].contains("\"allowed\":false"), "{}", bodies[0]);
        assert!(bodies[1].contains("\"allowed\":false"), "{}", bodies[1]);
        assert!(!bodies[1].contains(&chart_secret_value()), "{}", bodies[1]);
        assert!(bodies[3].contains("\"allowed\":true"), "{}", bodies[3]);
        // The folder is polled every 0.1 s: wait for the reload (generously, CI is busy).
        let started = Instant::now();
        while !server.logs().contains("later.json") && started.elapsed() < Duration::from_secs(30) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let logs = server.stop();
        // The run logged what it should: trace lines of the libraries, the decode failures by
        // file name, the denials, the malformed requests.
        for expected in [
            "TRACE",
            "bad-gzip.json",
            "bad-json.json",
            "missing-info.json",
            "not-base64.json",
            "broken.yaml",
            "truncated.json",
            "later.json",
            "locked object",
            "leaky-secret",
            "malformed admission review",
        ] {
            let found = if expected == "TRACE" && format == "json" {
                logs.contains("\"level\":\"TRACE\"")
            } else {
                logs.contains(expected)
            };
            assert!(found, "{format} logs lack {expected:?}:\n{logs}");
        }
        // A denial's line carries its admission span's decision and what decided it; the
        // folder source's lines, the span of its task.
        let line = |message: &str| logs.lines().find(|l| l.contains(message)).unwrap_or("");
        let (denial, reload) = (line("locked object"), line("later.json"));
        let (decided, by, task) = if format == "json" {
            (
                r#""reason":"locked""#,
                r#""by":"leak/leaky""#,
                r#""task":"the release folder source""#,
            )
        } else {
            (
                r#"reason="locked""#,
                r#"by="leak/leaky""#,
                r#"task{task="the release folder source"}"#,
            )
        };
        assert!(
            denial.contains(decided) && denial.contains(by),
            "{format}: {denial}"
        );
        assert!(reload.contains(task), "{format}: {reload}");
        for (i, line) in logs.lines().enumerate() {
            assert!(
                !line.contains(CANARY),
                "{format} log line {} carries release or Secret data: {line}",
                i + 1
            );
            for piece in &encoded {
                assert!(
                    !line.contains(piece.as_str()),
                    "{format} log line {} carries the encoded release or Secret: {line}",
                    i + 1
                );
            }
        }
        assert!(logs.lines().count() > 50, "{logs}");
    }
}
