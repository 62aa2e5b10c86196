//! Who wrote a release Secret, in a form its writer cannot choose.
//!
//! A release Secret may be written by anyone with Secret write in its namespace (the built-in
//! `edit` role), yet the reverter writes with the locker's cluster-wide rights. So every write of
//! a release Secret is stamped at admission (the `author` mutating webhook, [`crate::stamp`]) with the
//! identity the API server authenticated for it, and the stamp is bound to the Secret's
//! namespace, name, release data and the time it was made by an HMAC whose key only the locker
//! holds (a Secret in its own namespace). A write that leaves the release's content alone keeps
//! the earlier author ([`crate::content`]); a stamp made before its Secret was created is
//! carried from another write and names nobody. The reverter then writes from a revision only what its author could write
//! (docs/security.md).
//!
//! [`authorship`] reads a watched Secret back: a verified stamp names the author; anything else
//! has no known author: a Secret without a stamp (written before the locker was installed, or
//! while its stamping webhook was away: the two cannot be told apart, and the key's age is no
//! trust horizon) or with a stamp that does not verify. What the reverter may do for a revision
//! whose author it does not know is [`unknown_author_scope`]: at most hold an object at what was
//! live, never write the revision's content (docs/security.md).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine as _;
use ring::{digest, hmac};
use serde::{Deserialize, Serialize};

use crate::driver::Driver;
use crate::kinds::Scope;
use crate::spent::SpentStamps;

/// The annotation that names the identity of a release Secret's last writer (JSON).
pub const AUTHOR_ANNOTATION: &str = "helm-locker.io/author";
/// The annotation that proves [`AUTHOR_ANNOTATION`] was written by the locker's webhook.
pub(crate) const PROOF_ANNOTATION: &str = "helm-locker.io/author-proof";
/// The proof's format version, its first characters: `v2.<stamped at>.<tag>`, the tag an
/// HMAC over the Secret's namespace, name, author, the time the stamp was made (Unix seconds)
/// and the digest of its release data.
const PROOF_PREFIX: &str = "v2.";
/// Proofs of lockers before the stamp carried its time (no time signed): they verify, but
/// nothing ties them to the write they were made for, so they name no author.
const OLD_PROOF_PREFIX: &str = "v1.";
pub use crate::spent::STAMP_WINDOW_SECONDS;
/// The shortest key accepted: 256 bits.
pub const MIN_KEY_BYTES: usize = 32;

/// The identity the API server authenticated for a write (an AdmissionRequest's `userInfo`),
/// as a SubjectAccessReview takes it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Author {
    #[serde(default)]
    pub username: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl fmt::Display for Author {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.username.is_empty() {
            f.write_str("(no user name)")
        } else {
            f.write_str(&self.username)
        }
    }
}

/// The locker's stamping key (HMAC-SHA256).
#[derive(Clone)]
pub struct AuthorKey(hmac::Key);

impl fmt::Debug for AuthorKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AuthorKey(..)")
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("the author key has {0} bytes; at least {MIN_KEY_BYTES} are needed")]
    TooShort(usize),
}

impl AuthorKey {
    pub fn new(bytes: &[u8]) -> Result<AuthorKey, KeyError> {
        if bytes.len() < MIN_KEY_BYTES {
            return Err(KeyError::TooShort(bytes.len()));
        }
        Ok(AuthorKey(hmac::Key::new(hmac::HMAC_SHA256, bytes)))
    }

    /// What is signed: a Secret's place, its author annotation exactly as written, the time
    /// of the stamp (`None`: a `v1.` proof, which had none) and the digest of its release data
    /// (the bytes after the Secret's own base64: Helm's layer). A revision kept in a ConfigMap
    /// is signed under another first part, so a stamp of a Secret never verifies on the
    /// ConfigMap of the same namespace and name (nor the reverse); a Secret's message is as it
    /// was before ConfigMaps were stamped, so its stamps still hold.
    fn message(
        driver: Driver,
        namespace: &str,
        name: &str,
        author_json: &str,
        stamped_at: Option<i64>,
        release: &[u8],
    ) -> Vec<u8> {
        let data = digest::digest(&digest::SHA256, release);
        let mut message = Vec::with_capacity(96 + namespace.len() + name.len() + author_json.len());
        let time = stamped_at.map(|t| t.to_string());
        let mut parts = vec![
            driver.stamp_domain(stamped_at.is_some()),
            namespace.as_bytes(),
            name.as_bytes(),
            author_json.as_bytes(),
        ];
        if let Some(time) = &time {
            parts.push(time.as_bytes());
        }
        parts.push(data.as_ref());
        for part in parts {
            message.extend_from_slice(&(part.len() as u64).to_be_bytes());
            message.extend_from_slice(part);
        }
        message
    }

    /// The proof annotation's value for these contents, stamped at `stamped_at` (Unix seconds).
    pub fn prove(
        &self,
        driver: Driver,
        namespace: &str,
        name: &str,
        author_json: &str,
        stamped_at: i64,
        release: &[u8],
    ) -> String {
        let tag = hmac::sign(
            &self.0,
            &Self::message(
                driver,
                namespace,
                name,
                author_json,
                Some(stamped_at),
                release,
            ),
        );
        format!(
            "{PROOF_PREFIX}{stamped_at}.{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag.as_ref())
        )
    }

    /// A `v1.` proof, as lockers before the stamp carried its time made it (tests only).
    #[cfg(test)]
    pub(crate) fn prove_v1(
        &self,
        namespace: &str,
        name: &str,
        author_json: &str,
        release: &[u8],
    ) -> String {
        let tag = hmac::sign(
            &self.0,
            &Self::message(Driver::Secret, namespace, name, author_json, None, release),
        );
        format!(
            "{OLD_PROOF_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag.as_ref())
        )
    }

