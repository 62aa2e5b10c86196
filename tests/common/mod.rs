//! What the integration tests share: an HTTPS client that trusts a test CA (HTTP/1.1 or
//! HTTP/2 by ALPN), POSTs of review bodies, and plain GETs of the admin port. Each test file
//! uses part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Http {
    One,
    Two,
}

impl Http {
    pub fn alpn(self) -> &'static [u8] {
        match self {
            Http::One => b"http/1.1",
            Http::Two => b"h2",
        }
    }
}

/// A client configuration trusting every certificate in `ca_pem`, offering one ALPN protocol.
pub fn client_config(ca_pem: &[u8], alpn: &[u8]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    Arc::new(config)
}

/// A TLS connection to `addr` for the server name `sni`.
pub async fn tls_connect(
    addr: SocketAddr,
    ca_pem: &[u8],
    alpn: &[u8],
    sni: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    tokio_rustls::TlsConnector::from(client_config(ca_pem, alpn))
        .connect(ServerName::try_from(sni.to_string()).unwrap(), tcp)
        .await
}

/// POSTs `body` as JSON over HTTPS (server name `localhost`); the status and the body.
pub async fn post(
    addr: SocketAddr,
    ca_pem: &[u8],
    http: Http,
    path: &str,
    body: Vec<u8>,
) -> (u16, Bytes) {
    let tls = tls_connect(addr, ca_pem, http.alpn(), "localhost")
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(http.alpn()), "ALPN");
    let request = hyper::Request::post(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let response = match http {
        Http::One => {
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .unwrap();
            tokio::spawn(conn);
            sender.send_request(request).await.unwrap()
        }
        Http::Two => {
            let (mut sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .unwrap();
            tokio::spawn(conn);
            sender.send_request(request).await.unwrap()
        }
    };
    let status = response.status().as_u16();
    (
        status,
        response.into_body().collect().await.unwrap().to_bytes(),
    )
}

/// A plain HTTP/1.1 GET (the admin port); status 0 when nothing listens yet.
pub async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let Ok(tcp) = TcpStream::connect(addr).await else {
        return (0, String::new());
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let request = hyper::Request::get(path)
        .header("host", "localhost")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}
