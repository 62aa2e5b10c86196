//! Self-managed serving certificate (`serve --self-managed-secret`): the server keeps its own
//! CA and certificate in a `kubernetes.io/tls` Secret, serves it from files (so the usual
//! reloading path applies) and keeps the `caBundle` of its webhook configurations current.
//!
//! - start: read the Secret; if absent, create it (two replicas may race: on AlreadyExists the
//!   other's Secret is read and used); if unusable, expiring or missing a name, replace it
//!   (with its resourceVersion: on Conflict the other replica's renewal is read and used).
//! - a renewal makes a new CA; `ca.crt` keeps the previous, still valid, CAs too, so replicas
//!   that still serve the previous certificate stay trusted until they pick up the new one.
//! - every round: write the Secret's PEMs to the serving folder when they changed, and patch
//!   the `caBundle` of each named Validating/MutatingWebhookConfiguration that differs.
//!
//! The decisions are pure functions below; the shell only reads and writes. Secret contents
//! are never logged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::Client;

/// What `--self-managed-secret` and its companion flags say.
#[derive(Clone, Debug)]
pub struct SelfManaged {
    /// The `kubernetes.io/tls` Secret holding the CA bundle, certificate and key.
    pub secret: String,
    /// Namespace of the Secret (the locker's own).
    pub namespace: String,
    /// Names the serving certificate must carry (the Service's DNS names, extras).
    pub names: Vec<String>,
    /// Validating and/or Mutating webhook configurations whose caBundle is kept current.
    pub webhook_configurations: Vec<String>,
    /// Where ca.crt, tls.crt and tls.key are written for serving.
    pub dir: PathBuf,
}

/// Renew when the serving certificate has less than this left (it lives a year).
const RENEW_BEFORE_SECONDS: i64 = 30 * 86400;
/// How often the Secret and the webhook configurations are re-checked.
const CHECK_INTERVAL: Duration = Duration::from_secs(300);
/// ...and while a webhook configuration is missing (Helm creates it after the Deployment).
const RETRY_INTERVAL: Duration = Duration::from_secs(10);
const FIELD_MANAGER: &str = "helm-locker";

/// The PEMs kept in the Secret: `ca` may hold several CA certificates (newest first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pems {
    pub ca: String,
    pub cert: String,
    pub key: String,
}

/// The PEMs of a Secret's data, if all three keys are there and are text.
pub(crate) fn pems_from_secret(data: &BTreeMap<String, ByteString>) -> Option<Pems> {
    let text = |key: &str| {
        data.get(key)
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
    };
    Some(Pems {
        ca: text("ca.crt")?,
        cert: text("tls.crt")?,
        key: text("tls.key")?,
    })
}

/// Why the PEMs must be replaced, or `None` when they can be served as they are.
pub(crate) fn replacement_reason(pems: &Pems, names: &[String], now: i64) -> Option<String> {
    let not_after = match certs_gen::expiry(pems.cert.as_bytes()) {
        Ok((_, not_after)) => not_after,
        Err(e) => return Some(format!("tls.crt is unusable ({e})")),
    };
    if not_after - now < RENEW_BEFORE_SECONDS {
        return Some("the certificate expires within 30 days".into());
    }
    let carried = certs_gen::names(pems.cert.as_bytes()).unwrap_or_default();
    if let Some(missing) = names.iter().find(|n| !carried.contains(n)) {
        return Some(format!("the certificate is not valid for {missing}"));
    }
    if crate::server::tls::check_pair(pems.cert.as_bytes(), pems.key.as_bytes()).is_err() {
        return Some("tls.key does not fit tls.crt".into());
    }
    if certificates(&pems.ca).is_empty() {
        return Some("ca.crt holds no certificate".into());
    }
    None
}

/// The PEM certificates in a bundle, each with its END line.
pub(crate) fn certificates(bundle: &str) -> Vec<String> {
    const END: &str = "-----END CERTIFICATE-----";
    bundle
        .split_inclusive(END)
        .filter_map(|part| {
            let start = part.find("-----BEGIN CERTIFICATE-----")?;
            part.ends_with(END).then(|| format!("{}\n", &part[start..]))
        })
        .collect()
}

