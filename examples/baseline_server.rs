//! The limit for load benchmarks: a minimal hyper + rustls server that answers every request
//! with a canned "allowed" AdmissionReview: it reads the body but never parses it. Not part of helm-locker; used by
//! scripts/load.sh to measure helm-locker as a ratio of what the transport allows.
//!
//!   cargo run --release --example baseline_server -- 127.0.0.1:9443 CERT KEY

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
    let [_, addr, cert, key] = args.as_slice() else {
        eprintln!("usage: baseline_server ADDR CERT KEY");
        std::process::exit(2);
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
            let service = service_fn(|request: hyper::Request<hyper::body::Incoming>| async {
                // Read the body (HTTP/1.1 keep-alive needs it drained), never parse it.
                let _ = request.into_body().collect().await;
                Ok::<_, std::convert::Infallible>(
                    hyper::Response::builder()
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from_static(ALLOWED)))
                        .expect("a static response"),
                )
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}
