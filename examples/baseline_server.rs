//! The limit for load benchmarks: the stack helm-locker serves on (axum on hyper's auto
//! HTTP/1.1 + HTTP/2, rustls) answering every review with a canned "allowed" AdmissionReview:
//! it reads the body but never parses it. Not part of helm-locker; scripts/load.sh measures
//! helm-locker and the peer as a ratio of it, in the same run.
//!
//!   cargo run --release --example baseline_server -- 127.0.0.1:9443 CERT KEY [--echo-uid]
//!
//! The API server rejects an answer whose `uid` is not the request's; with `--echo-uid` the
//! server copies the first `"uid":"..."` of the body (the request's, which the API server writes
//! before the objects) into the answer, so it can stand for "the cheapest possible webhook" on a
//! real control plane (tests/e2e/bench_webhook_overhead.py).

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

const ALLOWED: &[u8] = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"00000000-0000-0000-0000-000000000000","allowed":true}}"#;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (addr, cert, key, echo_uid) = match args.as_slice() {
        [_, addr, cert, key] => (addr, cert, key, false),
        [_, addr, cert, key, flag] if flag == "--echo-uid" => (addr, cert, key, true),
        _ => {
            eprintln!("usage: baseline_server ADDR CERT KEY [--echo-uid]");
            std::process::exit(2);
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .expect("certificate")
        .map(|c| c.expect("certificate"))
        .collect();
    let key = PrivateKeyDer::from_pem_file(key).expect("key");
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("certificate and key");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    // The body is read whole (HTTP/1.1 keep-alive needs it drained), never parsed.
    let answer = move |body: Bytes| async move {
        let answer = if echo_uid {
            Bytes::from(with_uid(&body))
        } else {
            Bytes::from_static(ALLOWED)
        };
        ([(header::CONTENT_TYPE, "application/json")], answer).into_response()
    };
    let app = Router::new()
        .route("/validate", post(answer))
        .route("/mutate", post(answer));
    let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        let app = app.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), TowerToHyperService::new(app))
                .await;
        });
    }
}

/// The canned answer with the request's uid.
fn with_uid(body: &[u8]) -> Vec<u8> {
    const KEY: &[u8] = b"\"uid\":\"";
    let uid = body
        .windows(KEY.len())
        .position(|w| w == KEY)
        .map(|at| &body[at + KEY.len()..])
        .and_then(|rest| rest.iter().position(|b| *b == b'"').map(|end| &rest[..end]))
        .unwrap_or_default();
    let text = String::from_utf8_lossy(ALLOWED).replace(
        "00000000-0000-0000-0000-000000000000",
        &String::from_utf8_lossy(uid),
    );
    text.into_bytes()
}