/// The CA bundle after a renewal: the new CA first, then the previous CAs that have not
/// expired (at most two), so certificates they signed stay trusted while replicas switch.
pub(crate) fn renewed_bundle(new_ca: &str, previous: Option<&str>, now: i64) -> String {
    let mut bundle = new_ca.to_string();
    if !bundle.ends_with('\n') {
        bundle.push('\n');
    }
    let old = previous.map(certificates).unwrap_or_default();
    let still_valid = old.into_iter().filter(|ca| {
        certs_gen::expiry(ca.as_bytes()).is_ok_and(|(_, not_after)| not_after > now)
            && ca.trim() != new_ca.trim()
    });
    for ca in still_valid.take(2) {
        bundle.push_str(&ca);
    }
    bundle
}

/// A JSON Patch that sets every webhook's `clientConfig.caBundle` of a webhook configuration
/// (as JSON) to `bundle_b64`, or `None` when all already carry it. The patch first tests the
/// resourceVersion, so it never applies to a list that changed since it was read.
pub(crate) fn ca_bundle_patch(
    config: &serde_json::Value,
    bundle_b64: &str,
) -> Option<serde_json::Value> {
    let webhooks = config.get("webhooks")?.as_array()?;
    let mut ops = Vec::new();
    for (i, webhook) in webhooks.iter().enumerate() {
        let current = webhook.pointer("/clientConfig/caBundle");
        if current.and_then(|v| v.as_str()) != Some(bundle_b64) {
            ops.push(serde_json::json!({
                "op": "add",
                "path": format!("/webhooks/{i}/clientConfig/caBundle"),
                "value": bundle_b64,
            }));
        }
    }
    if ops.is_empty() {
        return None;
    }
    let version = config.pointer("/metadata/resourceVersion")?.clone();
    ops.insert(
        0,
        serde_json::json!({"op": "test", "path": "/metadata/resourceVersion", "value": version}),
    );
    Some(serde_json::Value::Array(ops))
}

/// Why a round of the self-managed certificate failed; the API server's error is its cause.
#[derive(Debug, thiserror::Error)]
pub enum SelfManagedError {
    #[error("cannot generate a certificate: {0}")]
    Generate(String),
    #[error("{what}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("{what} keeps changing under us; retrying later")]
    Contended { what: String },
    #[error("{what}: {reason}")]
    Unreadable { what: String, reason: String },
    #[error("cannot write the serving files to {dir}")]
    Files {
        dir: String,
        #[source]
        source: std::io::Error,
    },
}

fn generate(
    names: &[String],
    previous_ca: Option<&str>,
    now: i64,
) -> Result<Pems, SelfManagedError> {
    let pki = certs_gen::generate("helm-locker", names, &Default::default())
        .map_err(|e| SelfManagedError::Generate(e.to_string()))?;
    Ok(Pems {
        ca: renewed_bundle(&pki.ca_pem, previous_ca, now),
        cert: pki.cert_pem,
        key: pki.key_pem,
    })
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

fn secret_of(settings: &SelfManaged, pems: &Pems, resource_version: Option<String>) -> Secret {
    let data = [
        ("ca.crt", &pems.ca),
        ("tls.crt", &pems.cert),
        ("tls.key", &pems.key),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
    .collect();
    Secret {
        metadata: ObjectMeta {
            name: Some(settings.secret.clone()),
            namespace: Some(settings.namespace.clone()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_string(),
                "helm-locker".to_string(),
            )])),
            resource_version,
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data),
        ..Default::default()
    }
}

fn api_error(what: &str, source: kube::Error) -> SelfManagedError {
    SelfManagedError::Api {
        what: what.to_string(),
        source,
    }
}

