//! The author webhook's answer (POST `/stamp`): every write of a release Secret (or of a
//! release ConfigMap, Helm's ConfigMap driver) gets the annotations of [`crate::author`] naming
//! who wrote its content, over whatever the writer put there: the identity the API server
//! authenticated for the write when it changes the release's content, else the author the
//! stored object's stamp verifies for ([`crate::content`]), or no stamp at all when that is
//! not known.
//!
//! **A vouch.** A write that carries the annotation [`VOUCH_ANNOTATION`] (what
//! `kubectl locker vouch` sends) is stamped with its writer whatever it keeps: the writer takes
//! responsibility for the revision as it stands (a release the locker found written before it,
//! or while its webhook was away, or under a key made again). That grants nothing: whoever may
//! update the Secret may rewrite the revision and be its author anyway, and the reverter then
//! writes from it only what the voucher may write. The annotation is taken off the stored Secret,
//! so a later write (`kubectl edit`) that carries it along vouches for nothing. The plugin binds
//! each vouch to what it showed: [`VOUCH_CONTENT_ANNOTATION`] names the content's digest, and a
//! vouch whose write holds other content is refused (as is, by the API server, one whose
//! `resourceVersion` precondition no longer holds).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::author::{
    authorship, stamp_annotations, unix_seconds, Author, AuthorKey, Authorship, Stamping,
    StoredSecret, AUTHOR_ANNOTATION, PROOF_ANNOTATION,
};
use crate::release::Driver;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StampReview {
    #[serde(default)]
    api_version: String,
    request: Option<StampRequest>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StampRequest {
    uid: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    name: Option<String>,
    /// The kind written (`Secret`, `ConfigMap`); the webhook is sent nothing else.
    #[serde(default)]
    kind: Option<RequestKind>,
    #[serde(default)]
    user_info: Author,
    #[serde(default)]
    object: Option<StampObject>,
    /// The Secret as stored, on an UPDATE.
    #[serde(default)]
    old_object: Option<StampObject>,
}

#[derive(Deserialize)]
struct RequestKind {
    #[serde(default)]
    kind: String,
}

#[derive(Deserialize)]
struct StampObject {
    #[serde(default, rename = "type")]
    type_: Option<String>,
    #[serde(default)]
    metadata: StampMetadata,
    #[serde(default)]
    data: Option<BTreeMap<String, Option<String>>>,
}

impl StampObject {
    fn data_release(&self) -> Option<&str> {
        self.data
            .as_ref()
            .and_then(|d| d.get("release"))
            .and_then(Option::as_deref)
    }

    /// Whether this is a revision of a release as `driver` stores it: a Secret of Helm's type,
    /// or a ConfigMap labelled `owner=helm` that carries `data.release` (a ConfigMap has no
    /// type to say so).
    fn is_release(&self, driver: Driver) -> bool {
        let owner = self
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("owner"))
            .map(String::as_str);
        driver.stamps_as_revision(self.type_.as_deref(), owner, self.data_release().is_some())
    }

    /// Helm's layer of `data.release` (empty when absent): a Secret's after its own base64
    /// (`None`: not base64), a ConfigMap's as it is.
    fn release(&self, driver: Driver) -> Option<Vec<u8>> {
        match self.data_release() {
            None => Some(Vec::new()),
            Some(data) => driver.spec().payload.helm_layer(data),
        }
    }
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StampMetadata {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    creation_timestamp: Option<String>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
}

/// The annotation by which a writer takes responsibility for a release revision as it stands
/// (its value: why, for people reading the write in the audit log).
pub const VOUCH_ANNOTATION: &str = "helm-locker.io/vouch";

/// The annotation that binds a vouch to the content its voucher was shown: the
/// [`vouch_content`] of the revision `kubectl locker vouch` read. A vouch whose write holds other
/// content is refused; the annotation is never stored, and alone vouches for nothing.
pub const VOUCH_CONTENT_ANNOTATION: &str = "helm-locker.io/vouch-content";

/// What [`VOUCH_CONTENT_ANNOTATION`] names of a revision: `sha256:` and the hex SHA-256 of
/// Helm's layer of its `data.release` (a Secret's after its own base64, a ConfigMap's as it is).
pub fn vouch_content(release: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, release);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Who a write of a release Secret is stamped with.
#[derive(Debug, PartialEq, Eq)]
enum Stamp {
    /// Its content is this author's: the writer's, or the stored revision's verified author.
    By(Author),
    /// The write keeps content whose author is not known: no stamp (the writer's would name
    /// the wrong author, the old one does not verify).
    Nobody,
}

/// Who the content of a release Secret written as `new` (replacing `old`, on an UPDATE) is by:
/// the writer's unless the write leaves the release content as it was (the same bytes, or
/// [`crate::content::content_kept`]); then the author the stored Secret's stamp verifies for
/// ([`authorship`], with the stored Secret's creation time), or nobody. The payloads are
/// decoded only when that makes a difference: not when the stored revision is the writer's own
/// (Helm finishing or superseding its own revision), nor when the bytes are the same.
fn author_of_write(
    key: &AuthorKey,
    driver: Driver,
    namespace: &str,
    name: &str,
    writer: Author,
    old: Option<&StampObject>,
    release: &[u8],
) -> Stamp {
    let Some(old) = old.filter(|o| o.is_release(driver)) else {
        return Stamp::By(writer);
    };
    let Some(old_release) = old.release(driver) else {
        return Stamp::By(writer);
    };
    let stored = StoredSecret {
        driver,
        namespace,
        name: old.metadata.name.as_deref().unwrap_or(name),
        annotations: old.metadata.annotations.as_ref(),
        resource_version: None,
        created: old
            .metadata
            .creation_timestamp
            .as_deref()
            .and_then(unix_seconds),
        release: &old_release,
    };
    let stamping = Stamping::new(key.clone());
    let before = authorship(&stamping, stored);
    if matches!(&before, Authorship::Known(author) if **author == writer) {
        return Stamp::By(writer);
    }
    if old_release != release && !crate::content::content_kept(&old_release, release) {
        return Stamp::By(writer);
    }
    match before {
        Authorship::Known(author) => Stamp::By(Author::clone(&author)),
        Authorship::Unknown(_) => Stamp::Nobody,
    }
}

/// The denial of a release object written without a name (`metadata.generateName`).
fn unnamed_release(driver: Driver) -> String {
    format!(
        "helm-locker: a Helm release {} (owner=helm, with data.release) must be created with a name: \
         Helm names every revision sh.helm.release.v1.<release>.v<revision>, and a revision named by \
         the API server (metadata.generateName) cannot carry the author stamp",
        driver.kind()
    )
}

fn pointer(key: &str) -> String {
    format!(
        "/metadata/annotations{}",
        crate::ownership::pointer_segment(key)
    )
}

/// The `author` webhook's answer to an AdmissionReview of a Secret or ConfigMap write, at
/// `now` (Unix seconds, the locker's clock): a release Secret (`type: helm.sh/release.v1`) or
/// release ConfigMap (labelled `owner=helm`, with `data.release`; the request's kind says it
/// is a ConfigMap) gets the annotations of the author of its content (replacing whatever the
/// writer put there), or loses them when that author is not known; anything else is allowed
/// unchanged. Both are stamped over the same bytes, Helm's layer of the release, and the stamp
/// names the kind it was made for. Errors: the body is not a review of an object the locker
/// can read.
pub fn stamp(
    key: &AuthorKey,
    body: &[u8],
    now: i64,
) -> Result<Vec<u8>, crate::review::ReviewError> {
    use crate::review::{render_response, ReviewError, Verdict};
    let review: StampReview =
        serde_json::from_slice(body).map_err(|e| ReviewError::NotJson(e.to_string()))?;
    let api_version = review.api_version;
    if api_version != "admission.k8s.io/v1" {
        return Err(ReviewError::UnsupportedVersion(api_version));
    }
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    let driver = request
        .kind
        .as_ref()
        .and_then(|k| Driver::of_kind(&k.kind))
        .unwrap_or_default();
    let Some(object) = request.object.filter(|o| o.is_release(driver)) else {
        return Ok(render_response(&api_version, &request.uid, Verdict::Allow));
    };
    let namespace = request.namespace.unwrap_or_default();
    let name = object
        .metadata
        .name
        .clone()
        .or(request.name)
        .unwrap_or_default();
    if name.is_empty() {
        // `metadata.generateName`: the API server names the object after admission, so a
        // stamp made now would be over a name it never has and never verify, and a stamp that
        // fails must not be a way to be "unknown" instead of "known and refused". Helm always
        // names its revisions; nobody needs this write.
        let message = unnamed_release(driver);
        return Ok(render_response(
            &api_version,
            &request.uid,
            Verdict::Deny(&message),
        ));
    }
    let release = object
        .release(driver)
        .ok_or_else(|| ReviewError::BadRequest("data.release is not base64".into()))?;
    let vouched = object
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(VOUCH_ANNOTATION));
    let shown = object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(VOUCH_CONTENT_ANNOTATION));
    if let (true, Some(shown)) = (vouched, shown) {
        let written = vouch_content(&release);
        if *shown != written {
            let message = format!(
                "helm-locker: this vouch for {namespace}/{name} names {shown}, which is not the content written ({written}): the revision changed since it was shown; run kubectl locker vouch again to see it"
            );
            return Ok(render_response(
                &api_version,
                &request.uid,
                Verdict::Deny(&message),
            ));
        }
    }
    let shown = shown.is_some();
    let author = if vouched {
        Stamp::By(request.user_info)
    } else {
        author_of_write(
            key,
            driver,
            &namespace,
            &name,
            request.user_info,
            request.old_object.as_ref(),
            &release,
        )
    };
    let mut patch = match (author, &object.metadata.annotations) {
        (Stamp::By(author), annotations) => {
            let stamp = stamp_annotations(key, driver, &namespace, &name, &author, now, &release);
            match annotations {
                None => vec![serde_json::json!({
                    "op": "add",
                    "path": "/metadata/annotations",
                    "value": stamp.iter().cloned().collect::<BTreeMap<_, _>>(),
                })],
                Some(_) => stamp
                    .iter()
                    .map(|(k, v)| serde_json::json!({"op": "add", "path": pointer(k), "value": v}))
                    .collect(),
            }
        }
        // Only what is there is removed: a patch that does not apply fails the write.
        (Stamp::Nobody, annotations) => [AUTHOR_ANNOTATION, PROOF_ANNOTATION]
            .into_iter()
            .filter(|k| annotations.as_ref().is_some_and(|a| a.contains_key(*k)))
            .map(|k| serde_json::json!({"op": "remove", "path": pointer(k)}))
            .collect(),
    };
    if vouched {
        patch.push(serde_json::json!({"op": "remove", "path": pointer(VOUCH_ANNOTATION)}));
    }
    if shown {
        patch.push(serde_json::json!({"op": "remove", "path": pointer(VOUCH_CONTENT_ANNOTATION)}));
    }
    if patch.is_empty() {
        return Ok(render_response(&api_version, &request.uid, Verdict::Allow));
    }
    let patch: json_patch::Patch =
        serde_json::from_value(serde_json::Value::Array(patch)).expect("a JSON patch");
    Ok(render_response(
        &api_version,
        &request.uid,
        Verdict::Mutate(&patch),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::author::{Authorship, Stamping, StoredSecret, Unknown, STAMP_WINDOW_SECONDS};
    use crate::driver::RELEASE_SECRET_TYPE;
    use base64::Engine as _;
    use serde_json::{json, Value};
    use std::io::Write as _;
    use std::sync::Arc;

    /// When the tests' Secrets are created ("2027-01-15T08:00:00Z").
    const CREATED: i64 = 1_800_000_000;
    const CREATED_TEXT: &str = "2027-01-15T08:00:00Z";

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
            extra: BTreeMap::from([("scopes".to_string(), vec!["a".to_string()])]),
        }
    }

    fn alice_json() -> Value {
        json!({"username": "alice", "uid": "u-1", "groups": ["system:authenticated"], "extra": {"scopes": ["a"]}})
    }

    fn admin() -> Author {
        Author {
            username: "admin".into(),
            groups: vec!["system:masters".into()],
            ..Author::default()
        }
    }

    fn admin_json() -> Value {
        json!({"username": "admin", "groups": ["system:masters"]})
    }

    fn review(object: Value, user: Value) -> Vec<u8> {
        update(object, Value::Null, user)
    }

    fn update(object: Value, old: Value, user: Value) -> Vec<u8> {
        let mut request = json!({
            "uid": "r-1",
            "namespace": "team",
            "name": "sh.helm.release.v1.ops.v2",
            "operation": if old.is_null() { "CREATE" } else { "UPDATE" },
            "userInfo": user,
            "object": object,
        });
        if !old.is_null() {
            request["oldObject"] = old;
        }
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": request,
        }))
        .unwrap()
    }

    fn response(body: &[u8]) -> Value {
        let response: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(response["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(response["response"]["uid"], "r-1");
        assert_eq!(response["response"]["allowed"], true);
        response
    }

    fn applied(body: &[u8], object: Value) -> Value {
        let response = response(body);
        let Some(patch) = response["response"]["patch"].as_str() else {
            return object;
        };
        assert_eq!(response["response"]["patchType"], "JSONPatch");
        let patch = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
        let mut object = object;
        json_patch::patch(&mut object, &patch).unwrap();
        object
    }

    /// A release as Helm encodes it (Helm's base64 of gzip of JSON).
    fn helm(release: &Value) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&serde_json::to_vec(release).unwrap()).unwrap();
        base64::engine::general_purpose::STANDARD
            .encode(gz.finish().unwrap())
            .into_bytes()
    }

    fn release(manifest: &str, status: &str) -> Value {
        json!({
            "name": "ops", "namespace": "team", "version": 2,
            "info": {"status": status, "description": "Upgrade complete"},
            "chart": {"metadata": {"name": "ops-agent", "version": "0.1.0"}},
            "manifest": manifest,
            "hooks": [{"name": "ops-test", "kind": "ConfigMap", "manifest": "kind: ConfigMap", "events": ["test"]}],
        })
    }

    /// helm test's rewrite: the hook's last run recorded, nothing else.
    fn tested(mut release: Value) -> Value {
        release["hooks"][0]["last_run"] =
            json!({"started_at": "2027-01-15T08:10:00Z", "phase": "Succeeded"});
        release
    }

    /// A release Secret as stored (or sent), with these annotations.
    fn secret(release: &Value, annotations: Option<Value>) -> Value {
        let mut object = json!({
            "apiVersion": "v1", "kind": "Secret", "type": RELEASE_SECRET_TYPE,
            "metadata": {"name": "sh.helm.release.v1.ops.v2", "namespace": "team",
                         "creationTimestamp": CREATED_TEXT},
            "data": {"release": base64::engine::general_purpose::STANDARD.encode(helm(release))},
        });
        if let Some(a) = annotations {
            object["metadata"]["annotations"] = a;
        }
        object
    }

    /// `object` as the API server stores it once `user` wrote it (CREATE when `old` is null)
    /// at `now`.
    fn written(object: Value, old: Value, user: Value, now: i64) -> Value {
        let body = stamp(&key(), &update(object.clone(), old, user), now).unwrap();
        applied(&body, object)
    }

    fn annotations_of(object: &Value) -> BTreeMap<String, String> {
        serde_json::from_value(object["metadata"]["annotations"].clone()).unwrap_or_default()
    }

    /// Who the reverter reads as the author of the stored `object`.
    fn author(object: &Value) -> Authorship {
        let annotations = annotations_of(object);
        let release = base64::engine::general_purpose::STANDARD
            .decode(object["data"]["release"].as_str().unwrap())
            .unwrap();
        authorship(
            &stamping(),
            StoredSecret {
                driver: Driver::Secret,
                namespace: "team",
                name: "sh.helm.release.v1.ops.v2",
                annotations: Some(&annotations),
                resource_version: Some("900"),
                created: Some(CREATED),
                release: &release,
            },
        )
    }

    fn known(author: Author) -> Authorship {
        Authorship::Known(Arc::new(author))
    }

    #[test]
    fn the_webhook_stamps_a_release_secret_with_the_authenticated_user_over_what_the_writer_put() {
        let data = base64::engine::general_purpose::STANDARD.encode(b"H4sI-release");
        // Without annotations, and with a forged stamp naming an admin.
        for annotations in [
            None,
            Some(
                json!({"keep": "me", AUTHOR_ANNOTATION: "{\"username\":\"admin\"}", PROOF_ANNOTATION: "v2.1.AAAA"}),
            ),
        ] {
            let mut object = json!({
                "apiVersion": "v1", "kind": "Secret", "type": RELEASE_SECRET_TYPE,
                "metadata": {"name": "sh.helm.release.v1.ops.v2", "namespace": "team"},
                "data": {"release": data},
            });
            if let Some(a) = &annotations {
                object["metadata"]["annotations"] = a.clone();
            }
            let body = stamp(&key(), &review(object.clone(), alice_json()), CREATED).unwrap();
            let stored_object = applied(&body, object);
            let annotations = annotations_of(&stored_object);
            let secret = StoredSecret {
                driver: Driver::Secret,
                namespace: "team",
                name: "sh.helm.release.v1.ops.v2",
                annotations: Some(&annotations),
                resource_version: Some("900"),
                created: Some(CREATED + 1),
                release: b"H4sI-release",
            };
            assert_eq!(authorship(&stamping(), secret), known(alice()));
            if annotations.contains_key("keep") {
                assert_eq!(annotations["keep"], "me");
            }
        }
    }

    /// A release ConfigMap as Helm's ConfigMap driver stores it: Helm's layer as a plain string.
    fn config_map(release: &Value, annotations: Option<Value>) -> Value {
        let mut object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "sh.helm.release.v1.ops.v2", "namespace": "team",
                         "creationTimestamp": CREATED_TEXT,
                         "labels": {"owner": "helm", "name": "ops", "status": "deployed", "version": "2"}},
            "data": {"release": String::from_utf8(helm(release)).unwrap()},
        });
        if let Some(a) = annotations {
            object["metadata"]["annotations"] = a;
        }
        object
    }

    /// `object` as the API server stores a ConfigMap once `user` wrote it (CREATE when `old`
    /// is null) at `now`: the request names its kind.
    fn written_config_map(object: Value, old: Value, user: Value, now: i64) -> Value {
        written_kind("ConfigMap", object, old, user, now)
    }

    /// `object` as the API server stores an object of `kind` once `user` wrote it.
    fn written_kind(kind: &str, object: Value, old: Value, user: Value, now: i64) -> Value {
        let mut review: Value = serde_json::from_slice(&update(object.clone(), old, user)).unwrap();
        review["request"]["kind"] = json!({"group": "", "version": "v1", "kind": kind});
        let body = stamp(&key(), &serde_json::to_vec(&review).unwrap(), now).unwrap();
        applied(&body, object)
    }

    /// Who the reverter reads as the author of the stored release `object` of `driver`.
    fn author_as(object: &Value, driver: Driver) -> Authorship {
        let annotations = annotations_of(object);
        let data = object["data"]["release"].as_str().unwrap();
        let release = driver.spec().payload.helm_layer(data).unwrap();
        authorship(
            &stamping(),
            StoredSecret {
                driver,
                namespace: "team",
                name: "sh.helm.release.v1.ops.v2",
                annotations: Some(&annotations),
                resource_version: Some("900"),
                created: Some(CREATED),
                release: &release,
            },
        )
    }

    #[test]
    fn a_release_config_map_is_stamped_over_helms_layer_and_its_stamp_holds_only_on_a_config_map() {
        let content = release("---\nkind: ConfigMap\n", "deployed");
        // Written by alice, over a forged stamp naming the admin: hers.
        let forged =
            json!({AUTHOR_ANNOTATION: admin_json().to_string(), PROOF_ANNOTATION: "v2.1.AAAA"});
        let stored = written_config_map(
            config_map(&content, Some(forged)),
            Value::Null,
            alice_json(),
            CREATED,
        );
        assert_eq!(author_as(&stored, Driver::ConfigMap), known(alice()));
        // The same annotations on the Secret of that name and content (a copy) verify nothing,
        // and a Secret's stamp verifies nothing on the ConfigMap.
        let mut copied = secret(&content, stored["metadata"].get("annotations").cloned());
        assert_eq!(
            author_as(&copied, Driver::Secret),
            Authorship::Unknown(Unknown::BadProof)
        );
        copied = written(secret(&content, None), Value::Null, alice_json(), CREATED);
        let carried = config_map(&content, copied["metadata"].get("annotations").cloned());
        assert_eq!(
            author_as(&carried, Driver::ConfigMap),
            Authorship::Unknown(Unknown::BadProof)
        );
        // Helm's rewrite of it (helm test, a status change) by the admin keeps alice's stamp.
        let after = written_config_map(
            config_map(&tested(content.clone()), None),
            stored.clone(),
            admin_json(),
            CREATED + 600,
        );
        assert_eq!(author_as(&after, Driver::ConfigMap), known(alice()));
        // A change of its content is the writer's.
        let other = release("---\nkind: ClusterRole\n", "deployed");
        let after = written_config_map(
            config_map(&other, None),
            stored,
            admin_json(),
            CREATED + 600,
        );
        assert_eq!(author_as(&after, Driver::ConfigMap), known(admin()));
    }

    /// A third driver, the tests' own (`Driver::Fake`, a kind of no API server), is stamped
    /// through its spec alone: its stamp is its writer's and verifies on no other kind's object
    /// of the same namespace, name and content, nor theirs on it.
    #[test]
    fn a_third_drivers_revision_is_stamped_by_its_spec_and_its_stamp_holds_only_on_its_kind() {
        let content = release("---\nkind: ConfigMap\n", "deployed");
        let mut fake = config_map(&content, None);
        fake["kind"] = json!("FakeStore");
        let stored = written_kind("FakeStore", fake, Value::Null, alice_json(), CREATED);
        assert!(
            annotations_of(&stored).contains_key(PROOF_ANNOTATION),
            "stamped: {stored}"
        );
        assert_eq!(author_as(&stored, Driver::Fake), known(alice()));
        let annotations = stored["metadata"].get("annotations").cloned();
        for other in [
            config_map(&content, annotations.clone()),
            secret(&content, annotations),
        ] {
            let driver = Driver::of_kind(other["kind"].as_str().unwrap()).unwrap();
            assert_eq!(
                author_as(&other, driver),
                Authorship::Unknown(Unknown::BadProof),
                "{driver}"
            );
        }
        let on_config_map = written_config_map(
            config_map(&content, None),
            Value::Null,
            alice_json(),
            CREATED,
        );
        let mut carried = on_config_map.clone();
        carried["kind"] = json!("FakeStore");
        assert_eq!(
            author_as(&carried, Driver::Fake),
            Authorship::Unknown(Unknown::BadProof)
        );
        // The control: the ConfigMap's own stamp holds on it.
        assert_eq!(author_as(&on_config_map, Driver::ConfigMap), known(alice()));
    }

    #[test]
    fn a_release_object_without_a_name_is_refused_never_stamped_over_no_name() {
        // generateName: no name at mutating admission, in the object or the request.
        let data = base64::engine::general_purpose::STANDARD.encode(b"H4sI-release");
        let nameless = |kind: &str| {
            let mut object = json!({
                "apiVersion": "v1", "kind": kind,
                "metadata": {"generateName": "sh.helm.release.v1.web.v", "namespace": "flux-system",
                             "labels": {"owner": "helm", "name": "web", "status": "deployed", "version": "1"}},
                "data": {"release": if kind == "Secret" { data.clone() } else { "H4sI-release".to_string() }},
            });
            if kind == "Secret" {
                object["type"] = json!(RELEASE_SECRET_TYPE);
            }
            let mut body: Value = serde_json::from_slice(&review(object, alice_json())).unwrap();
            body["request"]["name"] = json!("");
            body["request"]["kind"] = json!({"group": "", "version": "v1", "kind": kind});
            serde_json::to_vec(&body).unwrap()
        };
        for kind in ["ConfigMap", "Secret"] {
            let answer: Value =
                serde_json::from_slice(&stamp(&key(), &nameless(kind), CREATED).unwrap()).unwrap();
            assert_eq!(answer["response"]["allowed"], false, "{kind}: {answer}");
            assert_eq!(answer["response"]["status"]["code"], 403);
            let message = answer["response"]["status"]["message"].as_str().unwrap();
            assert!(
                message.contains(&format!("release {kind}")) && message.contains("generateName"),
                "{message}"
            );
            assert!(answer["response"].get("patch").is_none());
        }
        // The control: the same ConfigMap with a name is stamped with its writer.
        let mut named: Value = serde_json::from_slice(&nameless("ConfigMap")).unwrap();
        named["request"]["name"] = json!("sh.helm.release.v1.web.v1");
        let answer = stamp(&key(), &serde_json::to_vec(&named).unwrap(), CREATED).unwrap();
        let stamped = annotations_of(&applied(&answer, named["request"]["object"].clone()));
        assert!(stamped[AUTHOR_ANNOTATION].contains("alice"), "{stamped:?}");
        // A ConfigMap that is no release passes, named or not.
        let plain = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"generateName": "cache-"}, "data": {"k": "v"}});
        let mut body: Value = serde_json::from_slice(&review(plain, alice_json())).unwrap();
        body["request"]["name"] = json!("");
        body["request"]["kind"] = json!({"kind": "ConfigMap"});
        let answer = stamp(&key(), &serde_json::to_vec(&body).unwrap(), CREATED).unwrap();
        assert!(response(&answer)["response"].get("patch").is_none());
    }

    #[test]
    fn a_config_map_that_is_no_release_passes_unchanged() {
        let content = release("---\nkind: ConfigMap\n", "deployed");
        let mut unlabelled = config_map(&content, None);
        unlabelled["metadata"]["labels"] = json!({"app": "web"});
        let mut no_release = config_map(&content, None);
        no_release["data"] = json!({"greeting": "hello"});
        for object in [unlabelled, no_release] {
            assert_eq!(
                written_config_map(object.clone(), Value::Null, alice_json(), CREATED),
                object
            );
        }
        // A ConfigMap's data is a plain string: not read as a Secret's base64 (which it is
        // not), and never an error.
        let mut plain = config_map(&content, None);
        plain["data"]["release"] = json!("not base64 at all!");
        let stored = written_config_map(plain.clone(), Value::Null, alice_json(), CREATED);
        assert!(annotations_of(&stored).contains_key(AUTHOR_ANNOTATION));
    }

    #[test]
    fn other_secrets_pass_unchanged_and_a_bad_review_is_an_error() {
        let object = json!({"kind": "Secret", "type": "Opaque", "metadata": {"name": "x"}, "data": {"release": "!!"}});
        let body = stamp(&key(), &review(object, json!({"username": "alice"})), 0).unwrap();
        let response = response(&body);
        assert!(response["response"].get("patch").is_none());
        // A release Secret whose data is not base64 cannot be stamped.
        let object = json!({"kind": "Secret", "type": RELEASE_SECRET_TYPE, "metadata": {"name": "x"}, "data": {"release": "!!"}});
        assert!(stamp(&key(), &review(object, json!({"username": "alice"})), 0).is_err());
        assert!(stamp(&key(), b"{not json", 0).is_err());
        assert!(stamp(&key(), br#"{"apiVersion":"admission.k8s.io/v1"}"#, 0).is_err());
    }

    #[test]
    fn a_rewrite_that_keeps_the_content_keeps_its_verified_author() {
        // alice writes revision 2 of the admin's release (CREATE): hers.
        let forged = release("---\nkind: ClusterRole\nrules: everything\n", "deployed");
        let stored = written(secret(&forged, None), Value::Null, alice_json(), CREATED);
        assert_eq!(author(&stored), known(alice()));
        // The admin's helm test rewrites it as Helm does (a new object, no annotations), ten
        // minutes later: still alice's, and the new stamp holds on the stored Secret.
        let later = CREATED + 600;
        let after_test = written(
            secret(&tested(forged.clone()), None),
            stored.clone(),
            admin_json(),
            later,
        );
        assert_eq!(author(&after_test), known(alice()));
        // So does a status change (Helm superseding it, Flux's unlock), and a rewrite that
        // carries the old annotations along (kubectl edit).
        let mut superseded = tested(forged.clone());
        superseded["info"] = json!({"status": "superseded", "description": "Superseded"});
        let after = written(
            secret(&superseded, None),
            after_test.clone(),
            admin_json(),
            later + 1,
        );
        assert_eq!(author(&after), known(alice()));
        let carried = secret(
            &superseded,
            after
                .get("metadata")
                .and_then(|m| m.get("annotations"))
                .cloned(),
        );
        let after = written(carried, after.clone(), admin_json(), later + 2);
        assert_eq!(author(&after), known(alice()));
        // The admin's own revision rewritten by alice without changing it stays the admin's.
        let admins = release("---\nkind: ConfigMap\n", "deployed");
        let stored = written(secret(&admins, None), Value::Null, admin_json(), CREATED);
        let after = written(secret(&tested(admins), None), stored, alice_json(), later);
        assert_eq!(author(&after), known(admin()));
    }

    #[test]
    fn a_vouch_makes_its_writer_the_author_of_the_revision_as_it_stands_and_is_taken_off() {
        let content = release("---\nkind: ConfigMap\n", "deployed");
        let unstamped = secret(&content, None);
        assert_eq!(author(&unstamped), Authorship::Unknown(Unknown::NotStamped));
        let later = CREATED + 86_400;
        // Rewritten as it is: still nobody's (the content's author is not known).
        let kept = written(unstamped.clone(), unstamped.clone(), admin_json(), later);
        assert_eq!(author(&kept), Authorship::Unknown(Unknown::NotStamped));
        // Vouched for: the voucher's, a day after the Secret was created; the annotation is
        // not stored.
        let mut vouch = unstamped.clone();
        vouch["metadata"]["annotations"] =
            json!({VOUCH_ANNOTATION: "INC-7: found at install", "keep": "me"});
        let vouched = written(vouch, unstamped.clone(), admin_json(), later);
        assert_eq!(author(&vouched), known(admin()));
        let annotations = annotations_of(&vouched);
        assert!(
            !annotations.contains_key(VOUCH_ANNOTATION),
            "{annotations:?}"
        );
        assert_eq!(annotations["keep"], "me");
        // A later rewrite by someone else keeps the voucher (the content is kept).
        let after = written(
            secret(&tested(content), None),
            vouched.clone(),
            alice_json(),
            later + 1,
        );
        assert_eq!(author(&after), known(admin()));
        // A vouch replaces a known author too: the voucher takes the revision over.
        let mut again = vouched.clone();
        again["metadata"]["annotations"][VOUCH_ANNOTATION] = json!("mine now");
        let taken = written(again, vouched, alice_json(), later + 2);
        assert_eq!(author(&taken), known(alice()));
    }

    /// The digest `kubectl locker vouch` sends of the revision it showed.
    fn shown(release: &Value) -> String {
        vouch_content(&helm(release))
    }

    #[test]
    fn a_vouch_for_other_content_than_it_showed_is_refused() {
        // alice's revision: the admin was shown her first content, then she changed it.
        let shown_content = release("---\nkind: ConfigMap\n", "deployed");
        let changed = release(
            "---\nkind: ClusterRoleBinding\nsubjects: [alice]\n",
            "deployed",
        );
        let stored = secret(&changed, None);
        let mut vouch = stored.clone();
        vouch["metadata"]["annotations"] = json!({
            VOUCH_ANNOTATION: "found at install",
            VOUCH_CONTENT_ANNOTATION: shown(&shown_content),
        });
        let body = stamp(
            &key(),
            &update(vouch, stored.clone(), admin_json()),
            CREATED + 60,
        )
        .unwrap();
        let answer: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
        let message = answer["response"]["status"]["message"].as_str().unwrap();
        assert!(message.contains("not the content"), "{message}");
        // The content shown: vouched, and neither annotation is stored.
        let mut vouch = stored.clone();
        vouch["metadata"]["annotations"] = json!({
            VOUCH_ANNOTATION: "found at install",
            VOUCH_CONTENT_ANNOTATION: shown(&changed),
        });
        let vouched = written(vouch, stored, admin_json(), CREATED + 60);
        assert_eq!(author(&vouched), known(admin()));
        let annotations = annotations_of(&vouched);
        assert!(
            !annotations.contains_key(VOUCH_ANNOTATION)
                && !annotations.contains_key(VOUCH_CONTENT_ANNOTATION),
            "{annotations:?}"
        );
        // The digest alone vouches for nothing, and is not stored either.
        let plain = secret(&changed, None);
        let mut carried = plain.clone();
        carried["metadata"]["annotations"] = json!({VOUCH_CONTENT_ANNOTATION: shown(&changed)});
        let after = written(carried, plain, alice_json(), CREATED + 61);
        assert_eq!(author(&after), Authorship::Unknown(Unknown::NotStamped));
        assert!(!annotations_of(&after).contains_key(VOUCH_CONTENT_ANNOTATION));
    }

    #[test]
    fn a_rewrite_of_content_whose_author_is_not_known_stays_unknown() {
        let content = release("---\nkind: ClusterRole\nrules: everything\n", "deployed");
        let (later, unstamped) = (CREATED + 600, secret(&content, None));
        // Stored without a stamp (written while the webhook was away), with a stamp that does
        // not verify, with one carried from an earlier write, with one of an older locker.
        let forged_stamp = json!({"note": "kept", AUTHOR_ANNOTATION: admin_json().to_string(), PROOF_ANNOTATION: "v2.1.AAAA"});
        let stamped = written(unstamped.clone(), Value::Null, alice_json(), CREATED);
        let mut replayed = stamped.clone();
        replayed["metadata"]["creationTimestamp"] = json!("2027-01-15T08:01:01Z");
        let author_json = serde_json::to_string(&alice()).unwrap();
        let mut old_locker = unstamped.clone();
        old_locker["metadata"]["annotations"] = json!({
            AUTHOR_ANNOTATION: author_json,
            PROOF_ANNOTATION: key().prove_v1("team", "sh.helm.release.v1.ops.v2", &author_json, &helm(&content)),
        });
        assert_eq!(author(&old_locker), Authorship::Unknown(Unknown::OldProof));
        for old in [
            unstamped.clone(),
            secret(&content, Some(forged_stamp.clone())),
            replayed,
            old_locker,
        ] {
            // Helm's rewrite (no annotations): none added.
            let after = written(
                secret(&tested(content.clone()), None),
                old.clone(),
                admin_json(),
                later,
            );
            assert_eq!(
                author(&after),
                Authorship::Unknown(Unknown::NotStamped),
                "{old}"
            );
            // A rewrite that carries the stored annotations: the stamp is removed, the rest kept.
            let carried = secret(
                &tested(content.clone()),
                old["metadata"].get("annotations").cloned(),
            );
            let after = written(carried, old.clone(), admin_json(), later);
            assert_eq!(
                author(&after),
                Authorship::Unknown(Unknown::NotStamped),
                "{old}"
            );
            if old["metadata"]["annotations"].get("note").is_some() {
                assert_eq!(annotations_of(&after)["note"], "kept");
            }
        }
        // The window's edge: a stored stamp made 60 s before the Secret was created still holds.
        let mut edge = stamped.clone();
        edge["metadata"]["creationTimestamp"] = json!("2027-01-15T08:01:00Z");
        assert_eq!(STAMP_WINDOW_SECONDS, 60);
        let after = written(
            secret(&tested(content.clone()), None),
            edge,
            admin_json(),
            later,
        );
        assert_eq!(author(&after), known(alice()));
    }

    #[test]
    fn a_change_of_content_is_stamped_with_its_writer() {
        let admins = release("---\nkind: ConfigMap\n", "deployed");
        let stored = written(secret(&admins, None), Value::Null, admin_json(), CREATED);
        let later = CREATED + 600;
        // alice changes the manifest of the admin's revision in place.
        let hers = release("---\nkind: ClusterRole\nrules: everything\n", "deployed");
        let after = written(secret(&hers, None), stored.clone(), alice_json(), later);
        assert_eq!(author(&after), known(alice()));
        // ... even carrying the admin's stamp along with her change.
        let carried = secret(&hers, stored["metadata"].get("annotations").cloned());
        let after = written(carried, stored.clone(), alice_json(), later);
        assert_eq!(author(&after), known(alice()));
        // An old revision brought back (superseded -> deployed) is the writer's.
        let superseded = release("---\nkind: ConfigMap\n", "superseded");
        let stored = written(
            secret(&superseded, None),
            Value::Null,
            admin_json(),
            CREATED,
        );
        let after = written(secret(&admins, None), stored, alice_json(), later);
        assert_eq!(author(&after), known(alice()));
        // Over an unstamped Secret too.
        let after = written(
            secret(&hers, None),
            secret(&admins, None),
            alice_json(),
            later,
        );
        assert_eq!(author(&after), known(alice()));
    }

    #[test]
    fn the_same_bytes_are_the_same_content_even_when_they_are_no_release() {
        // kubectl annotate, label: the data is untouched; nothing needs decoding.
        let data = base64::engine::general_purpose::STANDARD.encode(b"H4sI-release");
        let object = json!({
            "apiVersion": "v1", "kind": "Secret", "type": RELEASE_SECRET_TYPE,
            "metadata": {"name": "sh.helm.release.v1.ops.v2", "namespace": "team", "creationTimestamp": CREATED_TEXT},
            "data": {"release": data},
        });
        let stored = written(object.clone(), Value::Null, alice_json(), CREATED);
        let mut relabelled = stored.clone();
        relabelled["metadata"]["labels"] = json!({"status": "superseded"});
        let after = written(relabelled, stored.clone(), admin_json(), CREATED + 600);
        let annotations = annotations_of(&after);
        let check = authorship(
            &stamping(),
            StoredSecret {
                driver: Driver::Secret,
                namespace: "team",
                name: "sh.helm.release.v1.ops.v2",
                annotations: Some(&annotations),
                resource_version: None,
                created: Some(CREATED),
                release: b"H4sI-release",
            },
        );
        assert_eq!(check, known(alice()));
        // Other bytes that are no release are a change: the writer's.
        let mut other = stored.clone();
        other["data"]["release"] =
            json!(base64::engine::general_purpose::STANDARD.encode(b"H4sI-other"));
        let after = written(other, stored, admin_json(), CREATED + 600);
        assert_eq!(
            serde_json::from_str::<Author>(&annotations_of(&after)[AUTHOR_ANNOTATION]).unwrap(),
            admin()
        );
    }

    #[test]
    fn a_malformed_old_object_never_panics_and_never_keeps_an_author() {
        let content = release("---\nkind: ConfigMap\n", "deployed");
        let good = written(secret(&content, None), Value::Null, admin_json(), CREATED);
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let mut olds = Vec::new();
        for (path, value) in [
            ("/data/release", json!("!!")),
            ("/data/release", json!(b64(b"H4sI-not-gzip"))),
            ("/data/release", json!(b64(b"{not json"))),
            ("/data/release", json!(b64(&helm(&json!([1]))))),
            ("/data/release", Value::Null),
            ("/data", Value::Null),
            ("/data", json!({})),
            ("/type", json!("Opaque")),
            ("/type", Value::Null),
            ("/metadata/creationTimestamp", json!("yesterday")),
            ("/metadata/creationTimestamp", Value::Null),
            ("/metadata/name", json!("sh.helm.release.v1.ops.v3")),
            ("/metadata/annotations", Value::Null),
            ("/metadata", json!({})),
        ] {
            let mut old = good.clone();
            *old.pointer_mut(path).unwrap() = value;
            olds.push(old);
        }
        olds.push(json!({}));
        for old in olds {
            let after = written(
                secret(&tested(content.clone()), None),
                old.clone(),
                alice_json(),
                CREATED + 5,
            );
            // Either her write is hers (the old object is no release, so the content changed),
            // or no stamp (the old stamp does not verify): never the admin's.
            assert_ne!(author(&after), known(admin()), "{old}");
        }
        // Old objects the API server never sends are refused as reviews, without a panic.
        for old in [
            json!("x"),
            json!(1),
            json!([1]),
            json!({"metadata": "x"}),
            json!({"data": {"release": 1}}),
        ] {
            let body = update(secret(&content, None), old, alice_json());
            assert!(stamp(&key(), &body, CREATED).is_err());
        }
    }
}