    /// What `proof` says about these contents (the tag compared in constant time).
    fn check(
        &self,
        driver: Driver,
        namespace: &str,
        name: &str,
        author_json: &str,
        release: &[u8],
        proof: &str,
    ) -> Proof {
        let tag = |t: &str| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(t)
                .ok()
        };
        let verified = |stamped_at: Option<i64>, tag: &[u8]| {
            hmac::verify(
                &self.0,
                &Self::message(driver, namespace, name, author_json, stamped_at, release),
                tag,
            )
            .is_ok()
        };
        if let Some(rest) = proof.strip_prefix(PROOF_PREFIX) {
            let Some((time, t)) = rest.split_once('.') else {
                return Proof::Bad;
            };
            // Digits only: the time is signed as written, so one value has one spelling.
            let stamped_at = time
                .bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| time.parse::<i64>().ok())
                .flatten()
                .filter(|at| at.to_string() == time);
            return match (stamped_at, tag(t)) {
                (Some(at), Some(t)) if verified(Some(at), &t) => Proof::Made(at),
                _ => Proof::Bad,
            };
        }
        if let Some(t) = proof.strip_prefix(OLD_PROOF_PREFIX) {
            return match tag(t) {
                Some(t) if verified(None, &t) => Proof::Old,
                _ => Proof::Bad,
            };
        }
        Proof::Bad
    }
}

/// What a proof annotation says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proof {
    /// Made by this key for these contents at this time (Unix seconds).
    Made(i64),
    /// A `v1.` proof made by this key for these contents, at a time nobody can tell.
    Old,
    /// Not made by this key for these contents.
    Bad,
}

/// Who a revision speaks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Authorship {
    /// Stamped by the locker's webhook: the identity the API server authenticated.
    Known(Arc<Author>),
    /// No author can be told: the reverter writes none of the revision's content.
    Unknown(Unknown),
}

/// Why a revision's author cannot be told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unknown {
    /// Written without a stamp: before helm-locker was installed, or while its stamping webhook
    /// was not registered or did not answer (its failurePolicy is Ignore).
    NotStamped,
    /// A stamp that this key did not make for these contents (changed since, copied from
    /// another Secret, or made with another key).
    BadProof,
    /// The revision was not read from the API server (a folder of releases, a test).
    NotRead,
    /// A stamp made before the Secret was created ([`STAMP_WINDOW_SECONDS`]), or seen by this
    /// process on another object ([`crate::spent`]): carried from an earlier write (deleted and
    /// created again with a saved stamp, or restored from a backup).
    Replayed,
    /// A stamp of a locker before stamps carried their time (`v1.`): it cannot be told apart
    /// from one carried from an earlier write. The release's next write by Helm is stamped anew.
    OldProof,
    /// The release's newest revision is older than one the locker saw of it since it started
    /// (the newer ones were deleted): an older revision brought back, whoever stamped it.
    WentBack,
}

impl Unknown {
    pub fn as_str(self) -> &'static str {
        match self {
            Unknown::NotStamped => {
                "written without the author webhook's stamp (before helm-locker was installed, or while it was away)"
            }
            Unknown::BadProof => "its author stamp does not verify",
            Unknown::NotRead => "not read from the API server",
            Unknown::Replayed => {
                "its author stamp was made for an earlier write (the Secret was created after it, or helm-locker saw the stamp on another Secret of that name: deleted and written again, or restored)"
            }
            Unknown::WentBack => {
                "it is older than a revision of this release helm-locker saw before (the newer ones were deleted: an old revision brought back)"
            }
            Unknown::OldProof => {
                "its author stamp is of an older helm-locker (v1, not bound to the write it was made for); the next helm upgrade stamps it anew"
            }
        }
    }
}

impl fmt::Display for Authorship {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Authorship::Known(author) => write!(f, "{author}"),
            Authorship::Unknown(why) => write!(f, "(unknown: {})", why.as_str()),
        }
    }
}

/// What the locker knows of a release Secret (or ConfigMap, [`Driver`]) as the API server
/// stores it.
#[derive(Clone, Copy, Debug)]
pub struct StoredSecret<'a> {
    /// Which kind of object holds the revision: its stamp is bound to it.
    pub driver: Driver,
    pub namespace: &'a str,
    pub name: &'a str,
    pub annotations: Option<&'a BTreeMap<String, String>>,
    pub resource_version: Option<&'a str>,
    /// `metadata.creationTimestamp` in Unix seconds: set by the API server when the Secret is
    /// created (after the author webhook), never by its writer, kept by every update.
    pub created: Option<i64>,
    /// `data.release`, after the Secret's own base64 (a ConfigMap's as it is): Helm's layer.
    pub release: &'a [u8],
}

/// The key the stamps are made and checked with, and the stamps seen with it in this process
/// ([`crate::spent`]: a new key starts with none, as no earlier stamp verifies under it).
#[derive(Clone, Debug)]
pub struct Stamping {
    pub key: AuthorKey,
    pub spent: Arc<Mutex<SpentStamps>>,
}

impl Stamping {
    pub fn new(key: AuthorKey) -> Stamping {
        Stamping {
            key,
            spent: Arc::default(),
        }
    }
}

/// Who wrote `secret` ([`Authorship`]). Only a stamp this key made for these contents, at most
/// [`STAMP_WINDOW_SECONDS`] before the Secret was created, names an author: a stamp carried to
/// a Secret created later (a replay) or one without a time (`v1.`) names nobody. When the
/// Secret was last written (its resourceVersion) does not count.
pub fn authorship(stamping: &Stamping, secret: StoredSecret<'_>) -> Authorship {
    let annotation = |key| secret.annotations.and_then(|a| a.get(key));
    match (annotation(AUTHOR_ANNOTATION), annotation(PROOF_ANNOTATION)) {
        (Some(author_json), Some(proof)) => {
            let proof = stamping.key.check(
                secret.driver,
                secret.namespace,
                secret.name,
                author_json,
                secret.release,
                proof,
            );
            let Ok(author) = serde_json::from_str::<Author>(author_json) else {
                return Authorship::Unknown(Unknown::BadProof);
            };
            match proof {
                Proof::Bad => Authorship::Unknown(Unknown::BadProof),
                Proof::Old => Authorship::Unknown(Unknown::OldProof),
                Proof::Made(stamped_at) if made_for(stamped_at, secret.created) => {
                    Authorship::Known(Arc::new(author))
                }
                Proof::Made(_) => Authorship::Unknown(Unknown::Replayed),
            }
        }
        (None, None) => Authorship::Unknown(Unknown::NotStamped),
        _ => Authorship::Unknown(Unknown::BadProof),
    }
}

