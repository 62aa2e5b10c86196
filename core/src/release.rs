//! Helm's release storage format: a release Secret -> [`Release`].
//!
//! `data.release` is base64 (the Secret encoding) of base64 (Helm's) of gzip of JSON; Helm reads
//! the payload as plain JSON when it does not start with the gzip magic `1f 8b 08`. Helm's
//! ConfigMap driver stores the same Helm layer as a ConfigMap's plain string ([`Driver`]). Errors name
//! what is wrong and never quote the payload: release Secrets carry chart values.

use crate::author::{Authorship, Unknown};
pub use crate::driver::Driver;
use crate::driver::Payload;
pub use crate::limits::{
    max_namespace_objects, max_release_bytes, max_release_objects, set_max_namespace_objects,
    set_max_release_bytes, set_max_release_objects, DEFAULT_MAX_NAMESPACE_OBJECTS,
    DEFAULT_MAX_RELEASE_BYTES, DEFAULT_MAX_RELEASE_OBJECTS,
};
use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;

use base64::Engine;
use serde::Deserialize;
use serde_json::Value;

/// A release's identity: the namespace and name Helm gives it (what its objects' `meta.helm.sh`
/// annotations name), and where its Secrets are when that is another namespace.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReleaseKey {
    pub namespace: String,
    pub name: String,
    /// The namespace its Secrets are stored in, when not the release's own: Flux's
    /// helm-controller keeps a release of `spec.targetNamespace` in the HelmRelease's namespace
    /// (`spec.storageNamespace`), so its objects are in one namespace and its Secrets in
    /// another. `None` for Helm's usual layout. Two releases of one namespace and name stored
    /// in two places are two releases; the one stored in its own namespace sorts first.
    pub stored_in: Option<String>,
}

impl ReleaseKey {
    /// A release stored in its own namespace.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ReleaseKey {
            namespace: namespace.into(),
            name: name.into(),
            stored_in: None,
        }
    }

    /// A release of `namespace` whose Secrets are in `storage`.
    pub fn stored(
        namespace: impl Into<String>,
        name: impl Into<String>,
        storage: impl Into<String>,
    ) -> Self {
        let (namespace, storage) = (namespace.into(), storage.into());
        ReleaseKey {
            stored_in: (storage != namespace && !storage.is_empty()).then_some(storage),
            namespace,
            name: name.into(),
        }
    }

    /// The namespace the release's Secrets are in.
    pub fn storage_namespace(&self) -> &str {
        self.stored_in.as_deref().unwrap_or(&self.namespace)
    }

    /// Whether `other` names the same Helm release (namespace and name), wherever either is
    /// stored: how an object's annotations, a LockException and a registration name a release.
    pub fn is(&self, other: &ReleaseKey) -> bool {
        self.namespace == other.namespace && self.name == other.name
    }
}

impl fmt::Display for ReleaseKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)?;
        if let Some(storage) = &self.stored_in {
            write!(f, " (stored in {storage})")?;
        }
        Ok(())
    }
}

/// The release an object's annotations name (`meta.helm.sh/release-name` and `-namespace`,
/// which Helm writes on every object it creates or adopts), if both are there.
pub fn annotated_release_key(
    annotations: &std::collections::BTreeMap<String, String>,
) -> Option<ReleaseKey> {
    Some(ReleaseKey::new(
        annotations
            .get(crate::ownership::RELEASE_NAMESPACE_ANNOTATION)?
            .clone(),
        annotations
            .get(crate::ownership::RELEASE_NAME_ANNOTATION)?
            .clone(),
    ))
}

/// The release a live object (JSON) names in its annotations.
pub fn live_owner(object: &serde_json::Value) -> Option<ReleaseKey> {
    let annotations = object.pointer("/metadata/annotations")?;
    let text = |key: &str| annotations.get(key)?.as_str().map(str::to_string);
    Some(ReleaseKey::new(
        text(crate::ownership::RELEASE_NAMESPACE_ANNOTATION)?,
        text(crate::ownership::RELEASE_NAME_ANNOTATION)?,
    ))
}

/// The documents of `manifest` that hold something (not empty, not only comments), counted
/// without parsing them: what the index would parse into objects, one each (a `List` is one
/// document here and its items are bounded when it is parsed, [`crate::manifest`]).
pub fn manifest_documents(manifest: &str) -> usize {
    crate::manifest::split_documents(manifest)
        .filter(|doc| {
            doc.lines()
                .any(|l| !(l.trim().is_empty() || l.trim_start().starts_with('#')))
        })
        .count()
}

/// Release notes kept of a decoded revision (the rest is cut, on a character boundary): notes
/// are shown, never read for a decision, and a tenant's release must not keep megabytes of
/// them in every replica for as long as it is the newest.
pub const NOTES_KEPT_BYTES: usize = 64 * 1024;
const GZIP_MAGIC: [u8; 3] = [0x1f, 0x8b, 0x08];

/// Helm's release statuses (`helm.sh/helm/v3/pkg/release/status.go`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    Unknown,
    Deployed,
    Uninstalled,
    Superseded,
    Failed,
    Uninstalling,
    PendingInstall,
    PendingUpgrade,
    PendingRollback,
}

impl Status {
    pub const ALL: [Status; 9] = [
        Status::Unknown,
        Status::Deployed,
        Status::Uninstalled,
        Status::Superseded,
        Status::Failed,
        Status::Uninstalling,
        Status::PendingInstall,
        Status::PendingUpgrade,
        Status::PendingRollback,
    ];

