//! The limit for load benchmarks: a minimal hyper + rustls server that answers every request
//! with a canned "allowed" AdmissionReview: it reads the body but never parses it. Not part of helm-locker; used by
//! scripts/load.sh to measure helm-locker as a ratio of what the transport allows.
//!
//!   cargo run --release --example baseline_server -- 127.0.0.1:9443 CERT KEY [--echo-uid]
//!
//! The API server rejects an answer whose `uid` is not the request's; with `--echo-uid` the
//! server copies the first `"uid":"..."` of the body (the request's, which the API server writes
//! before the objects) into the answer, so it can stand for "the cheapest possible webhook" on a
//! real control plane (tests/e2e/bench_webhook_overhead.py).

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
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
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(key).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    loop {
        let (stream, _) = listener.accept().await.unwrap();
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let service = service_fn(
                move |request: hyper::Request<hyper::body::Incoming>| async move {
                    // Read the body (HTTP/1.1 keep-alive needs it drained), never parse it.
                    let body = request.into_body().collect().await.map(|b| b.to_bytes());
                    let answer = match (echo_uid, body) {
                        (true, Ok(body)) => Bytes::from(with_uid(&body)),
                        _ => Bytes::from_static(ALLOWED),
                    };
                    Ok::<_, std::convert::Infallible>(
                        hyper::Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(answer))
                            .expect("a static response"),
                    )
                },
            );
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), service)
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
