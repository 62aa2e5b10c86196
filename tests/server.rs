//! `helm-locker serve` over real HTTPS on 127.0.0.1 (HTTP/1.1 and HTTP/2), fed the recorded
//! AdmissionReviews of tests/fixtures/cluster-capture.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod common;

use common::Http;
use helm_locker::core::{Config, Mode};
use helm_locker::server::state::HttpSettings;
use helm_locker::server::{BoundServer, Certificate, ReleaseSource, Settings};

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cluster-capture")
        .join(path)
}

fn review(number: &str) -> Vec<u8> {
    let dir = fixture("reviews");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(number))
        .unwrap();
    std::fs::read(file).unwrap()
}

struct Running {
    addr: SocketAddr,
    admin: SocketAddr,
    certs: tempfile::TempDir,
    ca: String,
    _releases: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<Result<(), helm_locker::server::ServeError>>,
}

fn write_pki(dir: &Path) -> String {
    let pki = certs_gen::generate(
        "helm-locker",
        &["localhost".into(), "127.0.0.1".into()],
        &Default::default(),
    )
    .unwrap();
    // Write beside and rename, as a Secret volume update swaps files atomically.
    for (name, text) in [("tls.key", &pki.key_pem), ("tls.crt", &pki.cert_pem)] {
        std::fs::write(dir.join(format!(".{name}.new")), text).unwrap();
        std::fs::rename(dir.join(format!(".{name}.new")), dir.join(name)).unwrap();
    }
    pki.ca_pem
}

async fn start(config: Config) -> Running {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = tempfile::tempdir().unwrap();
    let ca = write_pki(certs.path());
    let releases = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture("releases/02-after-upgrade.json"),
        releases.path().join("shop.json"),
    )
    .unwrap();
    let settings = Settings {
        addr: "127.0.0.1:0".parse().unwrap(),
        admin_addr: "127.0.0.1:0".parse().unwrap(),
        certificate: Certificate::Files {
            cert: certs.path().join("tls.crt"),
            key: certs.path().join("tls.key"),
        },
        client_ca: None,
        source: ReleaseSource::Folder {
            dir: releases.path().into(),
            interval: Duration::from_millis(100),
        },
        config,
        http: HttpSettings {
            max_body_bytes: 4 * 1024 * 1024,
            read_timeout: Duration::from_secs(1),
            confirm_timeout: Duration::from_secs(1),
        },
        shutdown_grace: Duration::from_secs(5),
        shutdown_delay: Duration::ZERO,
        controller: None,
        events: false,
        learned_configmap_prefix: None,
        learn_interval: std::time::Duration::from_secs(60),
        lock_exceptions: None,
        exceptions_end_on_upgrade: false,
        trusted_storage_namespaces: vec![],
        release_drivers: helm_locker_core::ReleaseDriver::ALL.to_vec(),
        initial_list: helm_locker::server::InitialList::Auto,
        switches_configmap: None,
        writers_configmap: None,
        author_key: Default::default(),
        kube_version: helm_locker::core::KubeVersion::V1_20,
    };
    let server = BoundServer::bind(settings).await.unwrap();
    let (addr, admin) = (server.addr, server.admin_addr);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let done = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    let running = Running {
        addr,
        admin,
        certs,
        ca,
        _releases: releases,
        stop: Some(stop),
        done,
    };
    for _ in 0..100 {
        if admin_get(admin, "/readyz").await.0 == 200 {
            return running;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("server never became ready");
}

async fn admin_get(addr: SocketAddr, path: &str) -> (u16, String) {
    common::get(addr, path).await
}

async fn tls_connect(
    addr: SocketAddr,
    ca_pem: &str,
    alpn: &[u8],
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    common::tls_connect(addr, ca_pem.as_bytes(), alpn, "localhost").await
}

/// POSTs a review; the status and the reply as JSON (a string when it is not JSON).
async fn post(addr: SocketAddr, ca: &str, http: Http, path: &str, body: Vec<u8>) -> (u16, Value) {
    let (status, body) = common::post(addr, ca.as_bytes(), http, path, body).await;
    (
        status,
        serde_json::from_slice(&body)
            .unwrap_or(Value::String(String::from_utf8_lossy(&body).into_owned())),
    )
}

impl Running {
    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(10), &mut self.done)
            .await
            .expect("server stops")
            .unwrap()
            .expect("a clean shutdown");
    }
}