    /// Unknown strings are kept as [`Status::Unknown`], as Helm does.
    pub fn parse(s: &str) -> Status {
        Status::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .unwrap_or(Status::Unknown)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Unknown => "unknown",
            Status::Deployed => "deployed",
            Status::Uninstalled => "uninstalled",
            Status::Superseded => "superseded",
            Status::Failed => "failed",
            Status::Uninstalling => "uninstalling",
            Status::PendingInstall => "pending-install",
            Status::PendingUpgrade => "pending-upgrade",
            Status::PendingRollback => "pending-rollback",
        }
    }

    /// A release whose newest revision has this status is locked: `deployed`, or `failed`
    /// (Helm stopped part-way: what the failed revision sets is what Helm applied or was about
    /// to, and the last deployed revision's objects were Helm's either way, so the release
    /// stays locked until a `helm upgrade` or `helm rollback`, each pending while it works,
    /// succeeds).
    pub fn locks(self) -> bool {
        matches!(self, Status::Deployed | Status::Failed)
    }

    /// Helm is changing the release right now: its objects must be open.
    pub fn is_helm_at_work(self) -> bool {
        matches!(
            self,
            Status::PendingInstall
                | Status::PendingUpgrade
                | Status::PendingRollback
                | Status::Uninstalling
        )
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A hook: run by Helm at a lifecycle event, never part of the release's locked objects.
#[derive(Clone, Debug, PartialEq)]
pub struct Hook {
    pub name: String,
    pub kind: String,
    pub manifest: String,
}

/// One revision of a Helm release.
#[derive(Clone, Debug, PartialEq)]
pub struct Release {
    pub name: String,
    pub namespace: String,
    pub revision: u64,
    pub status: Status,
    pub description: String,
    pub notes: String,
    pub chart: String,
    /// Helm 4: `ssa` (server-side apply) or `csa` (client-side); absent in Helm 3 releases.
    pub apply_method: Option<String>,
    pub manifest: String,
    pub hooks: Vec<Hook>,
}

/// Which base64 layer failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    Secret,
    Helm,
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("data.release is not base64 ({} encoding layer)", match .0 { Layer::Secret => "Secret", Layer::Helm => "Helm's" })]
    NotBase64(Layer),
    #[error("release payload has the gzip magic but does not decompress ({0})")]
    NotGzip(String),
    #[error("release payload is larger than {limit} bytes once decompressed (--max-release-bytes); not decompressed further")]
    TooLarge { limit: u64 },
    #[error("release renders {objects} objects (manifest documents and hooks), more than {limit} (--max-release-objects); not indexed")]
    TooManyObjects { objects: usize, limit: u64 },
    #[error("release payload is not JSON ({0})")]
    NotJson(String),
    #[error("release JSON is missing field `{0}`")]
    MissingField(&'static str),
}

/// Describes a JSON error by category and position only: serde_json's messages can quote
/// values, and release payloads hold chart values and Secrets.
pub(crate) fn describe_json_error(e: &serde_json::Error) -> String {
    let what = match e.classify() {
        serde_json::error::Category::Io => "read error",
        serde_json::error::Category::Syntax => "syntax error",
        serde_json::error::Category::Data => "unexpected type",
        serde_json::error::Category::Eof => "unexpected end",
    };
    format!("{what} at line {} column {}", e.line(), e.column())
}

/// Decodes the value of a Secret's `data.release` (both base64 layers).
pub fn decode_data_release(value: &str) -> Result<Release, DecodeError> {
    let helm_layer =
        decode_base64(value.as_bytes()).ok_or(DecodeError::NotBase64(Layer::Secret))?;
    decode_helm_payload(&helm_layer)
}

/// Decodes Helm's own encoding: base64 of (optionally gzipped) JSON.
pub fn decode_helm_payload(helm_base64: &[u8]) -> Result<Release, DecodeError> {
    decode_release_json(&helm_payload_json(helm_base64)?)
}

/// The release JSON inside Helm's encoding, at most [`max_release_bytes`] of it.
pub(crate) fn helm_payload_json(helm_base64: &[u8]) -> Result<Vec<u8>, DecodeError> {
    helm_payload_json_within(helm_base64, max_release_bytes())
}

/// [`helm_payload_json`] with the limit given: the release JSON, or [`DecodeError::TooLarge`]
/// when it is longer than `limit` bytes (decompressed or not).
pub fn helm_payload_json_within(helm_base64: &[u8], limit: u64) -> Result<Vec<u8>, DecodeError> {
    let bytes = decode_base64(helm_base64).ok_or(DecodeError::NotBase64(Layer::Helm))?;
    if bytes.starts_with(&GZIP_MAGIC) {
        gunzip_within(&bytes, limit)
    } else if bytes.len() as u64 > limit {
        Err(DecodeError::TooLarge { limit })
    } else {
        Ok(bytes)
    }
}