/// [`authorship`] of the object `uid` as the API server stores it, read at `now` (Unix seconds),
/// with the stamps this process has seen ([`crate::spent`]): a verified stamp first seen on
/// another object (one deleted, superseded or replaced since) names nobody here
/// ([`Unknown::Replayed`]), even inside the window. Every verified stamp read through here is
/// bound to its object, so the watch's deletes are read through here too.
pub fn authorship_seen(
    stamping: &Stamping,
    secret: StoredSecret<'_>,
    uid: &str,
    now: i64,
) -> Authorship {
    let author = authorship(stamping, secret);
    let Authorship::Known(_) = &author else {
        return author;
    };
    let Some(proof) = secret.annotations.and_then(|a| a.get(PROOF_ANNOTATION)) else {
        return author;
    };
    let Some(stamped_at) = proof
        .strip_prefix(PROOF_PREFIX)
        .and_then(|rest| rest.split_once('.'))
        .and_then(|(time, _)| time.parse::<i64>().ok())
    else {
        return author;
    };
    let mut spent = stamping
        .spent
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if spent.first_seen_on(proof, stamped_at, uid, now) {
        author
    } else {
        Authorship::Unknown(Unknown::Replayed)
    }
}

/// Whether a stamp made at `stamped_at` can be the one made for the write that created a
/// Secret at `created` (both Unix seconds): the Secret was created no later than
/// [`STAMP_WINDOW_SECONDS`] after it. Later writes of the same Secret keep its creation time,
/// so their (newer) stamps hold too. No creation time: nothing to bind the stamp to.
fn made_for(stamped_at: i64, created: Option<i64>) -> bool {
    created.is_some_and(|created| created <= stamped_at.saturating_add(STAMP_WINDOW_SECONDS))
}