/// Reads the Secret, creating or renewing it when needed; returns the PEMs to serve.
pub(crate) async fn ensure_secret(
    client: &Client,
    settings: &SelfManaged,
) -> Result<Pems, SelfManagedError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &settings.namespace);
    let what = format!("Secret {}/{}", settings.namespace, settings.secret);
    let post = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    // Two rounds: the second reads what a racing replica wrote.
    for _ in 0..2 {
        let existing = api
            .get_opt(&settings.secret)
            .await
            .map_err(|e| api_error(&what, e))?;
        let Some(existing) = existing else {
            let pems = generate(&settings.names, None, now())?;
            match api.create(&post, &secret_of(settings, &pems, None)).await {
                Ok(_) => {
                    tracing::info!(secret = %what, "created the self-managed serving certificate");
                    return Ok(pems);
                }
                Err(kube::Error::Api(s)) if s.is_already_exists() => continue,
                Err(e) => return Err(api_error(&format!("cannot create {what}"), e)),
            }
        };
        let current = existing.data.as_ref().and_then(pems_from_secret);
        let reason = match &current {
            Some(pems) => replacement_reason(pems, &settings.names, now()),
            None => Some("it lacks ca.crt, tls.crt or tls.key".into()),
        };
        let Some(reason) = reason else {
            return Ok(current.expect("usable PEMs have no replacement reason"));
        };
        let previous_ca = current.as_ref().map(|p| p.ca.as_str());
        let pems = generate(&settings.names, previous_ca, now())?;
        let version = existing.metadata.resource_version.clone();
        match api
            .replace(
                &settings.secret,
                &post,
                &secret_of(settings, &pems, version),
            )
            .await
        {
            Ok(_) => {
                tracing::info!(secret = %what, %reason, "renewed the self-managed serving certificate");
                return Ok(pems);
            }
            Err(kube::Error::Api(s)) if s.is_conflict() => continue,
            Err(e) => return Err(api_error(&format!("cannot update {what} ({reason})"), e)),
        }
    }
    Err(SelfManagedError::Contended { what })
}

/// Writes the PEMs for serving when they differ from what is there (beside, then renamed,
/// key last-but-readable only by us). Returns whether anything changed.
pub(crate) fn write_files(dir: &Path, pems: &Pems) -> std::io::Result<bool> {
    std::fs::create_dir_all(dir)?;
    let mut changed = false;
    // The key first: the reloader keeps the previous pair until both fit together.
    for (name, text) in [
        ("tls.key", &pems.key),
        ("tls.crt", &pems.cert),
        ("ca.crt", &pems.ca),
    ] {
        let path = dir.join(name);
        if std::fs::read_to_string(&path).is_ok_and(|old| &old == text) {
            continue;
        }
        let temporary = dir.join(format!(".{name}.new"));
        std::fs::write(&temporary, text)?;
        #[cfg(unix)]
        if name == "tls.key" {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))?;
        }
        std::fs::rename(&temporary, &path)?;
        changed = true;
    }
    Ok(changed)
}

async fn patch_one<K>(
    api: Api<K>,
    kind: &str,
    name: &str,
    bundle_b64: &str,
) -> Result<bool, SelfManagedError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    // The patch tests the resourceVersion it was computed from: when another replica (two start
    // together) or anyone else wrote the configuration meanwhile, the API server refuses it
    // (422 for the failed test, 409 for a conflict) and it is computed again from a fresh read,
    // which usually finds the bundle already there (found on a real node: the loser exited).
    const ATTEMPTS: usize = 5;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let Some(config) = api
            .get_opt(name)
            .await
            .map_err(|e| api_error(&format!("{kind} {name}"), e))?
        else {
            return Ok(false);
        };
        let unreadable = |e: serde_json::Error| SelfManagedError::Unreadable {
            what: format!("{kind} {name}"),
            reason: e.to_string(),
        };
        let json = serde_json::to_value(&config).map_err(unreadable)?;
        let Some(patch) = ca_bundle_patch(&json, bundle_b64) else {
            return Ok(true);
        };
        let patch: json_patch::Patch = serde_json::from_value(patch).map_err(unreadable)?;
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        match api.patch(name, &params, &Patch::<()>::Json(patch)).await {
            Ok(_) => {
                tracing::info!(kind, name, "caBundle updated");
                return Ok(true);
            }
            Err(kube::Error::Api(e)) if is_concurrent_write(e.code) && attempt < ATTEMPTS => {
                tracing::debug!(
                    kind,
                    name,
                    code = e.code,
                    "caBundle written meanwhile; reading again"
                );
            }
            Err(e) => {
                return Err(api_error(
                    &format!("cannot patch the caBundle of {kind} {name}"),
                    e,
                ))
            }
        }
    }
}