/// Reviews of the kubectl stage, decided against revision 2 deployed.
const DENIED: &[&str] = &[
    "074", "075", "079", "080", "085", "095", "097", "098", "099", "100", "101", "102",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_kubectl_writes_are_denied_over_http1_and_http2() {
    let server = start(Config::default()).await;
    for http in [Http::One, Http::Two] {
        for n in 74..=103 {
            let number = format!("{n:03}");
            let body = review(&number);
            let sent: Value = serde_json::from_slice(&body).unwrap();
            let (status, reply) = post(server.addr, &server.ca, http, "/validate", body).await;
            assert_eq!(status, 200, "{number} {http:?}: {reply}");
            assert_eq!(reply["apiVersion"], "admission.k8s.io/v1");
            assert_eq!(reply["kind"], "AdmissionReview");
            assert_eq!(reply["response"]["uid"], sent["request"]["uid"]);
            let denied = DENIED.contains(&number.as_str());
            assert_eq!(
                reply["response"]["allowed"], !denied,
                "{number} {http:?}: {reply}"
            );
            if denied {
                assert_eq!(reply["response"]["status"]["code"], 403);
                assert_eq!(reply["response"]["status"]["reason"], "Forbidden");
                assert!(reply["response"]["status"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("locked by Helm release shop/shop (revision 2, deployed)"));
            }
        }
    }
    let (_, metrics) = admin_get(server.admin, "/metrics").await;
    assert!(metrics.contains("helm_locker_admissions_total{endpoint=\"validate\",operation=\"UPDATE\",decision=\"deny\"} 22"), "{metrics}");
    assert!(
        metrics.contains("helm_locker_releases_indexed 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("helm_locker_objects_indexed 6"),
        "{metrics}"
    );
    assert_eq!(admin_get(server.admin, "/healthz").await.0, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warn_mode_allows_with_kubectls_warning() {
    let server = start(Config {
        mode: Mode::Warn,
        ..Config::default()
    })
    .await;
    let (status, reply) = post(
        server.addr,
        &server.ca,
        Http::One,
        "/validate",
        review("075"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(reply["response"]["allowed"], true);
    let warning = reply["response"]["warnings"][0].as_str().unwrap();
    assert!(
        warning.contains("/spec/replicas is 3 in the chart, this request sets 7"),
        "{warning}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_mode_patches_locked_fields_back_to_the_chart() {
    let server = start(Config {
        mode: Mode::Repair,
        ..Config::default()
    })
    .await;
    for (number, check) in [
        ("075", "/spec/replicas"),
        ("085", "/spec/template/spec/containers/0/image"),
        ("074", "/data/greeting"),
    ] {
        let body = review(number);
        let sent: Value = serde_json::from_slice(&body).unwrap();
        let (status, reply) =
            post(server.addr, &server.ca, Http::Two, "/mutate", body.clone()).await;
        assert_eq!(status, 200);
        let response = &reply["response"];
        assert_eq!(response["allowed"], true, "{reply}");
        assert_eq!(response["patchType"], "JSONPatch");
        let patch = base64::engine::general_purpose::STANDARD
            .decode(
                response["patch"]
                    .as_str()
                    .expect("patch is a base64 string"),
            )
            .unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
        let mut object = sent["request"]["object"].clone();
        json_patch::patch(&mut object, &patch).unwrap();
        let chart_value = match check {
            "/spec/replicas" => serde_json::json!(3),
            "/data/greeting" => serde_json::json!("hi"),
            _ => serde_json::json!("nginx:1.25"),
        };
        assert_eq!(object.pointer(check), Some(&chart_value), "{number}");
        // Without the mutating webhook the same write is denied, not silently allowed.
        let (_, validated) = post(server.addr, &server.ca, Http::One, "/validate", body).await;
        assert_eq!(validated["response"]["allowed"], false);
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutate_in_deny_mode_leaves_the_decision_to_validation() {
    let server = start(Config::default()).await;
    let (_, reply) = post(server.addr, &server.ca, Http::One, "/mutate", review("075")).await;
    assert_eq!(reply["response"]["allowed"], true);
    assert!(reply["response"].get("patch").is_none());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_status_and_the_server_keeps_serving() {
    let server = start(Config::default()).await;
    let (status, reply) = post(
        server.addr,
        &server.ca,
        Http::One,
        "/validate",
        b"{not json".to_vec(),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        reply["error"].as_str().unwrap().contains("not JSON"),
        "{reply}"
    );
    let (status, reply) = post(
        server.addr,
        &server.ca,
        Http::Two,
        "/validate",
        br#"{"kind":"Pod","apiVersion":"v1"}"#.to_vec(),
    )
    .await;
    assert_eq!(
        (status, reply["error"].as_str().unwrap()),
        (400, "not an AdmissionReview (kind \"Pod\")")
    );
    let mut broken_object: Value = serde_json::from_slice(&review("075")).unwrap();
    broken_object["request"]["oldObject"] = serde_json::json!({"metadata": {"name": 7}});
    broken_object["request"]["name"] = serde_json::json!("");
    broken_object["request"]["operation"] = serde_json::json!("DELETE");
    let (status, _) = post(
        server.addr,
        &server.ca,
        Http::One,
        "/validate",
        serde_json::to_vec(&broken_object).unwrap(),
    )
    .await;
    assert_eq!(status, 400);
    // HTTP/1.1: refused from the declared length, before the body is read. (Raw bytes: a
    // client still writing a refused body may see a broken pipe instead of the answer.)
    let mut large = tls_connect(server.addr, &server.ca, b"http/1.1")
        .await
        .unwrap();
    let head = format!(
        "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n{{",
        5 * 1024 * 1024
    );
    large.write_all(head.as_bytes()).await.unwrap();
    let mut reply = vec![0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(5), large.read(&mut reply))
        .await
        .unwrap()
        .unwrap();
    let reply = String::from_utf8_lossy(&reply[..n]);
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    // HTTP/2: a body over the limit (h2 delivers the early answer without a broken pipe).
    let (status, _) = post(
        server.addr,
        &server.ca,
        Http::Two,
        "/validate",
        vec![b' '; 5 * 1024 * 1024],
    )
    .await;
    assert_eq!(status, 413);
    let (status, _) = post(
        server.addr,
        &server.ca,
        Http::One,
        "/elsewhere",
        review("075"),
    )
    .await;
    assert_eq!(status, 404);
    // A known path with another method: 405, and which method it takes.
    let mut tls = tls_connect(server.addr, &server.ca, b"http/1.1")
        .await
        .unwrap();
    tls.write_all(b"GET /validate HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut reply = Vec::new();
    let _ = tls.read_to_end(&mut reply).await;
    let reply = String::from_utf8_lossy(&reply).to_lowercase();
    assert!(reply.starts_with("http/1.1 405"), "{reply}");
    assert!(reply.contains("\r\nallow: post\r\n"), "{reply}");

    // A client that stops halfway through its headers is cut off after the read timeout,
    // while others are served.
    let mut slow = tls_connect(server.addr, &server.ca, b"http/1.1")
        .await
        .unwrap();
    slow.write_all(b"POST /validate HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    let (status, _) = post(
        server.addr,
        &server.ca,
        Http::One,
        "/validate",
        review("103"),
    )
    .await;
    assert_eq!(status, 200);
    let mut buf = [0u8; 256];
    let closed = tokio::time::timeout(Duration::from_secs(5), slow.read(&mut buf))
        .await
        .expect("slow client cut off within the read timeout");
    assert!(
        matches!(closed, Ok(0) | Err(_)) || String::from_utf8_lossy(&buf).contains("408"),
        "{closed:?}"
    );
    // A body that never finishes gets 408.
    let mut stalled = tls_connect(server.addr, &server.ca, b"http/1.1")
        .await
        .unwrap();
    stalled
        .write_all(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{")
        .await
        .unwrap();
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stalled.read_to_end(&mut reply)).await;
    assert!(
        String::from_utf8_lossy(&reply).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    let (_, metrics) = admin_get(server.admin, "/metrics").await;
    assert!(
        metrics.contains("helm_locker_bad_requests_total 6"),
        "{metrics}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_is_served_to_new_connections_without_a_restart() {
    let server = start(Config::default()).await;
    let old_ca = server.ca.clone();
    assert!(tls_connect(server.addr, &old_ca, b"h2").await.is_ok());
    let new_ca = write_pki(server.certs.path());
    let mut served = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if tls_connect(server.addr, &new_ca, b"h2").await.is_ok() {
            served = true;
            break;
        }
    }
    assert!(served, "new certificate not served");
    assert!(
        tls_connect(server.addr, &old_ca, b"h2").await.is_err(),
        "old certificate still served"
    );
    let (status, _) = post(server.addr, &new_ca, Http::One, "/validate", review("075")).await;
    assert_eq!(status, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_release_folder_is_picked_up() {
    let server = start(Config::default()).await;
    let (_, reply) = post(
        server.addr,
        &server.ca,
        Http::One,
        "/validate",
        review("075"),
    )
    .await;
    assert_eq!(reply["response"]["allowed"], false);
    // The release turns pending (helm upgrade started): its objects open.
    let dir = server._releases.path();
    let pending = helm_locker_core::test_util::release_json(
        "shop",
        "shop",
        3,
        helm_locker::core::Status::PendingUpgrade,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: shop-web}\nspec: {replicas: 3}\n",
    );
    std::fs::write(
        dir.join("shop.json"),
        helm_locker_core::test_util::release_secret_json(&pending).to_string(),
    )
    .unwrap();
    let mut opened = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (_, reply) = post(
            server.addr,
            &server.ca,
            Http::One,
            "/validate",
            review("075"),
        )
        .await;
        if reply["response"]["allowed"] == true {
            opened = true;
            break;
        }
    }
    assert!(opened, "folder change not seen");
    server.stop().await;
}

/// Reads one HTTP/1.1 response with a Content-Length.
async fn read_response(stream: &mut tokio_rustls::client::TlsStream<TcpStream>) -> String {
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&reply).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_string)
                })
                .and_then(|l| l.trim().parse::<usize>().ok())
                .expect("a Content-Length");
            if body.len() >= length {
                return text;
            }
        }
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed mid-response: {text}");
        reply.extend_from_slice(&buf[..n]);
    }
}

/// Reads from `stream` until the server closes it, or `limit` passes (then `None`).
async fn closed_within(
    stream: &mut tokio_rustls::client::TlsStream<TcpStream>,
    limit: Duration,
) -> Option<Duration> {
    let started = std::time::Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at((started + limit).into(), stream.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => continue,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http1_connection_that_begins_no_request_within_the_read_timeout_is_closed() {
    // The read timeout is 1 s: a connection is watched once a second, and one that began no
    // request in a whole second and has none in flight is closed.
    let server = start(Config::default()).await;
    let body = review("103");
    let mut kept = tls_connect(server.addr, &server.ca, b"http/1.1")
        .await
        .unwrap();
    // Requests every 400 ms for 3 s keep the connection open past three read timeouts.
    for _ in 0..8 {
        let head = format!(
            "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        kept.write_all(head.as_bytes()).await.unwrap();
        kept.write_all(&body).await.unwrap();
        let reply = read_response(&mut kept).await;
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    // Then idle: closed after one to two read timeouts.
    let closed = closed_within(&mut kept, Duration::from_secs(4)).await;
    assert!(
        closed.is_some_and(|after| after >= Duration::from_millis(500)),
        "an idle keep-alive connection closed after {closed:?}"
    );
    // A connection that never sends a request goes the same way.
    let mut silent = tls_connect(server.addr, &server.ca, b"http/1.1")
        .await
        .unwrap();
    let closed = closed_within(&mut silent, Duration::from_secs(4)).await;
    assert!(closed.is_some(), "a silent connection is closed");
    // HTTP/2 is not watched: its idle connection stays open.
    let mut h2 = tls_connect(server.addr, &server.ca, b"h2").await.unwrap();
    h2.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let closed = closed_within(&mut h2, Duration::from_millis(2500)).await;
    assert_eq!(closed, None, "an idle HTTP/2 connection is kept");
    server.stop().await;
}