/// The two annotations the webhook writes on a release Secret, stamped at `stamped_at` (Unix
/// seconds, the locker's clock).
pub fn stamp_annotations(
    key: &AuthorKey,
    driver: Driver,
    namespace: &str,
    name: &str,
    author: &Author,
    stamped_at: i64,
    release: &[u8],
) -> [(&'static str, String); 2] {
    let author_json = serde_json::to_string(author).expect("an author serializes");
    let proof = key.prove(driver, namespace, name, &author_json, stamped_at, release);
    [(AUTHOR_ANNOTATION, author_json), (PROOF_ANNOTATION, proof)]
}

/// Unix seconds of a Kubernetes time (`metav1.Time`, RFC 3339 in UTC: `2026-11-28T09:16:15Z`,
/// fractions of a second allowed and dropped). `None` for anything else.
pub(crate) fn unix_seconds(time: &str) -> Option<i64> {
    let b = time.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = &b[range];
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    let rest = &b[19..];
    let rest = match rest.first() {
        Some(b'.') => {
            let digits = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 {
                return None;
            }
            &rest[1 + digits..]
        }
        _ => rest,
    };
    if rest != b"Z" || !(1..=12).contains(&month) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if day < 1 || day > days_in_month[(month - 1) as usize] {
        return None;
    }
    // Days since 1970-01-01 (Howard Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

/// One question to the API server's authorizer: may this author do this?
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Access {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    /// Where the access applies; `None`: cluster-wide.
    pub namespace: Option<String>,
    /// The object's name; empty: any.
    pub name: String,
    /// A non-resource URL (`/healthz`) instead of a resource.
    pub path: Option<String>,
}

impl Access {
    pub(crate) fn resource(
        verb: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Access {
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        Access {
            verb: verb.to_string(),
            group: group.to_string(),
            resource: resource.to_string(),
            subresource: subresource.to_string(),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
            path: None,
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = &self.path {
            return write!(f, "{} {path}", self.verb);
        }
        write!(f, "{} {}", self.verb, self.resource)?;
        if !self.subresource.is_empty() {
            write!(f, "/{}", self.subresource)?;
        }
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        if !self.name.is_empty() {
            write!(f, " {}", self.name)?;
        }
        match &self.namespace {
            Some(ns) => write!(f, " in {ns}"),
            None => f.write_str(" cluster-wide"),
        }
    }
}

/// One thing the author must be allowed: `access`, or else every access of `or_all_of` when
/// that is not empty (the API server lets a writer without `escalate` create a role that grants
/// nothing the writer does not hold).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Need {
    pub access: Access,
    pub or_all_of: Vec<Access>,
}

impl Need {
    fn just(access: Access) -> Need {
        Need {
            access,
            or_all_of: Vec::new(),
        }
    }

    fn met(&self, allowed: &mut impl FnMut(&Access) -> bool) -> bool {
        allowed(&self.access)
            || (!self.or_all_of.is_empty() && self.or_all_of.iter().all(&mut *allowed))
    }
}

/// A write the reverter would make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    /// A patch of an existing object (a JSON patch or a server-side apply).
    Patch,
    /// Creating a deleted object again.
    Create,
}

const RBAC: &str = "rbac.authorization.k8s.io";

/// The most accesses a role's rules are expanded to; a role granting more is followed only by
/// an author with `escalate` (or `bind`).
pub(crate) const MAX_RULE_ACCESSES: usize = 256;

/// The accesses a role's `rules` grant, each as the authorizer is asked about it, applying in
/// `namespace` (`None`: cluster-wide). `None` when the rules do not read or expand to more than
/// [`MAX_RULE_ACCESSES`].
pub(crate) fn rule_accesses(
    role: &serde_json::Value,
    namespace: Option<&str>,
) -> Option<Vec<Access>> {
    let strings = |rule: &serde_json::Value, key: &str| -> Vec<String> {
        rule.get(key)
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    let rules = match role.get("rules") {
        None | Some(serde_json::Value::Null) => return Some(out),
        Some(rules) => rules.as_array()?,
    };
    for rule in rules {
        let verbs = strings(rule, "verbs");
        for path in strings(rule, "nonResourceURLs") {
            for verb in &verbs {
                out.push(Access {
                    verb: verb.clone(),
                    path: Some(path.clone()),
                    ..Access::resource("", "", "", None, "")
                });
            }
        }
        let names = strings(rule, "resourceNames");
        let names = if names.is_empty() {
            vec![String::new()]
        } else {
            names
        };
        for group in strings(rule, "apiGroups") {
            for resource in strings(rule, "resources") {
                for verb in &verbs {
                    for name in &names {
                        out.push(Access::resource(verb, &group, &resource, namespace, name));
                    }
                }
            }
        }
        if out.len() > MAX_RULE_ACCESSES {
            return None;
        }
    }
    Some(out)
}

/// Where an object the reverter writes lives, as the API server's discovery says of its kind:
/// every question about the write is asked there, never in a namespace the chart merely gives
/// a cluster-scoped kind (a RoleBinding's rights in that namespace would pass for rights over
/// the whole cluster).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place<'a> {
    /// A namespaced kind, in this namespace.
    Namespace(&'a str),
    /// A cluster-scoped kind.
    Cluster,
}

impl<'a> Place<'a> {
    /// The place of an object of a kind discovery says is namespaced (`Some(true)`) or not
    /// (`Some(false)`), named in `namespace`. `None` when the scope is not known (discovery
    /// did not answer) or a namespaced kind has no namespace: such a write is not made.
    pub fn of(namespaced: Option<bool>, namespace: Option<&'a str>) -> Option<Place<'a>> {
        match (namespaced?, namespace) {
            (true, Some(ns)) if !ns.is_empty() => Some(Place::Namespace(ns)),
            (true, _) => None,
            (false, _) => Some(Place::Cluster),
        }
    }

    /// The namespace the API server asks about (`None`: cluster-wide).
    pub fn namespace(self) -> Option<&'a str> {
        match self {
            Place::Namespace(ns) => Some(ns),
            Place::Cluster => None,
        }
    }
}

/// The role a binding the reverter writes refers to, to be read as it is live: `resource`
/// (`roles` or `clusterroles`), its namespace (`None` for a ClusterRole), its name. `None` for
/// anything but a RoleBinding or ClusterRoleBinding whose `roleRef` reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleRef {
    pub resource: &'static str,
    pub namespace: Option<String>,
    pub name: String,
}

/// The role `desired` (a binding of `resource` in `group`, at `place`) refers to.
pub fn role_ref(
    group: &str,
    resource: &str,
    place: Place<'_>,
    desired: &serde_json::Value,
) -> Option<RoleRef> {
    if group != RBAC || !matches!(resource, "rolebindings" | "clusterrolebindings") {
        return None;
    }
    let name = desired.pointer("/roleRef/name")?.as_str()?.to_string();
    match desired.pointer("/roleRef/kind")?.as_str()? {
        // A RoleBinding refers to a Role of its own namespace; a ClusterRoleBinding cannot.
        "Role" => Some(RoleRef {
            resource: "roles",
            namespace: Some(place.namespace()?.to_string()),
            name,
        }),
        "ClusterRole" => Some(RoleRef {
            resource: "clusterroles",
            namespace: None,
            name,
        }),
        _ => None,
    }
}

/// Everything the author of a revision must be allowed for the reverter to make `write` of
/// `desired` (the chart's object `name` of `resource` in `group`, at `place`, from discovery):
/// the verb on the object and, for RBAC objects, what the API server's escalation check asks:
/// `escalate` on a Role or ClusterRole or else every permission of the role as it will be
/// written (`desired`); `bind` on the role a binding refers to or else every permission of
/// that role **as it is live** (`live_role`, read from the API server right before the write:
/// the API server binds the live role, whatever the chart says of it; `None` when it does not
/// exist, and then `bind` alone). A revision the reverter will not follow is reported, never
/// widened.
pub fn needs(
    write: Write,
    group: &str,
    resource: &str,
    place: Place<'_>,
    name: &str,
    desired: &serde_json::Value,
    live_role: Option<&serde_json::Value>,
) -> Vec<Need> {
    let namespace = place.namespace();
    let mut out = vec![Need::just(Access::resource(
        "patch", group, resource, namespace, name,
    ))];
    if write == Write::Create {
        out.push(Need::just(Access::resource(
            "create", group, resource, namespace, name,
        )));
    }
    if group != RBAC {
        return out;
    }
    match resource {
        "roles" | "clusterroles" => out.push(Need {
            access: Access::resource("escalate", group, resource, namespace, name),
            or_all_of: rule_accesses(desired, namespace).unwrap_or_default(),
        }),
        "rolebindings" | "clusterrolebindings" => {
            let kind = desired.pointer("/roleRef/kind").and_then(|v| v.as_str());
            let role_name = desired
                .pointer("/roleRef/name")
                .and_then(|v| v.as_str())
                .unwrap_or_default();
            let role_resource = match kind {
                Some("Role") => "roles",
                _ => "clusterroles",
            };
            // A RoleBinding grants its role inside its own namespace only.
            out.push(Need {
                access: Access::resource("bind", RBAC, role_resource, namespace, role_name),
                or_all_of: live_role
                    .and_then(|r| rule_accesses(r, namespace))
                    .unwrap_or_default(),
            });
        }
        _ => {}
    }
    out
}

/// What the reverter may do with a revision's content, given the authorizer's answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Permission {
    /// Every need is met.
    Granted,
    /// The author lacks these (the first access of each need not met).
    Refused(Vec<Access>),
    /// No author is known: nothing is written from the revision.
    NoAuthor(Unknown),
}

/// Whether the reverter may write from a revision of `authorship`: `allowed` answers for the
/// revision's [`Author`] (the authorizer's answer, cached by the caller).
pub fn permission(
    authorship: &Authorship,
    needed: &[Need],
    mut allowed: impl FnMut(&Author, &Access) -> bool,
) -> Permission {
    match authorship {
        Authorship::Unknown(why) => Permission::NoAuthor(*why),
        Authorship::Known(author) => {
            let mut ask = |a: &Access| allowed(author, a);
            let refused: Vec<Access> = needed
                .iter()
                .filter(|n| !n.met(&mut ask))
                .map(|n| n.access.clone())
                .collect();
            if refused.is_empty() {
                Permission::Granted
            } else {
                Permission::Refused(refused)
            }
        }
    }
}

/// Why the reverter writes nothing at all for a revision whose author it does not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutOfScope {
    /// Its stamp does not verify (someone wrote one on purpose), or it was not read from the
    /// API server: nothing is held.
    NotHeld(Unknown),
    /// RBAC objects are never written for an unknown author.
    Rbac,
    /// A cluster-scoped object, or one in another namespace than the release's.
    OutsideItsNamespace,
    /// Discovery has not said that its kind is namespaced (a custom resource's kind the
    /// reverter has not looked up): it may be cluster-scoped, so nothing is written.
    ScopeNotKnown,
}

