//! TLS for the webhook port: the certificate and key are re-read when their files change, so a
//! rotated Secret volume (Kubernetes swaps a `..data` symlink) is served on the next
//! connection without a restart. Checked at most once a second, on handshakes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use prometheus_client::metrics::gauge::Gauge;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("{path} holds no PEM private key (PKCS#8, PKCS#1 or SEC1)")]
    NoKey { path: PathBuf },
    #[error("the key in {key} does not fit the certificate in {cert}: {reason}")]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
    #[error("client CA {path}: {reason}")]
    ClientCa { path: PathBuf, reason: String },
}

/// Loads a certificate chain and key from PEM files, checking that they belong together.
pub(crate) fn load_certified_key(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| TlsError::Read {
            path: path.into(),
            source,
        })
    };
    certified_key(&read(cert)?, &read(key)?, cert, key)
}

/// Checks that a PEM certificate and key (already in memory) belong together.
pub(crate) fn check_pair(cert_pem: &[u8], key_pem: &[u8]) -> Result<(), TlsError> {
    certified_key(
        cert_pem,
        key_pem,
        Path::new("tls.crt"),
        Path::new("tls.key"),
    )
    .map(|_| ())
}

fn certified_key(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert: &Path,
    key: &Path,
) -> Result<CertifiedKey, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .filter_map(Result::ok)
        .collect();
    if chain.is_empty() {
        return Err(TlsError::NoCertificate { path: cert.into() });
    }
    let key_der =
        PrivateKeyDer::from_pem_slice(key_pem).map_err(|_| TlsError::NoKey { path: key.into() })?;
    let provider = rustls::crypto::ring::default_provider();
    let certified =
        CertifiedKey::from_der(chain, key_der, &provider).map_err(|e| TlsError::Mismatch {
            cert: cert.into(),
            key: key.into(),
            reason: e.to_string(),
        })?;
    Ok(certified)
}

#[derive(Debug)]
struct Loaded {
    key: Arc<CertifiedKey>,
    stamp: (Option<SystemTime>, Option<SystemTime>),
    checked: Instant,
}

/// Serves the certificate in `cert`/`key`, reloading it when either file changes, and keeps
/// `expiry` (`helm_locker_certificate_expiry_timestamp_seconds`) at the served one's notAfter.
#[derive(Debug)]
pub(crate) struct ReloadingCert {
    cert: PathBuf,
    key: PathBuf,
    current: Mutex<Loaded>,
    expiry: Gauge,
}

/// The notAfter (Unix time) of the first certificate in a PEM file.
fn not_after(cert: &Path) -> Option<i64> {
    let pem = std::fs::read(cert).ok()?;
    certs_gen::expiry(&pem).ok().map(|(_, not_after)| not_after)
}

const CHECK_INTERVAL: Duration = Duration::from_secs(1);

fn stamp(cert: &Path, key: &Path) -> (Option<SystemTime>, Option<SystemTime>) {
    // `metadata` follows symlinks: a swapped `..data` link shows the new files' times.
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    (modified(cert), modified(key))
}

impl ReloadingCert {
    pub(crate) fn new(cert: PathBuf, key: PathBuf, expiry: Gauge) -> Result<Self, TlsError> {
        let loaded = load_certified_key(&cert, &key)?;
        if let Some(at) = not_after(&cert) {
            expiry.set(at);
        }
        let current = Loaded {
            key: Arc::new(loaded),
            stamp: stamp(&cert, &key),
            checked: Instant::now(),
        };
        Ok(ReloadingCert {
            cert,
            key,
            current: Mutex::new(current),
            expiry,
        })
    }

    fn current(&self) -> Arc<CertifiedKey> {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if current.checked.elapsed() >= CHECK_INTERVAL {
            current.checked = Instant::now();
            let now = stamp(&self.cert, &self.key);
            if now != current.stamp {
                match load_certified_key(&self.cert, &self.key) {
                    Ok(key) => {
                        tracing::info!(cert = %self.cert.display(), "serving certificate reloaded");
                        current.key = Arc::new(key);
                        current.stamp = now;
                        if let Some(at) = not_after(&self.cert) {
                            self.expiry.set(at);
                        }
                    }
                    // Mid-rotation (cert written, key not yet): keep serving the old pair.
                    Err(e) => {
                        tracing::warn!(error = %e, "new certificate not usable yet; serving the previous one")
                    }
                }
            }
        }
        current.key.clone()
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// TLS 1.2+ with ALPN for HTTP/2 and HTTP/1.1; optionally requiring client certificates
/// signed by `client_ca` (the API server's, `--client-ca`).
pub(crate) fn server_config(
    resolver: Arc<ReloadingCert>,
    client_ca: Option<&Path>,
) -> Result<rustls::ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .expect("ring supports TLS 1.2 and 1.3");
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let pem = std::fs::read(path).map_err(|source| TlsError::Read {
                path: path.into(),
                source,
            })?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok) {
                roots.add(cert).map_err(|e| TlsError::ClientCa {
                    path: path.into(),
                    reason: e.to_string(),
                })?;
            }
            if roots.is_empty() {
                return Err(TlsError::ClientCa {
                    path: path.into(),
                    reason: "no PEM certificate".into(),
                });
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| TlsError::ClientCa {
                path: path.into(),
                reason: e.to_string(),
            })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_files_give_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let pki = certs_gen::generate("t", &["localhost".into()], &Default::default()).unwrap();
        let (cert, key, other) = (
            dir.path().join("tls.crt"),
            dir.path().join("tls.key"),
            dir.path().join("other.key"),
        );
        std::fs::write(&cert, &pki.cert_pem).unwrap();
        std::fs::write(&key, &pki.key_pem).unwrap();
        assert!(load_certified_key(&cert, &key).is_ok());
        assert!(matches!(
            load_certified_key(&dir.path().join("missing"), &key),
            Err(TlsError::Read { .. })
        ));
        assert!(matches!(
            load_certified_key(&key, &key),
            Err(TlsError::NoCertificate { .. })
        ));
        assert!(matches!(
            load_certified_key(&cert, &cert),
            Err(TlsError::NoKey { .. })
        ));
        let stranger =
            certs_gen::generate("t", &["localhost".into()], &Default::default()).unwrap();
        std::fs::write(&other, &stranger.key_pem).unwrap();
        let err = load_certified_key(&cert, &other).unwrap_err();
        assert!(matches!(err, TlsError::Mismatch { .. }), "{err}");
    }

    #[test]
    fn the_expiry_metric_follows_the_certificate_served() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let issue = |days| {
            let validity = certs_gen::Validity {
                ca_days: 3650,
                leaf_days: days,
            };
            let pki = certs_gen::generate("t", &["localhost".into()], &validity).unwrap();
            std::fs::write(&cert, &pki.cert_pem).unwrap();
            std::fs::write(&key, &pki.key_pem).unwrap();
            certs_gen::expiry(pki.cert_pem.as_bytes()).unwrap().1
        };
        let first = issue(90);
        let gauge = Gauge::default();
        let resolver = ReloadingCert::new(cert.clone(), key.clone(), gauge.clone()).unwrap();
        assert_eq!(gauge.get(), first);
        // A renewal: the next handshake after the check interval serves (and reports) it.
        std::thread::sleep(CHECK_INTERVAL);
        let second = issue(10);
        assert!(second < first);
        resolver.current();
        assert_eq!(gauge.get(), second);
    }
}