/// Decompresses `gzip`, bounded before it is decoded: never more than `limit` bytes are
/// decompressed into memory, and a payload longer than that is [`DecodeError::TooLarge`]
/// without holding more than `limit + 1` bytes of it. The size the gzip trailer claims
/// (`ISIZE`, the size modulo 2^32, which flate2 checks at the end of the stream) is read
/// first: over the limit, the payload is refused undecompressed; else it sizes the buffer. A
/// payload that writes more than it claims is counted, decompressed into nothing, so a lying
/// trailer cannot make the buffer grow past the limit either (it ends as an error).
pub fn gunzip_within(gzip: &[u8], limit: u64) -> Result<Vec<u8>, DecodeError> {
    let not_gzip = |e: std::io::Error| DecodeError::NotGzip(e.kind().to_string());
    // A header (10 bytes) and a trailer (8) at least, else there is no trailer to read.
    let claimed = match gzip.len().checked_sub(4).and_then(|at| gzip.get(at..)) {
        Some(&[a, b, c, d]) if gzip.len() >= 18 => u64::from(u32::from_le_bytes([a, b, c, d])),
        _ => 0,
    };
    // A single-member gzip (what Helm writes) is at least as long as its trailer says: a
    // claim over the limit is refused before anything is decompressed.
    if claimed > limit {
        return Err(DecodeError::TooLarge { limit });
    }
    // Deflate writes at most 1032 bytes per byte read: a larger claim is a lie.
    let first = claimed.min(gzip.len() as u64 * 1032);
    let mut out = Vec::with_capacity(usize::try_from(first).unwrap_or(0));
    let mut decoder = flate2::read::GzDecoder::new(gzip);
    (&mut decoder)
        .take(first.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(not_gzip)?;
    if out.len() as u64 <= first {
        return Ok(out);
    }
    if out.len() as u64 > limit {
        return Err(DecodeError::TooLarge { limit });
    }
    // More than the trailer claims and not yet over the limit: count the rest.
    let read = out.len() as u64;
    drop(out);
    let rest = std::io::copy(
        &mut (&mut decoder).take(limit.saturating_add(1) - read),
        &mut std::io::sink(),
    )
    .map_err(not_gzip)?;
    let total = read + rest;
    if total > limit {
        return Err(DecodeError::TooLarge { limit });
    }
    let mut out = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    flate2::read::GzDecoder::new(gzip)
        .take(total)
        .read_to_end(&mut out)
        .map_err(not_gzip)?;
    Ok(out)
}

pub(crate) fn decode_base64(input: &[u8]) -> Option<Vec<u8>> {
    let engine = &base64::engine::general_purpose::STANDARD;
    match engine.decode(input) {
        Ok(bytes) => Some(bytes),
        Err(_) => {
            // Wrapped or indented input (a pasted value): ignore ASCII whitespace.
            let compact: Vec<u8> = input
                .iter()
                .copied()
                .filter(|b| !b.is_ascii_whitespace())
                .collect();
            engine.decode(compact).ok()
        }
    }
}

#[derive(Deserialize)]
struct RawRelease {
    name: Option<String>,
    namespace: Option<String>,
    version: Option<i64>,
    info: Option<RawInfo>,
    chart: Option<RawChart>,
    manifest: Option<String>,
    #[serde(default)]
    hooks: Option<Vec<RawHook>>,
    apply_method: Option<String>,
}

#[derive(Deserialize)]
struct RawInfo {
    status: Option<String>,
    description: Option<String>,
    notes: Option<String>,
}

#[derive(Deserialize)]
struct RawChart {
    metadata: Option<RawChartMetadata>,
}

#[derive(Deserialize)]
pub(crate) struct RawChartMetadata {
    pub(crate) name: Option<String>,
    version: Option<String>,
}

#[derive(Deserialize)]
struct RawHook {
    name: Option<String>,
    kind: Option<String>,
    manifest: Option<String>,
}

/// Decodes the release JSON itself, at most [`max_release_objects`] objects of it.
pub fn decode_release_json(json: &[u8]) -> Result<Release, DecodeError> {
    decode_release_json_within(json, max_release_objects())
}

/// [`decode_release_json`] with the limit on objects given: a release whose manifest
/// documents and hooks are more than `max_objects` is [`DecodeError::TooManyObjects`].
pub fn decode_release_json_within(json: &[u8], max_objects: u64) -> Result<Release, DecodeError> {
    let raw: RawRelease =
        serde_json::from_slice(json).map_err(|e| DecodeError::NotJson(describe_json_error(&e)))?;
    let info = raw.info.ok_or(DecodeError::MissingField("info"))?;
    let revision = raw.version.ok_or(DecodeError::MissingField("version"))?;
    let chart = raw
        .chart
        .and_then(|c| c.metadata)
        .map(|m| {
            format!(
                "{}-{}",
                m.name.unwrap_or_default(),
                m.version.unwrap_or_default()
            )
        })
        .unwrap_or_default();
    // Bounded in objects before any is parsed: counting documents is a scan of the text.
    let manifest = raw.manifest.unwrap_or_default();
    let objects = manifest_documents(&manifest) + raw.hooks.as_ref().map_or(0, Vec::len);
    if objects as u64 > max_objects {
        return Err(DecodeError::TooManyObjects {
            objects,
            limit: max_objects,
        });
    }
    Ok(Release {
        name: raw
            .name
            .filter(|n| !n.is_empty())
            .ok_or(DecodeError::MissingField("name"))?,
        namespace: raw.namespace.unwrap_or_default(),
        revision: u64::try_from(revision).map_err(|_| DecodeError::MissingField("version"))?,
        status: Status::parse(
            info.status
                .as_deref()
                .ok_or(DecodeError::MissingField("info.status"))?,
        ),
        description: info.description.unwrap_or_default(),
        notes: kept_notes(info.notes.unwrap_or_default()),
        chart,
        apply_method: raw.apply_method.filter(|m| !m.is_empty()),
        manifest,
        hooks: raw
            .hooks
            .unwrap_or_default()
            .into_iter()
            .map(|h| Hook {
                name: h.name.unwrap_or_default(),
                kind: h.kind.unwrap_or_default(),
                manifest: h.manifest.unwrap_or_default(),
            })
            .collect(),
    })
}

/// `notes` cut to [`NOTES_KEPT_BYTES`], on a character boundary, its storage given back.
fn kept_notes(mut notes: String) -> String {
    if notes.len() > NOTES_KEPT_BYTES {
        let mut end = NOTES_KEPT_BYTES;
        while !notes.is_char_boundary(end) {
            end -= 1;
        }
        notes.truncate(end);
        notes.shrink_to_fit();
    }
    notes
}

/// Where a release revision is stored: the object's namespace and name, and which kind it is
/// ([`Driver`]): a Secret and a ConfigMap of one namespace and name are two places.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SecretRef {
    pub namespace: String,
    pub name: String,
    pub driver: Driver,
}

