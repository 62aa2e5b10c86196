//! The peer for load benchmarks: an admission webhook in the style of kube-rs's
//! `examples/admission_controller.rs`, on axum. It parses the whole review into
//! `AdmissionReview<DynamicObject>` (objects included), turns it into an `AdmissionRequest`,
//! and allows. Same TLS and HTTP stack as helm-locker (rustls, hyper's auto HTTP/1.1 + HTTP/2),
//! so the difference measured is the work per request. Used by scripts/load.sh.
//!
//!   cargo run --release --example peer_server -- 127.0.0.1:9444 CERT KEY

use std::sync::Arc;

use axum::routing::post;
use axum::{Json, Router};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::DynamicObject;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

async fn validate(
    Json(review): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    let request: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(request) => request,
        Err(e) => return Json(AdmissionResponse::invalid(e.to_string()).into_review()),
    };
    Json(AdmissionResponse::from(&request).into_review())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, addr, cert, key] = args.as_slice() else {
        eprintln!("usage: peer_server ADDR CERT KEY");
        std::process::exit(2);
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
    let app = Router::new().route("/validate", post(validate));
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
