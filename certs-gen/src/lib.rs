//! Certificates for helm-locker's webhook: a CA and a serving certificate signed by it (rcgen).
//! Used by the `certs-gen` command and by `helm-locker serve --self-signed`.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// PEM-encoded CA and serving certificate with its key.
pub struct Pki {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// Validity of what [`generate`] makes, in days.
pub struct Validity {
    pub ca_days: i64,
    pub leaf_days: i64,
}

impl Default for Validity {
    fn default() -> Self {
        Validity {
            ca_days: 10 * 365,
            leaf_days: 365,
        }
    }
}

/// A CA and a serving certificate for `names` (DNS names or IP addresses).
pub fn generate(
    common_name: &str,
    names: &[String],
    validity: &Validity,
) -> Result<Pki, rcgen::Error> {
    let start = time::OffsetDateTime::now_utc();
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("{common_name} CA"));
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca_params.not_before = start - rcgen_days(1);
    ca_params.not_after = start + rcgen_days(validity.ca_days);
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut leaf = CertificateParams::new(Vec::<String>::new())?;
    for name in names {
        leaf.subject_alt_names
            .push(match name.parse::<std::net::IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(name.clone().try_into()?),
            });
    }
    leaf.distinguished_name
        .push(DnType::CommonName, common_name);
    leaf.use_authority_key_identifier_extension = true;
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.not_before = start - rcgen_days(1);
    leaf.not_after = start + rcgen_days(validity.leaf_days);
    let leaf_key = KeyPair::generate()?;
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;
    Ok(Pki {
        ca_pem: ca_cert.pem(),
        cert_pem: leaf_cert.pem(),
        key_pem: leaf_key.serialize_pem(),
    })
}

fn rcgen_days(days: i64) -> time::Duration {
    time::Duration::days(days)
}

/// When a PEM certificate expires, as seconds since the Unix epoch, and its subject.
pub fn expiry(pem: &[u8]) -> Result<(String, i64), String> {
    let (_, pem) =
        x509_parser::pem::parse_x509_pem(pem).map_err(|e| format!("not a PEM certificate: {e}"))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| format!("not an X.509 certificate: {e}"))?;
    Ok((
        cert.subject().to_string(),
        cert.validity().not_after.timestamp(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_certificates_have_the_requested_lifetime() {
        let pki = generate(
            "helm-locker",
            &["helm-locker.ns.svc".into(), "10.0.0.1".into()],
            &Validity {
                ca_days: 100,
                leaf_days: 10,
            },
        )
        .unwrap();
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let (subject, leaf_expiry) = expiry(pki.cert_pem.as_bytes()).unwrap();
        assert_eq!(subject, "CN=helm-locker");
        assert!((leaf_expiry - now - 10 * 86400).abs() < 60);
        let (_, ca_expiry) = expiry(pki.ca_pem.as_bytes()).unwrap();
        assert!((ca_expiry - now - 100 * 86400).abs() < 60);
        assert!(expiry(b"nonsense").is_err());
    }
}
