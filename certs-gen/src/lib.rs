//! Certificates for helm-locker's webhook: a CA and a serving certificate signed by it (rcgen).
//! Used by the `certs-gen` command and by `helm-locker serve --self-signed` and
//! `--self-managed-secret`; also renders the webhook configurations of `webhook-config/`
//! (embedded at compile time) with the CA as `caBundle`.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

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

/// The names (DNS names and IP addresses) a PEM certificate is valid for.
pub fn names(pem: &[u8]) -> Result<Vec<String>, String> {
    use x509_parser::extensions::GeneralName;
    let (_, pem) =
        x509_parser::pem::parse_x509_pem(pem).map_err(|e| format!("not a PEM certificate: {e}"))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| format!("not an X.509 certificate: {e}"))?;
    let san = cert
        .subject_alternative_name()
        .map_err(|e| format!("bad subjectAltName: {e}"))?;
    let mut names = Vec::new();
    for name in san.iter().flat_map(|san| san.value.general_names.iter()) {
        match name {
            GeneralName::DNSName(dns) => names.push(dns.to_string()),
            GeneralName::IPAddress(bytes) => {
                let ip = match bytes.len() {
                    4 => <[u8; 4]>::try_from(*bytes).ok().map(std::net::IpAddr::from),
                    16 => <[u8; 16]>::try_from(*bytes)
                        .ok()
                        .map(std::net::IpAddr::from),
                    _ => None,
                };
                names.extend(ip.map(|ip| ip.to_string()));
            }
            _ => {}
        }
    }
    Ok(names)
}

