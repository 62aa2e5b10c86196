//! What `certs-gen` writes is what the server serves and what the API server trusts: the
//! server starts on certs-gen's tls.crt/tls.key, and a client that trusts only the caBundle of
//! certs-gen's webhook-configuration.yaml, dialing 127.0.0.1 with the Service's DNS name as
//! SNI (as the API server dials `<service>.<namespace>.svc`), completes the TLS handshake
//! and gets an AdmissionReview answer.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use helm_locker::core::Config;
use helm_locker::server::state::HttpSettings;
use helm_locker::server::{BoundServer, Certificate, ReleaseSource, Settings};

const SERVICE: &str = "helm-locker";
const NAMESPACE: &str = "ops";

/// Writes certs-gen's files for the Service into `dir`, as the `certs-gen` command does.
fn certs_gen_into(dir: &Path) {
    let names = certs_gen::service_names(SERVICE, NAMESPACE);
    let pki = certs_gen::generate(
        &format!("{SERVICE}.{NAMESPACE}.svc"),
        &names,
        &Default::default(),
    )
    .unwrap();
    for (name, text) in certs_gen::outputs(&pki, SERVICE, NAMESPACE, None, false).unwrap() {
        std::fs::write(dir.join(name), text).unwrap();
    }
}

/// The CA as the API server gets it: the caBundle of the rendered webhook configuration.
fn ca_bundle(dir: &Path) -> Vec<u8> {
    let yaml = std::fs::read_to_string(dir.join("webhook-configuration.yaml")).unwrap();
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    let webhook = &docs[0]["webhooks"][0]["clientConfig"];
    assert_eq!(webhook["service"]["name"], SERVICE);
    assert_eq!(webhook["service"]["namespace"], NAMESPACE);
    base64::engine::general_purpose::STANDARD
        .decode(webhook["caBundle"].as_str().unwrap())
        .unwrap()
}

async fn handshake(
    addr: SocketAddr,
    ca_pem: &[u8],
    sni: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    common::tls_connect(addr, ca_pem, b"http/1.1", sni).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_serves_certs_gen_output_to_a_client_trusting_its_ca_bundle() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = tempfile::tempdir().unwrap();
    certs_gen_into(certs.path());
    let releases = tempfile::tempdir().unwrap();
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
        config: Config::default(),
        http: HttpSettings {
            max_body_bytes: 4 * 1024 * 1024,
            read_timeout: Duration::from_secs(2),
            confirm_timeout: Duration::from_secs(1),
        },
        shutdown_grace: Duration::from_secs(2),
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
    let addr = server.addr;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let done = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));

    let ca = ca_bundle(certs.path());
    assert_eq!(ca, std::fs::read(certs.path().join("ca.crt")).unwrap());
    for sni in [
        "helm-locker.ops.svc",
        "helm-locker.ops.svc.cluster.local",
        "helm-locker.ops",
    ] {
        let tls = handshake(addr, &ca, sni).await;
        assert!(tls.is_ok(), "{sni}: {:?}", tls.err());
    }
    // The verification is real: another name, or another CA, is refused.
    assert!(handshake(addr, &ca, "helm-locker.other.svc").await.is_err());
    let stranger =
        certs_gen::generate("x", &["helm-locker.ops.svc".into()], &Default::default()).unwrap();
    assert!(
        handshake(addr, stranger.ca_pem.as_bytes(), "helm-locker.ops.svc")
            .await
            .is_err()
    );

    // And the webhook answers over that connection.
    let tls = handshake(addr, &ca, "helm-locker.ops.svc").await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "certs-gen-1",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "namespace": "default",
            "name": "x",
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
        }
    });
    let request = hyper::Request::post("/validate")
        .header("host", "helm-locker.ops.svc")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(review.to_string())))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let reply: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(reply["response"]["uid"], "certs-gen-1");
    assert_eq!(reply["response"]["allowed"], true);

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(10), done)
        .await
        .unwrap()
        .unwrap()
        .expect("a clean shutdown");
}