/// A write refused because the object changed since it was read: a JSON patch's failed `test`
/// (422) or a resourceVersion conflict (409).
fn is_concurrent_write(code: u16) -> bool {
    matches!(code, 409 | 422)
}

/// Puts `ca` as the caBundle of every named webhook configuration (of either kind). Returns
/// the names found under neither kind.
pub(crate) async fn ensure_ca_bundles(
    client: &Client,
    names: &[String],
    ca: &str,
) -> Result<Vec<String>, SelfManagedError> {
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca);
    let mut missing = Vec::new();
    for name in names {
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
        let found_v =
            patch_one(validating, "ValidatingWebhookConfiguration", name, &bundle).await?;
        let found_m = patch_one(mutating, "MutatingWebhookConfiguration", name, &bundle).await?;
        if !found_v && !found_m {
            missing.push(name.clone());
        }
    }
    Ok(missing)
}

/// One round: the Secret (created or renewed when needed), the serving files, the caBundles.
/// Returns whether every webhook configuration was found.
pub(crate) async fn reconcile(
    client: &Client,
    settings: &SelfManaged,
) -> Result<bool, SelfManagedError> {
    let pems = ensure_secret(client, settings).await?;
    let written = write_files(&settings.dir, &pems).map_err(|source| SelfManagedError::Files {
        dir: settings.dir.display().to_string(),
        source,
    })?;
    if written {
        tracing::info!(dir = %settings.dir.display(), "serving certificate files written");
    }
    let missing = ensure_ca_bundles(client, &settings.webhook_configurations, &pems.ca).await?;
    if !missing.is_empty() {
        tracing::info!(?missing, "webhook configuration not found yet; will retry");
    }
    Ok(missing.is_empty())
}