impl SecretRef {
    /// A revision stored in a Secret (Helm's default driver).
    pub fn secret(namespace: impl Into<String>, name: impl Into<String>) -> SecretRef {
        SecretRef {
            namespace: namespace.into(),
            name: name.into(),
            driver: Driver::Secret,
        }
    }

    /// A revision stored in a ConfigMap (`HELM_DRIVER=configmap`).
    pub fn config_map(namespace: impl Into<String>, name: impl Into<String>) -> SecretRef {
        SecretRef {
            namespace: namespace.into(),
            name: name.into(),
            driver: Driver::ConfigMap,
        }
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)?;
        if self.driver != Driver::default() {
            write!(f, " ({})", self.driver.kind())?;
        }
        Ok(())
    }
}

/// A decoded release Secret.
#[derive(Clone, Debug, PartialEq)]
pub struct ReleaseSecret {
    pub secret: SecretRef,
    pub labels: BTreeMap<String, String>,
    pub release: Release,
    /// Who wrote the Secret last ([`crate::author`]); set by the source that read it.
    pub author: Authorship,
    /// When the API server created the Secret (`metadata.creationTimestamp`, Unix seconds);
    /// `None` when not read from the API server.
    pub created: Option<i64>,
    /// Its author was asked, and may keep the release with the release's driver: a revision of
    /// the other driver that counts ([`crate::release_driver`]). `false` until asked: the index then
    /// refuses it beside revisions of the release's driver and asks for the release again.
    pub counts_beside: bool,
}

impl ReleaseSecret {
    /// The release this Secret holds a revision of, with where it is stored.
    pub fn key(&self) -> ReleaseKey {
        ReleaseKey::stored(
            &self.release.namespace,
            &self.release.name,
            &self.secret.namespace,
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("not a Helm release Secret (kind {kind:?}, type {secret_type:?})")]
    NotAReleaseSecret { kind: String, secret_type: String },
    #[error("Secret has no data.release")]
    NoReleaseData,
    /// The release JSON names another namespace than the Secret's own, and its author may not
    /// speak for that namespace ([`crate::storage`]): whoever may create Secrets in one
    /// namespace could otherwise lock another's objects.
    #[error("the release it holds is of namespace {release_namespace:?}, not the Secret's own, and {why}; ignored: a release stored in another namespace counts only when its author may create Secrets in the release's")]
    ForeignNamespace {
        release_namespace: String,
        why: String,
    },
    /// A revision kept by another driver than its release's ([`crate::release_driver`]), whose author
    /// could not have kept it in the release's driver: Helm reads a release from one driver, so
    /// whoever may write only the other kind could otherwise take the release over.
    #[error("the release {release} is kept in {release_driver}s, and {why}; ignored: a revision kept by another driver than its release's counts only when its author may create {release_driver}s in the release's namespace")]
    OtherDriver {
        release: String,
        release_driver: &'static str,
        why: String,
    },
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// One entry of a release file: a decoded Secret, or why a Secret could not be decoded
/// (by name only).
pub(crate) type SecretResult = Result<ReleaseSecret, (Option<SecretRef>, SecretError)>;

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("not valid JSON ({0})")]
    NotJson(String),
    #[error("not valid YAML{0}")]
    NotYaml(String),
    #[error("expected a Secret, a List of Secrets, or a data.release value")]
    UnexpectedShape,
}

/// Reads release Secrets as `kubectl get secret -o json|yaml` prints them: one Secret, a `List`,
/// several YAML documents, or the bare value of `data.release`.
pub fn parse_release_file(text: &str) -> Result<Vec<SecretResult>, FileError> {
    let mut out = Vec::new();
    each_release_secret(text, |secret| out.push(secret))?;
    Ok(out)
}

/// How many of a file's Secrets are decoded together, on every core, before `each` sees them.
const DECODED_TOGETHER: usize = 256;

/// [`parse_release_file`], handing each Secret to `each`, in the file's order, a part at a time
/// as it is decoded: a caller that keeps only part of each (the index keeps no manifest text)
/// never holds a file's worth of decoded releases. A part's Secrets are decoded on every core.
/// A document of another shape ends the file with an error after the Secrets before it.
pub fn each_release_secret(
    text: &str,
    mut each: impl FnMut(SecretResult),
) -> Result<(), FileError> {
    let docs = file_documents(text)?;
    let mut found = Vec::new();
    let shape = docs
        .iter()
        .try_for_each(|doc| collect_secrets(doc, &mut found));
    for part in found.chunks(DECODED_TOGETHER) {
        for secret in crate::parallel::map(part.to_vec(), 4, || (), |_, doc| decode_entry(doc)) {
            each(secret);
        }
    }
    shape
}

/// A release Secret's `data.release` value in a release file, undecoded.
pub struct ReleaseData {
    /// `None` for a bare `data.release` value.
    pub secret: Option<SecretRef>,
    /// As a Secret holds it (both base64 layers): a release ConfigMap's Helm layer is encoded
    /// once more, so every reader of a file reads one format.
    pub data: String,
}