/// The names a serving certificate for Service `service` in `namespace` must carry: what the
/// API server dials (`<service>.<namespace>.svc`) and the usual in-cluster spellings.
pub fn service_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_string(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// `webhook-config/validating.yaml`, as shipped.
pub const VALIDATING_WEBHOOK: &str = include_str!("../../webhook-config/validating.yaml");
/// `webhook-config/mutating.yaml` (repair mode), as shipped.
pub const MUTATING_WEBHOOK: &str = include_str!("../../webhook-config/mutating.yaml");
/// `webhook-config/author.yaml` (the author stamp on release Secret writes), as shipped.
pub const AUTHOR_WEBHOOK: &str = include_str!("../../webhook-config/author.yaml");
/// The namespace `webhook-config/` is written for.
const SHIPPED_NAMESPACE: &str = "helm-locker";
/// The matchConditions of every webhook on Kubernetes 1.28 and newer: the file
/// webhook-config-1.28 applies, and the chart renders a copy of.
pub const MATCH_CONDITIONS: &str =
    include_str!("../../webhook-config/match-conditions/match-conditions.yaml");
/// The first Kubernetes version whose webhook configurations take `matchConditions` (beta and
/// on by default in 1.28, GA in 1.30).
pub const MATCH_CONDITIONS_SINCE: (u64, u64) = (1, 28);

/// `(major, minor)` of a Kubernetes version as people and API servers write it: `1.30`,
/// `v1.30.2`, `1.28.3-eks-4f4795d`.
pub fn parse_kube_version(text: &str) -> Result<(u64, u64), String> {
    let bad = || format!("{text:?} is not a Kubernetes version such as 1.30 or v1.28.3");
    let trimmed = text.strip_prefix('v').unwrap_or(text);
    let mut parts = trimmed.splitn(3, '.');
    let major = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let minor = parts
        .next()
        .map(|p| p.split(|c: char| !c.is_ascii_digit()).next().unwrap_or(""))
        .and_then(|p| p.parse().ok())
        .ok_or_else(bad)?;
    Ok((major, minor))
}

/// The `matchConditions` list of [`MATCH_CONDITIONS`].
pub fn match_conditions() -> Result<serde_json::Value, String> {
    let doc: serde_json::Value = serde_saphyr::from_str(MATCH_CONDITIONS)
        .map_err(|e| format!("embedded match conditions: {e}"))?;
    match &doc["conditions"] {
        serde_json::Value::Array(list) if !list.is_empty() => Ok(doc["conditions"].clone()),
        _ => Err("embedded match conditions: no conditions list".into()),
    }
}

/// One shipped webhook configuration, pointed at `service` in `namespace`, with `ca_pem` as
/// the `caBundle` of every webhook, and `namespace` (instead of the shipped `helm-locker`)
/// among the namespaces never intercepted. Returned as YAML.
pub fn webhook_configuration(
    shipped: &str,
    service: &str,
    namespace: &str,
    ca_pem: &str,
) -> Result<String, String> {
    webhook_configuration_for(shipped, service, namespace, ca_pem, false)
}

/// [`webhook_configuration`], and with `match_conditions` every webhook also carries the
/// [`match_conditions`] (for Kubernetes 1.28 and newer, whose API servers know the field).
pub fn webhook_configuration_for(
    shipped: &str,
    service: &str,
    namespace: &str,
    ca_pem: &str,
    match_conditions: bool,
) -> Result<String, String> {
    use base64::Engine;
    let conditions = if match_conditions {
        Some(self::match_conditions()?)
    } else {
        None
    };
    let mut doc: serde_json::Value = serde_saphyr::from_str(shipped)
        .map_err(|e| format!("embedded webhook configuration: {e}"))?;
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let webhooks = doc
        .get_mut("webhooks")
        .and_then(|w| w.as_array_mut())
        .ok_or("embedded webhook configuration has no webhooks")?;
    for webhook in webhooks {
        if let Some(conditions) = &conditions {
            webhook["matchConditions"] = conditions.clone();
        }
        let client = &mut webhook["clientConfig"];
        client["caBundle"] = bundle.clone().into();
        client["service"]["name"] = service.into();
        client["service"]["namespace"] = namespace.into();
        let expressions = webhook
            .pointer_mut("/namespaceSelector/matchExpressions")
            .and_then(|e| e.as_array_mut());
        for expression in expressions.into_iter().flatten() {
            if expression["key"] != "kubernetes.io/metadata.name" {
                continue;
            }
            if let Some(values) = expression["values"].as_array_mut() {
                values.retain(|v| v != SHIPPED_NAMESPACE);
                if !values.iter().any(|v| v == namespace) {
                    values.push(namespace.into());
                }
            }
        }
    }
    serde_saphyr::to_string(&doc).map_err(|e| format!("cannot write YAML: {e}"))
}

/// What `certs-gen` writes, file name and content, for a generated `pki`: the PEM files,
/// `ca-bundle.b64`, `webhook-configuration.yaml` (the validating configuration, the mutating
/// one when `repair`, and the author one) and, when `secret` names one, a `kubernetes.io/tls` Secret.
pub fn outputs(
    pki: &Pki,
    service: &str,
    namespace: &str,
    secret: Option<&str>,
    repair: bool,
) -> Result<Vec<(&'static str, String)>, String> {
    outputs_for(pki, service, namespace, secret, repair, None)
}

/// [`outputs`] for a cluster of `kube_version` (`(major, minor)`): from 1.28 on, the webhook
/// configurations carry [`match_conditions`]; without a version, or before 1.28, none (what
/// every API server accepts).
pub fn outputs_for(
    pki: &Pki,
    service: &str,
    namespace: &str,
    secret: Option<&str>,
    repair: bool,
    kube_version: Option<(u64, u64)>,
) -> Result<Vec<(&'static str, String)>, String> {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let conditions = kube_version.is_some_and(|v| v >= MATCH_CONDITIONS_SINCE);
    let render =
        |shipped| webhook_configuration_for(shipped, service, namespace, &pki.ca_pem, conditions);
    let mut webhooks = render(VALIDATING_WEBHOOK)?;
    if repair {
        webhooks.push_str("---\n");
        webhooks.push_str(&render(MUTATING_WEBHOOK)?);
    }
    // Every release Secret write must reach the author webhook: never matchConditions.
    webhooks.push_str("---\n");
    webhooks.push_str(&webhook_configuration_for(
        AUTHOR_WEBHOOK,
        service,
        namespace,
        &pki.ca_pem,
        false,
    )?);
    let mut files = vec![
        ("ca.crt", pki.ca_pem.clone()),
        ("tls.crt", pki.cert_pem.clone()),
        ("tls.key", pki.key_pem.clone()),
        ("ca-bundle.b64", b64(&pki.ca_pem)),
        ("webhook-configuration.yaml", webhooks),
    ];
    if let Some(secret) = secret {
        files.push((
            "secret.yaml",
            format!(
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {secret}\n  namespace: {namespace}\ntype: kubernetes.io/tls\ndata:\n  ca.crt: {}\n  tls.crt: {}\n  tls.key: {}\n",
                b64(&pki.ca_pem),
                b64(&pki.cert_pem),
                b64(&pki.key_pem)
            ),
        ));
    }
    Ok(files)
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
        assert_eq!(
            names(pki.cert_pem.as_bytes()).unwrap(),
            ["helm-locker.ns.svc", "10.0.0.1"]
        );
        assert!(names(b"nonsense").is_err());
    }

    #[test]
    fn rendered_webhook_configurations_carry_the_ca_service_and_namespace() {
        use base64::Engine;
        let pki = generate("t", &["t.ops.svc".into()], &Default::default()).unwrap();
        for (shipped, path) in [
            (VALIDATING_WEBHOOK, "/validate"),
            (MUTATING_WEBHOOK, "/mutate"),
        ] {
            let yaml = webhook_configuration(shipped, "hl", "ops", &pki.ca_pem).unwrap();
            let doc: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
            let shipped: serde_json::Value = serde_saphyr::from_str(shipped).unwrap();
            let webhook = &doc["webhooks"][0];
            let bundle = webhook["clientConfig"]["caBundle"].as_str().unwrap();
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(bundle)
                .unwrap();
            assert_eq!(decoded, pki.ca_pem.as_bytes());
            assert_eq!(webhook["clientConfig"]["service"]["name"], "hl");
            assert_eq!(webhook["clientConfig"]["service"]["namespace"], "ops");
            assert_eq!(webhook["clientConfig"]["service"]["path"], path);
            assert_eq!(
                webhook["namespaceSelector"]["matchExpressions"][0]["values"],
                serde_json::json!(["kube-system", "kube-node-lease", "ops"])
            );
            // Everything else is the shipped file's.
            assert_eq!(webhook["rules"], shipped["webhooks"][0]["rules"]);
            assert_eq!(
                webhook["failurePolicy"],
                shipped["webhooks"][0]["failurePolicy"]
            );
            assert_eq!(doc["kind"], shipped["kind"]);
        }
        let files = outputs(&pki, "hl", "ops", Some("hl-tls"), true).unwrap();
        let names: Vec<_> = files.iter().map(|(n, _)| *n).collect();
        assert!(names.contains(&"secret.yaml") && names.contains(&"webhook-configuration.yaml"));
        let both = &files
            .iter()
            .find(|(n, _)| *n == "webhook-configuration.yaml")
            .unwrap()
            .1;
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(both).unwrap();
        let kinds: Vec<_> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "ValidatingWebhookConfiguration",
                "MutatingWebhookConfiguration",
                "MutatingWebhookConfiguration"
            ]
        );
        // The author webhook: every release Secret write, in every namespace, at /stamp.
        let author = &docs[2];
        assert_eq!(author["metadata"]["name"], "helm-locker-author");
        assert_eq!(
            author["webhooks"][0]["clientConfig"]["service"]["path"],
            "/stamp"
        );
        assert_eq!(
            author["webhooks"][0]["clientConfig"]["service"]["namespace"],
            "ops"
        );
        assert!(author["webhooks"][0].get("namespaceSelector").is_none());
        assert_eq!(
            author["webhooks"][0]["objectSelector"]["matchLabels"]["owner"],
            "helm"
        );
        let only = outputs(&pki, "hl", "ops", None, false).unwrap();
        assert!(!only.iter().any(|(n, _)| *n == "secret.yaml"));
    }

    /// The file certs-gen writes for a 1.28+ cluster gives every webhook the chart's conditions;
    /// for an older cluster, or when the version is not given, none (1.20 to 1.27 API servers
    /// do not know the field).
    #[test]
    fn match_conditions_are_written_from_1_28_on() {
        let pki = generate("t", &["t.ops.svc".into()], &Default::default()).unwrap();
        let shipped = match_conditions().unwrap();
        let names: Vec<_> = shipped
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "helm-locker.io/stored-object-carries-helms-annotations",
                "helm-locker.io/create-in-a-namespace-or-claiming-a-release",
                "helm-locker.io/not-the-control-plane"
            ]
        );
        let webhooks = |version| {
            let files = outputs_for(&pki, "hl", "ops", None, true, version).unwrap();
            let (_, yaml) = files
                .into_iter()
                .find(|(n, _)| *n == "webhook-configuration.yaml")
                .unwrap();
            let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&yaml).unwrap();
            docs.iter()
                .flat_map(|d| d["webhooks"].as_array().unwrap().clone())
                .collect::<Vec<_>>()
        };
        for version in [Some((1, 28)), Some((1, 36)), Some((2, 0))] {
            let all = webhooks(version);
            assert_eq!(all.len(), 4, "validate, validate-status, repair, author");
            for webhook in &all[..3] {
                assert_eq!(webhook["matchConditions"], shipped, "{version:?}");
            }
            // Every release Secret write must reach the author webhook.
            assert_eq!(all[3]["name"], "author.helm-locker.io");
            assert!(all[3].get("matchConditions").is_none(), "{version:?}");
        }
        for version in [None, Some((1, 20)), Some((1, 27))] {
            for webhook in webhooks(version) {
                assert!(webhook.get("matchConditions").is_none(), "{version:?}");
            }
        }
    }

    #[test]
    fn kube_versions_are_read_as_people_and_api_servers_write_them() {
        assert_eq!(parse_kube_version("1.28"), Ok((1, 28)));
        assert_eq!(parse_kube_version("v1.30.2"), Ok((1, 30)));
        assert_eq!(parse_kube_version("1.29.3-eks-4f4795d"), Ok((1, 29)));
        assert_eq!(parse_kube_version("v1.31+k3s1"), Ok((1, 31)));
        for bad in ["", "1", "banana", "v.28", "1.x"] {
            assert!(parse_kube_version(bad).is_err(), "{bad}");
        }
    }
}