/// Re-checks forever (renewals, a replica's renewal, webhook configurations recreated).
pub(crate) async fn run(client: Client, settings: SelfManaged) {
    let mut complete = true;
    loop {
        tokio::time::sleep(if complete {
            CHECK_INTERVAL
        } else {
            RETRY_INTERVAL
        })
        .await;
        complete = match reconcile(&client, &settings).await {
            Ok(all_found) => all_found,
            Err(e) => {
                let cause = std::error::Error::source(&e).map(ToString::to_string);
                tracing::warn!(error = %e, cause = ?cause, "self-managed certificate check failed; will retry");
                false
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pems(names: &[&str], days: i64) -> (Pems, String) {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let pki = certs_gen::generate(
            "t",
            &names,
            &certs_gen::Validity {
                ca_days: 3650,
                leaf_days: days,
            },
        )
        .unwrap();
        (
            Pems {
                ca: pki.ca_pem.clone(),
                cert: pki.cert_pem,
                key: pki.key_pem,
            },
            pki.ca_pem,
        )
    }

    #[test]
    fn a_fresh_certificate_is_kept_and_a_stale_one_replaced() {
        let names = vec!["hl.ops.svc".to_string(), "hl".to_string()];
        let (good, _) = pems(&["hl.ops.svc", "hl"], 365);
        assert_eq!(replacement_reason(&good, &names, now()), None);
        let (soon, _) = pems(&["hl.ops.svc", "hl"], 10);
        assert!(replacement_reason(&soon, &names, now())
            .unwrap()
            .contains("expires"));
        let (other, _) = pems(&["hl.other.svc"], 365);
        assert_eq!(
            replacement_reason(&other, &names, now()).unwrap(),
            "the certificate is not valid for hl.ops.svc"
        );
        let mismatched = Pems {
            key: other.key.clone(),
            ..good.clone()
        };
        assert!(replacement_reason(&mismatched, &names, now())
            .unwrap()
            .contains("does not fit"));
        let garbage = Pems {
            cert: "nope".into(),
            ..good.clone()
        };
        assert!(replacement_reason(&garbage, &names, now())
            .unwrap()
            .contains("unusable"));
        let no_ca = Pems {
            ca: String::new(),
            ..good
        };
        assert!(replacement_reason(&no_ca, &names, now()).is_some());
    }

    #[test]
    fn secret_data_needs_all_three_pems() {
        let (p, _) = pems(&["a"], 365);
        let mut data: BTreeMap<String, ByteString> =
            [("ca.crt", &p.ca), ("tls.crt", &p.cert), ("tls.key", &p.key)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect();
        assert_eq!(pems_from_secret(&data), Some(p));
        data.remove("tls.key");
        assert_eq!(pems_from_secret(&data), None);
    }

    #[test]
    fn a_renewed_bundle_puts_the_new_ca_first_and_keeps_valid_previous_ones() {
        let (_, ca1) = pems(&["a"], 365);
        let (_, ca2) = pems(&["a"], 365);
        let (_, ca3) = pems(&["a"], 365);
        let (_, ca4) = pems(&["a"], 365);
        let once = renewed_bundle(&ca2, Some(&ca1), now());
        assert_eq!(certificates(&once), [ca2.clone(), ca1.clone()]);
        let twice = renewed_bundle(&ca3, Some(&once), now());
        assert_eq!(certificates(&twice), [ca3.clone(), ca2.clone(), ca1]);
        // At most two previous CAs; an expired CA (as seen ten years on) is dropped.
        let thrice = renewed_bundle(&ca4, Some(&twice), now());
        assert_eq!(certificates(&thrice).len(), 3);
        let later = now() + 3651 * 86400;
        assert_eq!(
            certificates(&renewed_bundle(&ca4, Some(&twice), later)),
            [ca4]
        );
        assert_eq!(certificates(&renewed_bundle(&ca2, None, now())), [ca2]);
    }

    #[test]
    fn ca_bundle_patch_touches_only_webhooks_that_differ_and_tests_the_version() {
        let config = serde_json::json!({
            "metadata": {"name": "hl", "resourceVersion": "42"},
            "webhooks": [
                {"name": "a", "clientConfig": {"caBundle": "Q0E="}},
                {"name": "b", "clientConfig": {"service": {"name": "hl"}}},
            ]
        });
        let patch = ca_bundle_patch(&config, "Q0E=").unwrap();
        assert_eq!(
            patch,
            serde_json::json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
                {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": "Q0E="},
            ])
        );
        let mut applied = config.clone();
        let parsed: json_patch::Patch = serde_json::from_value(patch).unwrap();
        json_patch::patch(&mut applied, &parsed).unwrap();
        assert_eq!(ca_bundle_patch(&applied, "Q0E="), None);
        assert_eq!(ca_bundle_patch(&serde_json::json!({}), "Q0E="), None);
    }

    #[test]
    fn files_are_written_once_and_the_key_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let (p, _) = pems(&["a"], 365);
        assert!(write_files(dir.path(), &p).unwrap());
        assert!(!write_files(dir.path(), &p).unwrap());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("tls.crt")).unwrap(),
            p.cert
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("tls.key"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (q, _) = pems(&["a"], 365);
        assert!(write_files(dir.path(), &q).unwrap());
        assert!(crate::server::tls::load_certified_key(
            &dir.path().join("tls.crt"),
            &dir.path().join("tls.key")
        )
        .is_ok());
    }
}