/// Every release Secret's `data.release` in a release file, read once and not decoded.
pub fn release_data(text: &str) -> Vec<ReleaseData> {
    let mut out = Vec::new();
    let mut pending = file_documents(text).unwrap_or_default();
    while let Some(doc) = pending.pop() {
        match doc {
            Value::Object(mut map) => {
                if map.get("kind").and_then(Value::as_str) == Some("List") {
                    if let Some(Value::Array(items)) = map.remove("items") {
                        pending.extend(items);
                    }
                    continue;
                }
                let meta = map.get("metadata");
                let field = |f: &str| {
                    meta.and_then(|m| m.get(f))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                if let Some(data) = map
                    .get("data")
                    .and_then(|d| d.get("release"))
                    .and_then(Value::as_str)
                {
                    let driver = map
                        .get("kind")
                        .and_then(Value::as_str)
                        .and_then(Driver::of_kind)
                        .unwrap_or_default();
                    out.push(ReleaseData {
                        secret: Some(SecretRef {
                            driver,
                            ..SecretRef::secret(field("namespace"), field("name"))
                        }),
                        data: match driver.spec().payload {
                            Payload::Base64 => data.to_string(),
                            Payload::Text => base64::engine::general_purpose::STANDARD.encode(data),
                        },
                    });
                }
            }
            Value::String(data) => out.push(ReleaseData { secret: None, data }),
            _ => {}
        }
    }
    out
}

/// The documents of a release file: one JSON value, or YAML documents.
fn file_documents(text: &str) -> Result<Vec<Value>, FileError> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        Ok(vec![serde_json::from_str(trimmed).map_err(|e| {
            FileError::NotJson(describe_json_error(&e))
        })?])
    } else {
        let options = serde_saphyr::options! { with_snippet: false };
        serde_saphyr::from_multiple_with_options::<Value>(text, options)
            .map_err(|e| FileError::NotYaml(yaml_error_location(&e)))
    }
}

fn yaml_error_location(e: &serde_saphyr::Error) -> String {
    e.location()
        .map(|l| format!(" (line {} column {})", l.line(), l.column()))
        .unwrap_or_default()
}

/// The entries of a release file's document, undecoded: Secrets and bare `data.release`
/// values, the items of a `List` in order.
fn collect_secrets<'a>(doc: &'a Value, out: &mut Vec<&'a Value>) -> Result<(), FileError> {
    match doc {
        Value::Null => Ok(()),
        Value::String(_) => {
            out.push(doc);
            Ok(())
        }
        Value::Object(map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
            for item in map
                .get("items")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                collect_secrets(item, out)?;
            }
            Ok(())
        }
        Value::Object(_) => {
            out.push(doc);
            Ok(())
        }
        _ => Err(FileError::UnexpectedShape),
    }
}

/// Decodes one entry [`collect_secrets`] found.
fn decode_entry(entry: &Value) -> SecretResult {
    match entry {
        Value::String(data_release) => decode_data_release(data_release)
            .map(bare_secret)
            .map_err(|e| (None, e.into())),
        secret => decode_secret(secret),
    }
}

fn bare_secret(release: Release) -> ReleaseSecret {
    ReleaseSecret {
        secret: SecretRef::secret(
            release.namespace.clone(),
            format!("sh.helm.release.v1.{}.v{}", release.name, release.revision),
        ),
        labels: BTreeMap::new(),
        release,
        author: Authorship::Unknown(Unknown::NotRead),
        created: None,
        counts_beside: false,
    }
}

/// A release JSON without a namespace takes the Secret's. One naming another namespace keeps it:
/// the release is stored outside its own namespace (Flux's `storageNamespace`), and counts
/// only as [`crate::storage`] decides.
fn fill_namespace(release: &mut Release, secret_namespace: &str) {
    if release.namespace.is_empty() {
        release.namespace = secret_namespace.to_string();
    }
}

/// A release Secret as a Kubernetes client returns it: `data.release` already decoded from the
/// Secret's base64, so `helm_payload` is Helm's own layer.
pub fn release_secret_from_parts(
    secret: SecretRef,
    labels: BTreeMap<String, String>,
    helm_payload: &[u8],
) -> Result<ReleaseSecret, SecretError> {
    let mut release = decode_helm_payload(helm_payload)?;
    fill_namespace(&mut release, &secret.namespace);
    Ok(ReleaseSecret {
        secret,
        labels,
        release,
        author: Authorship::Unknown(Unknown::NotRead),
        created: None,
        counts_beside: false,
    })
}

