//! Who wrote a release Secret, in a form its writer cannot choose.
//!
//! A release Secret may be written by anyone with Secret write in its namespace (the built-in
//! `edit` role), yet the reverter writes with the locker's cluster-wide rights. So every write of
//! a release Secret is stamped at admission (the `author` mutating webhook, [`crate::stamp`]) with the
//! identity the API server authenticated for it, and the stamp is bound to the Secret's
//! namespace, name and release data by an HMAC whose key only the locker holds (a Secret in its
//! own namespace). The reverter then writes from a revision only what its author could write
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
use std::sync::Arc;

use base64::Engine as _;
use ring::{digest, hmac};
use serde::{Deserialize, Serialize};

use crate::kinds::Scope;

/// The annotation that names the identity of a release Secret's last writer (JSON).
pub(crate) const AUTHOR_ANNOTATION: &str = "helm-locker.io/author";
/// The annotation that proves [`AUTHOR_ANNOTATION`] was written by the locker's webhook.
pub(crate) const PROOF_ANNOTATION: &str = "helm-locker.io/author-proof";
/// The proof's format version, its first characters.
const PROOF_PREFIX: &str = "v1.";
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

    /// What is signed: a Secret's place, its author annotation exactly as written, and the
    /// digest of its release data (the bytes after the Secret's own base64).
    fn message(namespace: &str, name: &str, author_json: &str, release: &[u8]) -> Vec<u8> {
        let data = digest::digest(&digest::SHA256, release);
        let mut message = Vec::with_capacity(64 + namespace.len() + name.len() + author_json.len());
        for part in [
            b"helm-locker.io/author v1".as_slice(),
            namespace.as_bytes(),
            name.as_bytes(),
            author_json.as_bytes(),
            data.as_ref(),
        ] {
            message.extend_from_slice(&(part.len() as u64).to_be_bytes());
            message.extend_from_slice(part);
        }
        message
    }

    /// The proof annotation's value for these contents.
    pub fn prove(&self, namespace: &str, name: &str, author_json: &str, release: &[u8]) -> String {
        let tag = hmac::sign(
            &self.0,
            &Self::message(namespace, name, author_json, release),
        );
        format!(
            "{PROOF_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag.as_ref())
        )
    }

    /// Whether `proof` was made by this key for these contents (compared in constant time).
    pub(crate) fn verify(
        &self,
        namespace: &str,
        name: &str,
        author_json: &str,
        release: &[u8],
        proof: &str,
    ) -> bool {
        let Some(tag) = proof.strip_prefix(PROOF_PREFIX).and_then(|t| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(t)
                .ok()
        }) else {
            return false;
        };
        hmac::verify(
            &self.0,
            &Self::message(namespace, name, author_json, release),
            &tag,
        )
        .is_ok()
    }
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
}

impl Unknown {
    pub fn as_str(self) -> &'static str {
        match self {
            Unknown::NotStamped => {
                "written without the author webhook's stamp (before helm-locker was installed, or while it was away)"
            }
            Unknown::BadProof => "its author stamp does not verify",
            Unknown::NotRead => "not read from the API server",
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

/// What the locker knows of a release Secret as the API server stores it.
#[derive(Clone, Copy, Debug)]
pub struct StoredSecret<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub annotations: Option<&'a BTreeMap<String, String>>,
    pub resource_version: Option<&'a str>,
    /// `data.release`, after the Secret's own base64.
    pub release: &'a [u8],
}

/// The key the stamps are made and checked with.
#[derive(Clone, Debug)]
pub struct Stamping {
    pub key: AuthorKey,
}

/// Who wrote `secret` ([`Authorship`]). Only a stamp this key made for these contents names an
/// author; when the Secret was written (its resourceVersion) does not count.
pub fn authorship(stamping: &Stamping, secret: StoredSecret<'_>) -> Authorship {
    let annotation = |key| secret.annotations.and_then(|a| a.get(key));
    match (annotation(AUTHOR_ANNOTATION), annotation(PROOF_ANNOTATION)) {
        (Some(author_json), Some(proof)) => {
            let verified = stamping.key.verify(
                secret.namespace,
                secret.name,
                author_json,
                secret.release,
                proof,
            );
            match serde_json::from_str::<Author>(author_json) {
                Ok(author) if verified => Authorship::Known(Arc::new(author)),
                _ => Authorship::Unknown(Unknown::BadProof),
            }
        }
        (None, None) => Authorship::Unknown(Unknown::NotStamped),
        _ => Authorship::Unknown(Unknown::BadProof),
    }
}

/// The two annotations the webhook writes on a release Secret.
pub fn stamp_annotations(
    key: &AuthorKey,
    namespace: &str,
    name: &str,
    author: &Author,
    release: &[u8],
) -> [(&'static str, String); 2] {
    let author_json = serde_json::to_string(author).expect("an author serializes");
    let proof = key.prove(namespace, name, &author_json, release);
    [(AUTHOR_ANNOTATION, author_json), (PROOF_ANNOTATION, proof)]
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
    fn resource(
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

/// Everything the author of a revision must be allowed for the reverter to make `write` of
/// `desired` (the chart's object `name` of `resource` in `group`): the verb on the object and,
/// for RBAC objects, what the API server's escalation check asks: `escalate` on a Role or
/// ClusterRole or else every permission it grants; `bind` on the role a binding refers to or
/// else every permission of that role, when `role` (the chart's own object for the role
/// referred to) is given. A revision the reverter will not follow is reported, never widened.
pub fn needs(
    write: Write,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
    name: &str,
    desired: &serde_json::Value,
    role: Option<&serde_json::Value>,
) -> Vec<Need> {
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
                or_all_of: role
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
    if why != Unknown::NotStamped {
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
        Stamping { key: key() }
    }

    fn alice() -> Author {
        Author {
            username: "alice".into(),
            uid: "u-1".into(),
            groups: vec!["system:authenticated".into()],
            extra: BTreeMap::from([("scopes".into(), vec!["a".into()])]),
        }
    }

    fn stamped(author: &Author, release: &[u8]) -> BTreeMap<String, String> {
        stamp_annotations(&key(), "team", "sh.helm.release.v1.ops.v2", author, release)
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
            namespace: "team",
            name: "sh.helm.release.v1.ops.v2",
            annotations,
            resource_version: Some(rv),
            release,
        }
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
        let other = Stamping {
            key: AuthorKey::new(&[8u8; 32]).unwrap(),
        };
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
        let mut junk = annotations;
        junk.insert(PROOF_ANNOTATION.into(), "v1.!!".into());
        assert_eq!(
            authorship(&s, stored(Some(&junk), "500", b"release-2")),
            Authorship::Unknown(Unknown::BadProof)
        );
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
                Some("team"),
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
                Some("team"),
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
            None,
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
            Some("team"),
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
            Some("team"),
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
        assert!(
            needs(Write::Patch, RBAC, "roles", Some("team"), "x", &huge, None)[1]
                .or_all_of
                .is_empty()
        );
    }

    #[test]
    fn a_revision_is_followed_only_as_far_as_its_authors_rights_go() {
        let role =
            json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]});
        let needed = needs(Write::Patch, RBAC, "clusterroles", None, "r", &role, None);
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
            Some("team"),
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