impl OutOfScope {
    pub fn as_str(self) -> &'static str {
        match self {
            OutOfScope::NotHeld(why) => why.as_str(),
            OutOfScope::Rbac => "RBAC objects are never written for an unknown author",
            OutOfScope::OutsideItsNamespace => {
                "it is outside the release's namespace (cluster-scoped or in another namespace)"
            }
            OutOfScope::ScopeNotKnown => {
                "its kind is not known to be namespaced (it may be cluster-scoped)"
            }
        }
    }
}

/// What the reverter may do for a revision of an unknown author (`why`), about an object of
/// `group`, in `namespace` (`None`: cluster-scoped), of a release of `release_namespace`, whose
/// kind discovery says is of `scope` ([`Scope::Unknown`] when it was not asked):
/// `Ok` when it may hold the object at what was live when it first saw it under the revision
/// (never writing the revision's content where that differed), else why it writes nothing.
/// The index places a kind of unknown scope in the release's namespace; only discovery's word
/// that the kind is namespaced lets such an object be written.
pub fn unknown_author_scope(
    why: Unknown,
    group: &str,
    namespace: Option<&str>,
    release_namespace: &str,
    scope: Scope,
) -> Result<(), OutOfScope> {
    // Held: revisions nobody can be told to have written on purpose (no stamp, a stamp of an
    // older locker, a stamp carried from an earlier write, as a restore from a backup does).
    // Holding writes nothing that was not live. A stamp that does not verify was made by hand.
    if !matches!(
        why,
        Unknown::NotStamped | Unknown::OldProof | Unknown::Replayed | Unknown::WentBack
    ) {
        return Err(OutOfScope::NotHeld(why));
    }
    if group == RBAC {
        return Err(OutOfScope::Rbac);
    }
    match scope {
        Scope::Cluster => return Err(OutOfScope::OutsideItsNamespace),
        Scope::Unknown => return Err(OutOfScope::ScopeNotKnown),
        Scope::Namespaced => {}
    }
    if namespace != Some(release_namespace) {
        return Err(OutOfScope::OutsideItsNamespace);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key() -> AuthorKey {
        AuthorKey::new(&[7u8; 32]).unwrap()
    }

    fn stamping() -> Stamping {
        Stamping::new(key())
    }

    fn alice() -> Author {
        Author {
            username: "alice".into(),
            uid: "u-1".into(),
            groups: vec!["system:authenticated".into()],
            extra: BTreeMap::from([("scopes".into(), vec!["a".into()])]),
        }
    }

    /// When the tests' stamps are made, and their Secrets created.
    const T: i64 = 1_800_000_000;

    fn stamped(author: &Author, release: &[u8]) -> BTreeMap<String, String> {
        stamped_at(author, T, release)
    }

    fn stamped_at(author: &Author, at: i64, release: &[u8]) -> BTreeMap<String, String> {
        stamp_annotations(
            &key(),
            Driver::Secret,
            "team",
            "sh.helm.release.v1.ops.v2",
            author,
            at,
            release,
        )
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    fn stored<'a>(
        annotations: Option<&'a BTreeMap<String, String>>,
        rv: &'a str,
        release: &'a [u8],
    ) -> StoredSecret<'a> {
        StoredSecret {
            driver: Driver::Secret,
            namespace: "team",
            name: "sh.helm.release.v1.ops.v2",
            annotations,
            resource_version: Some(rv),
            created: Some(T),
            release,
        }
    }

    #[test]
    fn a_stamp_seen_on_one_object_names_nobody_on_another_created_again_inside_the_window() {
        // The admin's revision, stamped at T, seen by the watch on the object uid-1; alice saves
        // it, deletes it and creates it again 30 s later while the author webhook is away.
        let root = Author {
            username: "admin".into(),
            groups: vec!["system:masters".into()],
            ..Author::default()
        };
        let annotations = stamped(&root, b"release-2");
        let s = stamping();
        let admin = Authorship::Known(Arc::new(root));
        let mut original = stored(Some(&annotations), "500", b"release-2");
        original.created = Some(T);
        assert_eq!(authorship_seen(&s, original, "uid-1", T + 1), admin);
        let mut again = original;
        again.created = Some(T + 30);
        // The window alone lets it through (the control): that is what the spent stamp closes.
        assert_eq!(authorship(&s, again), admin);
        assert_eq!(
            authorship_seen(&s, again, "uid-2", T + 31),
            Authorship::Unknown(Unknown::Replayed)
        );
        // The first object read again (a re-list, the fresh read) is still the admin's.
        assert_eq!(authorship_seen(&s, original, "uid-1", T + 32), admin);
        // Another process (a restart, another replica that never saw uid-1) cannot tell.
        assert_eq!(authorship_seen(&stamping(), again, "uid-2", T + 31), admin);
        // A stamp that names nobody is not recorded: unknown stays unknown, for whatever reason.
        let unstamped = stored(None, "500", b"release-2");
        assert_eq!(
            authorship_seen(&s, unstamped, "uid-3", T),
            Authorship::Unknown(Unknown::NotStamped)
        );
        assert_eq!(s.spent.lock().unwrap().len(), 1);
    }

    #[test]
    fn a_short_key_is_refused() {
        assert_eq!(
            AuthorKey::new(&[0; 31]).unwrap_err(),
            KeyError::TooShort(31)
        );
    }

    #[test]
    fn a_stamp_names_its_author_and_holds_only_for_the_contents_it_was_made_for() {
        let annotations = stamped(&alice(), b"release-2");
        let s = stamping();
        assert_eq!(
            authorship(&s, stored(Some(&annotations), "500", b"release-2")),
            Authorship::Known(Arc::new(alice()))
        );
        // Other release data under the same stamp (written while the webhook was away).
        assert_eq!(
            authorship(&s, stored(Some(&annotations), "500", b"release-3")),
            Authorship::Unknown(Unknown::BadProof)
        );
        // The stamp copied to another Secret.
        let elsewhere = StoredSecret {
            name: "sh.helm.release.v1.ops.v3",
            ..stored(Some(&annotations), "500", b"release-2")
        };
        assert_eq!(
            authorship(&s, elsewhere),
            Authorship::Unknown(Unknown::BadProof)
        );
        let other_namespace = StoredSecret {
            driver: Driver::Secret,
            namespace: "other",
            ..stored(Some(&annotations), "500", b"release-2")
        };
        assert_eq!(
            authorship(&s, other_namespace),
            Authorship::Unknown(Unknown::BadProof)
        );
        // The author changed under the proof: an admin named instead of alice.
        let mut forged = annotations.clone();
        forged.insert(
            AUTHOR_ANNOTATION.into(),
            r#"{"username":"admin","groups":["system:masters"]}"#.into(),
        );
        assert_eq!(
            authorship(&s, stored(Some(&forged), "500", b"release-2")),
            Authorship::Unknown(Unknown::BadProof)
        );
        // Made with another key.
        let other = Stamping::new(AuthorKey::new(&[8u8; 32]).unwrap());
        assert_eq!(
            authorship(&other, stored(Some(&annotations), "500", b"release-2")),
            Authorship::Unknown(Unknown::BadProof)
        );
        // Half a stamp, or a proof that is not one.
        let mut half = annotations.clone();
        half.remove(PROOF_ANNOTATION);
        assert_eq!(
            authorship(&s, stored(Some(&half), "5", b"release-2")),
            Authorship::Unknown(Unknown::BadProof)
        );
        let proof = annotations[PROOF_ANNOTATION].clone();
        let (_, tag) = proof.rsplit_once('.').unwrap();
        for bad in [
            "v1.!!".to_string(),
            "v2.!!".to_string(),
            "v2.".to_string(),
            format!("v2.{tag}"),
            format!("v2..{tag}"),
            format!("v2.+{T}.{tag}"),
            format!("v2.0{T}.{tag}"),
            format!("v2.{}.{tag}", T + 1),
            format!("v2.{T}.{tag}.x"),
            format!("v2.99999999999999999999.{tag}"),
            format!("v3.{T}.{tag}"),
            proof.replace("v2.", "v1."),
            String::new(),
        ] {
            let mut junk = annotations.clone();
            junk.insert(PROOF_ANNOTATION.into(), bad.clone());
            assert_eq!(
                authorship(&s, stored(Some(&junk), "500", b"release-2")),
                Authorship::Unknown(Unknown::BadProof),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_stamp_holds_only_on_a_secret_created_within_the_window_after_it() {
        let s = stamping();
        let at = |stamped: i64, created: Option<i64>| {
            let annotations = stamped_at(&alice(), stamped, b"release-2");
            authorship(
                &s,
                StoredSecret {
                    created,
                    ..stored(Some(&annotations), "500", b"release-2")
                },
            )
        };
        let known = Authorship::Known(Arc::new(alice()));
        // The CREATE's own stamp: made just before the API server set the creation time (or
        // after it, by the clock skew between the locker and the API server).
        assert_eq!(at(T, Some(T)), known);
        assert_eq!(at(T, Some(T + 1)), known);
        assert_eq!(
            at(T, Some(T - 3600)),
            known,
            "a later update of an old Secret"
        );
        assert_eq!(
            at(T, Some(T + STAMP_WINDOW_SECONDS)),
            known,
            "the window's edge"
        );
        // Replayed: the Secret was created (again) after the window.
        assert_eq!(
            at(T, Some(T + STAMP_WINDOW_SECONDS + 1)),
            Authorship::Unknown(Unknown::Replayed)
        );
        assert_eq!(
            at(T, Some(T + 86_400)),
            Authorship::Unknown(Unknown::Replayed)
        );
        // No creation time to bind the stamp to.
        assert_eq!(at(T, None), Authorship::Unknown(Unknown::Replayed));
        // Times at the ends of the range neither overflow nor hold.
        assert_eq!(at(i64::MAX, Some(i64::MAX)), known);
        assert_eq!(
            at(0, Some(i64::MAX)),
            Authorship::Unknown(Unknown::Replayed)
        );
        assert_eq!(at(T, Some(i64::MIN)), known);
    }

    #[test]
    fn a_stamp_of_an_older_locker_names_nobody() {
        let s = stamping();
        let author_json = serde_json::to_string(&alice()).unwrap();
        let v1 = key().prove_v1(
            "team",
            "sh.helm.release.v1.ops.v2",
            &author_json,
            b"release-2",
        );
        let annotations = BTreeMap::from([
            (AUTHOR_ANNOTATION.to_string(), author_json),
            (PROOF_ANNOTATION.to_string(), v1),
        ]);
        assert_eq!(
            authorship(&s, stored(Some(&annotations), "500", b"release-2")),
            Authorship::Unknown(Unknown::OldProof)
        );
        // A v1 proof for other contents does not verify at all.
        assert_eq!(
            authorship(&s, stored(Some(&annotations), "500", b"release-3")),
            Authorship::Unknown(Unknown::BadProof)
        );
    }

    #[test]
    fn kubernetes_times_read_as_unix_seconds() {
        assert_eq!(unix_seconds("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(unix_seconds("2026-11-28T09:16:15Z"), Some(1_795_857_375));
        assert_eq!(
            unix_seconds("2000-02-29T23:59:59.123456Z"),
            Some(951_868_799)
        );
        assert_eq!(unix_seconds("1969-12-31T23:59:59Z"), Some(-1));
        for bad in [
            "",
            "2026-11-28",
            "2026-11-28T09:16:15",
            "2026-11-28T09:16:15+01:00",
            "2026-13-28T09:16:15Z",
            "2026-02-29T09:16:15Z",
            "2026-11-28T24:00:00Z",
            "2026-11-28T09:16:15.Z",
            "2026-11-28T09:16:15ZZ",
            "２026-11-28T09:16:15Z",
            "+026-11-28T09:16:15Z",
        ] {
            assert_eq!(unix_seconds(bad), None, "{bad}");
        }
    }

    #[test]
    fn an_unstamped_secret_has_no_known_author_however_old_it_is() {
        let s = stamping();
        // Neither the resourceVersion nor unrelated annotations make an author: the key's age
        // is no trust horizon (a key made again would otherwise trust every older forgery).
        let other = BTreeMap::from([("note".to_string(), "x".to_string())]);
        for (annotations, rv) in [
            (None, "1"),
            (None, "999999"),
            (Some(&other), "5"),
            (None, "abc"),
        ] {
            assert_eq!(
                authorship(&s, stored(annotations, rv, b"r")),
                Authorship::Unknown(Unknown::NotStamped)
            );
        }
        let no_version = StoredSecret {
            resource_version: None,
            ..stored(None, "1", b"r")
        };
        assert_eq!(
            authorship(&s, no_version),
            Authorship::Unknown(Unknown::NotStamped)
        );
    }

    fn first(needs: Vec<Need>) -> Vec<String> {
        needs.iter().map(|n| n.access.to_string()).collect()
    }

    #[test]
    fn a_write_needs_the_verb_on_the_object_and_rbac_what_the_escalation_check_asks() {
        assert_eq!(
            first(needs(
                Write::Patch,
                "",
                "configmaps",
                Place::Namespace("team"),
                "cfg",
                &json!({}),
                None
            )),
            ["patch configmaps cfg in team"]
        );
        assert_eq!(
            first(needs(
                Write::Create,
                "apps",
                "deployments",
                Place::Namespace("team"),
                "web",
                &json!({}),
                None
            )),
            [
                "patch deployments.apps web in team",
                "create deployments.apps web in team"
            ]
        );
        let role = json!({"rules": [
            {"apiGroups": [""], "resources": ["configmaps", "pods/log"], "verbs": ["get", "list"]},
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"], "verbs": ["get"]},
        ]});
        let cluster_role = needs(
            Write::Patch,
            RBAC,
            "clusterroles",
            Place::Cluster,
            "ops-agent-read",
            &role,
            None,
        );
        assert_eq!(
            first(cluster_role.clone()),
            [
                "patch clusterroles.rbac.authorization.k8s.io ops-agent-read cluster-wide",
                "escalate clusterroles.rbac.authorization.k8s.io ops-agent-read cluster-wide"
            ]
        );
        // Without escalate: every permission the role grants, where it grants it.
        let granted: Vec<String> = cluster_role[1]
            .or_all_of
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            granted,
            [
                "get configmaps cluster-wide",
                "list configmaps cluster-wide",
                "get pods/log cluster-wide",
                "list pods/log cluster-wide",
                "get secrets a cluster-wide",
            ]
        );
        let binding =
            json!({"roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "admin"}});
        let rb = needs(
            Write::Patch,
            RBAC,
            "rolebindings",
            Place::Namespace("team"),
            "ops-admins",
            &binding,
            None,
        );
        assert_eq!(
            first(rb.clone()),
            [
                "patch rolebindings.rbac.authorization.k8s.io ops-admins in team",
                "bind clusterroles.rbac.authorization.k8s.io admin in team"
            ]
        );
        assert!(
            rb[1].or_all_of.is_empty(),
            "a role not in the chart: bind only"
        );
        // A binding of the chart's own role: bind, or every permission of the role in the
        // binding's namespace.
        let role_binding = json!({"roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "reader"}});
        let rb = needs(
            Write::Create,
            RBAC,
            "rolebindings",
            Place::Namespace("team"),
            "r",
            &role_binding,
            Some(&role),
        );
        assert_eq!(
            first(rb.clone()),
            [
                "patch rolebindings.rbac.authorization.k8s.io r in team",
                "create rolebindings.rbac.authorization.k8s.io r in team",
                "bind roles.rbac.authorization.k8s.io reader in team"
            ]
        );
        assert_eq!(rb[2].or_all_of[0].to_string(), "get configmaps in team");
        let wide = json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]});
        let granted: Vec<String> = rule_accesses(&wide, None)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(granted, ["* *.* cluster-wide", "get /healthz"]);
        // Rules too wide to ask about one by one: escalate alone.
        let many: Vec<String> = (0..300).map(|i| format!("r{i}")).collect();
        let huge = json!({"rules": [{"apiGroups": [""], "resources": many, "verbs": ["get"]}]});
        assert_eq!(rule_accesses(&huge, None), None);
        assert!(needs(
            Write::Patch,
            RBAC,
            "roles",
            Place::Namespace("team"),
            "x",
            &huge,
            None
        )[1]
        .or_all_of
        .is_empty());
    }

    /// Issue 60, attack 5a: a binding is asked about with the role as it is live. alice holds
    /// `admin` in dept (no `bind`); her revision narrows the ClusterRole the release binds in
    /// dept and adds her to the RoleBinding. The API server binds the live (wide) role.
    #[test]
    fn a_binding_is_asked_about_with_the_role_as_it_is_live() {
        let binding = json!({"roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "dept-ops"},
            "subjects": [{"kind": "User", "name": "alice"}]});
        let place = Place::Namespace("dept");
        let narrow =
            json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]});
        let live = json!({"rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["patch"]},
        ]});
        assert_eq!(
            role_ref(RBAC, "rolebindings", place, &binding),
            Some(RoleRef {
                resource: "clusterroles",
                namespace: None,
                name: "dept-ops".into()
            })
        );
        let alice = Authorship::Known(Arc::new(alice()));
        // `admin` in dept: patch rolebindings and configmaps there, no resourcequotas write, no
        // bind.
        let admin_in_dept = |_: &Author, a: &Access| {
            a.namespace.as_deref() == Some("dept")
                && a.verb != "bind"
                && !(a.resource == "resourcequotas" && a.verb != "get")
        };
        let ask = |role: Option<&serde_json::Value>| {
            let needed = needs(
                Write::Patch,
                RBAC,
                "rolebindings",
                place,
                "ops",
                &binding,
                role,
            );
            permission(&alice, &needed, admin_in_dept)
        };
        // Control: asked about the chart's narrowed role, the write would pass.
        assert_eq!(ask(Some(&narrow)), Permission::Granted);
        // Asked about the live role: she lacks `patch resourcequotas` in dept, so bind is refused.
        assert_eq!(
            ask(Some(&live)),
            Permission::Refused(vec![Access::resource(
                "bind",
                RBAC,
                "clusterroles",
                Some("dept"),
                "dept-ops"
            )])
        );
        // No live role: bind alone, as the API server asks.
        assert!(matches!(ask(None), Permission::Refused(_)));
        // A Role is looked for in the binding's own namespace; other kinds refer to none.
        let to_role = json!({"roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "r"}});
        assert_eq!(
            role_ref(RBAC, "rolebindings", place, &to_role).map(|r| (r.resource, r.namespace)),
            Some(("roles", Some("dept".to_string())))
        );
        assert_eq!(role_ref(RBAC, "roles", place, &to_role), None);
        assert_eq!(role_ref("", "configmaps", place, &to_role), None);
    }

    /// Issue 60, attack 5b: the scope of every question comes from discovery. alice holds
    /// `cluster-admin` through a RoleBinding in `own` only: a cluster-scoped custom resource
    /// her chart places in `own` is asked about cluster-wide, where she holds nothing.
    #[test]
    fn a_write_is_asked_about_in_the_scope_discovery_gives() {
        assert_eq!(
            Place::of(Some(true), Some("own")),
            Some(Place::Namespace("own"))
        );
        assert_eq!(Place::of(Some(false), Some("own")), Some(Place::Cluster));
        assert_eq!(Place::of(Some(false), None), Some(Place::Cluster));
        // Unknown scope, or a namespaced kind without a namespace: nothing is asked or written.
        assert_eq!(Place::of(None, Some("own")), None);
        assert_eq!(Place::of(Some(true), None), None);
        assert_eq!(Place::of(Some(true), Some("")), None);
        let alice = Authorship::Known(Arc::new(alice()));
        let admin_in_own = |_: &Author, a: &Access| a.namespace.as_deref() == Some("own");
        let ask = |namespaced| {
            let place = Place::of(Some(namespaced), Some("own")).unwrap();
            let needed = needs(
                Write::Patch,
                "example.com",
                "widgets",
                place,
                "w",
                &json!({}),
                None,
            );
            permission(&alice, &needed, admin_in_own)
        };
        // Control: asked in the namespace the chart gives, the patch would pass.
        assert_eq!(ask(true), Permission::Granted);
        assert_eq!(
            ask(false),
            Permission::Refused(vec![Access::resource(
                "patch",
                "example.com",
                "widgets",
                None,
                "w"
            )])
        );
    }

    #[test]
    fn a_revision_is_followed_only_as_far_as_its_authors_rights_go() {
        let role =
            json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]});
        let needed = needs(
            Write::Patch,
            RBAC,
            "clusterroles",
            Place::Cluster,
            "r",
            &role,
            None,
        );
        let alice = Authorship::Known(Arc::new(alice()));
        let edit_in_team = |_: &Author, a: &Access| a.namespace.as_deref() == Some("team");
        assert_eq!(
            permission(&alice, &needed, edit_in_team),
            Permission::Refused(vec![needed[0].access.clone(), needed[1].access.clone()])
        );
        let cm = needs(
            Write::Patch,
            "",
            "configmaps",
            Place::Namespace("team"),
            "c",
            &json!({}),
            None,
        );
        assert_eq!(permission(&alice, &cm, edit_in_team), Permission::Granted);
        // Patch, and every permission the role grants, without escalate: granted.
        let holds_all = |_: &Author, a: &Access| a.verb != "escalate";
        assert_eq!(permission(&alice, &needed, holds_all), Permission::Granted);
        // Patch without escalate, lacking what the role grants: refused for escalate alone.
        let patch_only = |_: &Author, a: &Access| a.verb == "patch";
        assert_eq!(
            permission(&alice, &needed, patch_only),
            Permission::Refused(vec![needed[1].access.clone()])
        );
        // No author to ask about: nothing is granted.
        let never = |_: &Author, _: &Access| -> bool { panic!("not asked") };
        assert_eq!(
            permission(&Authorship::Unknown(Unknown::NotStamped), &needed, never),
            Permission::NoAuthor(Unknown::NotStamped)
        );
    }

    #[test]
    fn an_unknown_author_holds_only_non_rbac_objects_of_its_own_namespace() {
        let scope =
            |why, group, ns| unknown_author_scope(why, group, ns, "team", Scope::Namespaced);
        assert_eq!(scope(Unknown::NotStamped, "", Some("team")), Ok(()));
        assert_eq!(scope(Unknown::NotStamped, "apps", Some("team")), Ok(()));
        assert_eq!(
            scope(Unknown::NotStamped, RBAC, Some("team")),
            Err(OutOfScope::Rbac)
        );
        assert_eq!(
            scope(Unknown::NotStamped, "", Some("other")),
            Err(OutOfScope::OutsideItsNamespace)
        );
        assert_eq!(
            scope(Unknown::NotStamped, "", None),
            Err(OutOfScope::OutsideItsNamespace)
        );
        // History nobody can be told to have written on purpose is held like an unstamped
        // revision: a stamp of an older locker, or one carried from an earlier write.
        for why in [Unknown::OldProof, Unknown::Replayed, Unknown::WentBack] {
            assert_eq!(scope(why, "", Some("team")), Ok(()));
            assert_eq!(scope(why, RBAC, Some("team")), Err(OutOfScope::Rbac));
        }
        // A custom resource placed in the release's namespace by the index: written only when
        // discovery says its kind is namespaced (a cluster-scoped one would be written
        // cluster-wide).
        let cr = |scope| {
            unknown_author_scope(
                Unknown::NotStamped,
                "example.com",
                Some("team"),
                "team",
                scope,
            )
        };
        assert_eq!(cr(Scope::Namespaced), Ok(()));
        assert_eq!(cr(Scope::Cluster), Err(OutOfScope::OutsideItsNamespace));
        assert_eq!(cr(Scope::Unknown), Err(OutOfScope::ScopeNotKnown));
        // A stamp that does not verify was made on purpose: nothing is held for it.
        for why in [Unknown::BadProof, Unknown::NotRead] {
            assert_eq!(scope(why, "", Some("team")), Err(OutOfScope::NotHeld(why)));
        }
    }
}