/// Decodes one Secret object (as JSON), or one ConfigMap of Helm's ConfigMap driver (its
/// `data.release` is Helm's layer, without a Secret's base64).
pub fn decode_secret(secret: &Value) -> SecretResult {
    let text = |p: &str| {
        secret
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (kind, secret_type) = (text("/kind"), text("/type"));
    let of_kind = Driver::of_kind(&kind);
    let driver = of_kind.unwrap_or_default();
    let secret_ref = SecretRef {
        driver,
        ..SecretRef::secret(text("/metadata/namespace"), text("/metadata/name"))
    };
    let fail = |e: SecretError| Err((Some(secret_ref.clone()), e));
    // A ConfigMap has no type: one is a release when it carries one.
    let has_data = secret.pointer("/data/release").is_some();
    if !of_kind.is_some_and(|d| d.reads_as_revision(&secret_type, has_data)) {
        return fail(SecretError::NotAReleaseSecret { kind, secret_type });
    }
    let Some(data) = secret.pointer("/data/release").and_then(Value::as_str) else {
        return fail(SecretError::NoReleaseData);
    };
    let decoded = match driver.spec().payload {
        Payload::Base64 => decode_data_release(data),
        Payload::Text => decode_helm_payload(data.as_bytes()),
    };
    let mut release = match decoded {
        Ok(release) => release,
        Err(e) => return fail(e.into()),
    };
    fill_namespace(&mut release, &secret_ref.namespace);
    let labels = secret
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    Ok(ReleaseSecret {
        secret: secret_ref,
        labels,
        release,
        author: Authorship::Unknown(Unknown::NotRead),
        created: None,
        counts_beside: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn encode(json: &str, gzip: bool) -> String {
        let payload = if gzip {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(json.as_bytes()).unwrap();
            enc.finish().unwrap()
        } else {
            json.as_bytes().to_vec()
        };
        let b64 = base64::engine::general_purpose::STANDARD;
        b64.encode(b64.encode(payload))
    }

    const MINIMAL: &str = r#"{"name":"web","namespace":"shop","version":3,"info":{"status":"pending-upgrade","description":"Upgrading"},"manifest":"---\nkind: ConfigMap\n","hooks":[{"name":"h","kind":"Job","manifest":"kind: Job\n"}],"apply_method":"ssa"}"#;

    #[test]
    fn decodes_gzipped_and_plain_payloads_alike() {
        for gzip in [true, false] {
            let r = decode_data_release(&encode(MINIMAL, gzip)).unwrap();
            assert_eq!(
                (r.name.as_str(), r.namespace.as_str(), r.revision),
                ("web", "shop", 3)
            );
            assert_eq!(r.status, Status::PendingUpgrade);
            assert_eq!(r.apply_method.as_deref(), Some("ssa"));
            assert_eq!(r.hooks.len(), 1);
            assert_eq!(r.manifest, "---\nkind: ConfigMap\n");
        }
    }

    #[test]
    fn a_file_holds_release_config_maps_as_it_holds_secrets() {
        // `kubectl get configmap -o yaml` of Helm's ConfigMap driver: Helm's layer, plain.
        let secret_data = encode(MINIMAL, true);
        let b64 = base64::engine::general_purpose::STANDARD;
        let helm_layer = String::from_utf8(b64.decode(&secret_data).unwrap()).unwrap();
        let meta = |kind: &str, data: &str| {
            format!(
                "apiVersion: v1\nkind: {kind}\nmetadata:\n  name: sh.helm.release.v1.web.v3\n  namespace: shop\n  labels: {{owner: helm}}\ndata:\n  release: {data}\n"
            )
        };
        let text = format!(
            "{}---\n{}---\n{}",
            meta("ConfigMap", &helm_layer),
            meta("Secret", &secret_data),
            meta("FakeStore", &helm_layer)
        );
        let read: Vec<ReleaseSecret> = parse_release_file(&text)
            .unwrap()
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(read.len(), 3);
        // The tests' third driver is read by its spec alone.
        assert_eq!(read[2].secret.driver, Driver::Fake);
        assert_eq!(read[2].release, read[1].release);
        assert_eq!(
            read[0].secret,
            SecretRef::config_map("shop", "sh.helm.release.v1.web.v3")
        );
        assert_eq!(
            read[1].secret,
            SecretRef::secret("shop", "sh.helm.release.v1.web.v3")
        );
        assert_eq!(read[0].release, read[1].release);
        // Every entry's data as a Secret holds it, whichever kind it came from.
        let data = release_data(&text);
        assert!(data.iter().all(|d| d.data == secret_data));
        // A ConfigMap without a release, like any other kind, is no release.
        let empty = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\n";
        assert!(matches!(
            parse_release_file(empty).unwrap()[0],
            Err((_, SecretError::NotAReleaseSecret { .. }))
        ));
        let other = "apiVersion: v1\nkind: Service\nmetadata: {name: x}\n";
        assert!(matches!(
            parse_release_file(other).unwrap()[0],
            Err((_, SecretError::NotAReleaseSecret { .. }))
        ));
    }

    #[test]
    fn every_status_round_trips_and_unknown_strings_are_unknown() {
        for s in Status::ALL {
            assert_eq!(Status::parse(s.as_str()), s);
        }
        assert_eq!(Status::parse("exploded"), Status::Unknown);
        let at_work: Vec<_> = Status::ALL
            .into_iter()
            .filter(|s| s.is_helm_at_work())
            .collect();
        assert_eq!(
            at_work,
            [
                Status::Uninstalling,
                Status::PendingInstall,
                Status::PendingUpgrade,
                Status::PendingRollback
            ]
        );
    }

    #[test]
    fn errors_say_which_layer_is_wrong() {
        assert!(matches!(
            decode_data_release("%%%"),
            Err(DecodeError::NotBase64(Layer::Secret))
        ));
        let b64 = base64::engine::general_purpose::STANDARD;
        assert!(matches!(
            decode_data_release(&b64.encode("%%%")),
            Err(DecodeError::NotBase64(Layer::Helm))
        ));
        let bad_gzip = b64.encode(b64.encode([0x1f, 0x8b, 0x08, 0, 1, 2, 3]));
        assert!(matches!(
            decode_data_release(&bad_gzip),
            Err(DecodeError::NotGzip(_))
        ));
        assert!(matches!(
            decode_data_release(&encode("{not json", false)),
            Err(DecodeError::NotJson(_))
        ));
        assert!(matches!(
            decode_data_release(&encode(r#"{"name":"x","version":1}"#, true)),
            Err(DecodeError::MissingField("info"))
        ));
        assert!(matches!(
            decode_data_release(&encode(
                r#"{"name":"x","info":{"status":"deployed"}}"#,
                true
            )),
            Err(DecodeError::MissingField("version"))
        ));
    }

    #[test]
    fn json_errors_do_not_quote_the_payload() {
        let secret_value =
            r#"{"name":"x","version":"hunter2-password","info":{"status":"deployed"}}"#;
        let err = decode_data_release(&encode(secret_value, true))
            .unwrap_err()
            .to_string();
        assert!(!err.contains("hunter2"), "{err}");
        assert!(err.contains("line 1"), "{err}");
    }

    #[test]
    fn gzip_bombs_are_refused() {
        // 300 MiB of zeros compress to ~300 KiB.
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1024 * 1024];
        for _ in 0..300 {
            enc.write_all(&zeros).unwrap();
        }
        let b64 = base64::engine::general_purpose::STANDARD;
        let data = b64.encode(b64.encode(enc.finish().unwrap()));
        assert!(matches!(
            decode_data_release(&data),
            Err(DecodeError::TooLarge { .. })
        ));
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn decompression_stops_at_the_limit_whatever_the_trailer_claims() {
        let payload = vec![b'a'; 10_000];
        let honest = gzip(&payload);
        assert_eq!(gunzip_within(&honest, 10_000).unwrap(), payload);
        assert!(matches!(
            gunzip_within(&honest, 9_999),
            Err(DecodeError::TooLarge { limit: 9_999 })
        ));
        // A trailer that claims less (or more) than the payload: the same answers.
        for claim in [0u32, 1, 5_000, 9_999, 10_001, u32::MAX] {
            let mut lying = honest.clone();
            let at = lying.len() - 4;
            lying[at..].copy_from_slice(&claim.to_le_bytes());
            // flate2 checks the trailer at the end of the stream: a lie is an error or the
            // payload, never more than the limit.
            match gunzip_within(&lying, 10_000) {
                Ok(out) => assert_eq!(out, payload),
                Err(DecodeError::NotGzip(_)) => {}
                Err(DecodeError::TooLarge { .. }) => assert!(claim > 10_000),
                Err(e) => panic!("claim {claim}: {e}"),
            }
            assert!(matches!(
                gunzip_within(&lying, 9_999),
                Err(DecodeError::TooLarge { .. } | DecodeError::NotGzip(_))
            ));
        }
        // The plain (not gzipped) payload is bounded too.
        let b64 = base64::engine::general_purpose::STANDARD;
        assert!(matches!(
            helm_payload_json_within(b64.encode(&payload).as_bytes(), 9_999),
            Err(DecodeError::TooLarge { .. })
        ));
        assert_eq!(
            helm_payload_json_within(b64.encode(&payload).as_bytes(), 10_000).unwrap(),
            payload
        );
    }

    #[test]
    fn a_release_of_more_objects_than_the_limit_is_no_revision_and_one_at_it_is() {
        let config_maps = |n: usize| {
            (0..n)
                .map(|i| format!("---\n# Source: c/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\n"))
                .collect::<String>()
        };
        let release = |manifest: &str, hooks: usize| {
            let mut json =
                crate::test_util::release_json("team", "many", 1, Status::Deployed, manifest);
            json["hooks"] = (0..hooks)
                .map(|i| serde_json::json!({"name": format!("h{i}"), "kind": "Job", "manifest": "kind: Job"}))
                .collect();
            json.to_string()
        };
        // The attacker's release: more ConfigMaps than the limit, each a few bytes.
        let over = release(&config_maps(101), 0);
        assert!(matches!(
            decode_release_json_within(over.as_bytes(), 100),
            Err(DecodeError::TooManyObjects {
                objects: 101,
                limit: 100
            })
        ));
        // Hooks count: 99 objects and 2 hooks are over 100 too.
        assert!(matches!(
            decode_release_json_within(release(&config_maps(99), 2).as_bytes(), 100),
            Err(DecodeError::TooManyObjects { objects: 101, .. })
        ));
        // Empty and comment-only documents (what a template rendering nothing leaves) do not.
        let at = format!(
            "{}---\n# Source: c/templates/empty.yaml\n---\n\n",
            config_maps(100)
        );
        let decoded = decode_release_json_within(release(&at, 0).as_bytes(), 100).unwrap();
        assert_eq!(decoded.name, "many");
        // The message says what and which flag, never the content.
        let message = decode_release_json_within(over.as_bytes(), 100)
            .unwrap_err()
            .to_string();
        assert!(message.contains("101 objects") && message.contains("--max-release-objects"));
        assert!(!message.contains("c100"));
    }

    #[test]
    fn notes_are_kept_up_to_their_limit_on_a_character_boundary() {
        let long = "é".repeat(NOTES_KEPT_BYTES);
        let kept = kept_notes(long);
        assert!(kept.len() <= NOTES_KEPT_BYTES && kept.len() > NOTES_KEPT_BYTES - 2);
        assert!(kept.chars().all(|c| c == 'é'));
        assert_eq!(kept_notes("Thanks".into()), "Thanks");
        let json = format!(
            r#"{{"name":"x","version":1,"info":{{"status":"deployed","notes":"{}"}}}}"#,
            "n".repeat(NOTES_KEPT_BYTES * 3)
        );
        assert_eq!(
            decode_release_json(json.as_bytes()).unwrap().notes.len(),
            NOTES_KEPT_BYTES
        );
    }

    #[test]
    fn reads_a_secret_a_list_yaml_and_a_bare_value() {
        let data = encode(MINIMAL, true);
        let secret = serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {"name": "sh.helm.release.v1.web.v3", "namespace": "shop", "labels": {"owner": "helm"}},
            "data": {"release": data}
        });
        let list = serde_json::json!({"kind": "List", "items": [secret, {"kind": "ConfigMap", "metadata": {"name": "x"}}]});
        let from_list = parse_release_file(&list.to_string()).unwrap();
        assert_eq!(from_list.len(), 2);
        let first = from_list[0].as_ref().unwrap();
        assert_eq!(first.secret.name, "sh.helm.release.v1.web.v3");
        assert_eq!(first.labels["owner"], "helm");
        assert!(matches!(
            from_list[1],
            Err((_, SecretError::NotAReleaseSecret { .. }))
        ));

        let yaml = format!(
            "apiVersion: v1\nkind: Secret\ntype: helm.sh/release.v1\nmetadata:\n  name: a\n  namespace: shop\ndata:\n  release: {data}\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: b\n  namespace: shop\n"
        );
        let from_yaml = parse_release_file(&yaml).unwrap();
        assert_eq!(from_yaml.len(), 2);
        assert_eq!(from_yaml[0].as_ref().unwrap().release.revision, 3);
        assert!(
            matches!(&from_yaml[1], Err((Some(s), SecretError::NoReleaseData)) if s.name == "b")
        );

        let bare = parse_release_file(&format!("{data}\n")).unwrap();
        assert_eq!(
            bare[0].as_ref().unwrap().secret.name,
            "sh.helm.release.v1.web.v3"
        );
        assert!(matches!(
            parse_release_file("{"),
            Err(FileError::NotJson(_))
        ));
        assert!(matches!(
            parse_release_file("- 1\n- 2\n"),
            Err(FileError::UnexpectedShape)
        ));
    }

    #[test]
    fn a_large_file_is_handed_over_in_its_order_and_a_bad_document_ends_it_after_what_came_before()
    {
        // Decoded in parts of DECODED_TOGETHER on every core: each entry still comes back in
        // the file's order, good and bad alike.
        let data = encode(MINIMAL, true);
        let entry = |n: usize| {
            let mut secret = serde_json::json!({
                "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                "metadata": {"name": format!("s{n}"), "namespace": "shop"},
                "data": {"release": data}
            });
            if n % 7 == 3 {
                secret["data"]["release"] = "not base64!".into();
            }
            secret
        };
        let count = 2 * DECODED_TOGETHER + 45;
        let list =
            serde_json::json!({"kind": "List", "items": (0..count).map(entry).collect::<Vec<_>>()});
        let mut seen = Vec::new();
        each_release_secret(&list.to_string(), |entry| {
            seen.push(match entry {
                Ok(secret) => (secret.secret.name, true),
                Err((secret, _)) => (secret.unwrap().name, false),
            })
        })
        .unwrap();
        let expected: Vec<(String, bool)> =
            (0..count).map(|n| (format!("s{n}"), n % 7 != 3)).collect();
        assert_eq!(seen, expected);

        let yaml = format!(
            "---\n{}\n---\n{}\n---\n42\n---\n{}\n",
            entry(0),
            entry(1),
            entry(2)
        );
        let mut names = Vec::new();
        let result = each_release_secret(&yaml, |entry| names.push(entry.unwrap().secret.name));
        assert!(matches!(result, Err(FileError::UnexpectedShape)));
        assert_eq!(names, ["s0", "s1"]);
    }

    /// A Secret whose release names another namespace is decoded with that namespace (Flux's
    /// storage namespace; whether it counts is [`crate::storage`]'s); one without a namespace
    /// in its JSON speaks for its own.
    #[test]
    fn a_release_stored_in_another_namespace_keeps_its_own_namespace() {
        let secret = |namespace: &str, json: &str| {
            serde_json::json!({
                "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                "metadata": {"name": "sh.helm.release.v1.web.v3", "namespace": namespace},
                "data": {"release": encode(json, true)}
            })
        };
        let elsewhere = decode_secret(&secret("flux-system", MINIMAL)).unwrap();
        assert_eq!(
            (
                elsewhere.secret.namespace.as_str(),
                elsewhere.release.namespace.as_str()
            ),
            ("flux-system", "shop")
        );
        assert_eq!(
            elsewhere.key(),
            ReleaseKey::stored("shop", "web", "flux-system")
        );
        assert_eq!(elsewhere.key().storage_namespace(), "flux-system");
        let b64 = base64::engine::general_purpose::STANDARD;
        let helm_layer = b64.decode(encode(MINIMAL, false)).unwrap();
        let parts = release_secret_from_parts(
            SecretRef::secret("flux-system", "sh.helm.release.v1.web.v3"),
            BTreeMap::new(),
            &helm_layer,
        )
        .unwrap();
        assert_eq!(parts.release.namespace, "shop");

        let own = decode_secret(&secret("shop", MINIMAL)).unwrap();
        assert_eq!(own.key(), ReleaseKey::new("shop", "web"));
        assert_eq!(own.key().stored_in, None);
        let no_namespace = MINIMAL.replace(r#""namespace":"shop","#, "");
        assert_eq!(
            decode_secret(&secret("tenant", &no_namespace))
                .unwrap()
                .release
                .namespace,
            "tenant"
        );
        // A release file's Secret written without a namespace, and a bare value: the JSON's.
        let unplaced = decode_secret(&secret("", MINIMAL)).unwrap();
        assert_eq!(unplaced.release.namespace, "shop");
        assert_eq!(unplaced.key(), ReleaseKey::new("shop", "web"));
    }
}
