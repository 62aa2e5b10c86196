//! The author webhook's answer (POST `/stamp`): every write of a release Secret gets the
//! annotations of [`crate::author`] naming the identity the API server authenticated for it,
//! over whatever the writer put there.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::Deserialize;

use crate::author::{stamp_annotations, Author, AuthorKey};
use crate::release::RELEASE_SECRET_TYPE;

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
    #[serde(default)]
    user_info: Author,
    #[serde(default)]
    object: Option<StampObject>,
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

#[derive(Default, Deserialize)]
struct StampMetadata {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

/// The `author` webhook's answer to an AdmissionReview of a Secret write: a release Secret
/// (`type: helm.sh/release.v1`) gets the author's annotations (replacing whatever the writer
/// put there); anything else is allowed unchanged. Errors: the body is not a review of a
/// Secret the locker can read.
pub fn stamp(key: &AuthorKey, body: &[u8]) -> Result<Vec<u8>, crate::review::ReviewError> {
    use crate::review::{render_response, ReviewError, Verdict};
    let review: StampReview =
        serde_json::from_slice(body).map_err(|e| ReviewError::NotJson(e.to_string()))?;
    let api_version = review.api_version;
    if api_version != "admission.k8s.io/v1" {
        return Err(ReviewError::UnsupportedVersion(api_version));
    }
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    let Some(object) = request
        .object
        .filter(|o| o.type_.as_deref() == Some(RELEASE_SECRET_TYPE))
    else {
        return Ok(render_response(&api_version, &request.uid, Verdict::Allow));
    };
    let namespace = request.namespace.unwrap_or_default();
    let name = object
        .metadata
        .name
        .clone()
        .or(request.name)
        .unwrap_or_default();
    let release = object
        .data
        .as_ref()
        .and_then(|d| d.get("release"))
        .and_then(Option::as_deref)
        .map(|b64| base64::engine::general_purpose::STANDARD.decode(b64))
        .transpose()
        .map_err(|e| ReviewError::BadRequest(format!("data.release is not base64: {e}")))?
        .unwrap_or_default();
    let annotations = stamp_annotations(key, &namespace, &name, &request.user_info, &release);
    let patch = match &object.metadata.annotations {
        None => vec![serde_json::json!({
            "op": "add",
            "path": "/metadata/annotations",
            "value": annotations.iter().cloned().collect::<BTreeMap<_, _>>(),
        })],
        Some(_) => annotations
            .iter()
            .map(|(k, v)| {
                serde_json::json!({
                    "op": "add",
                    "path": format!("/metadata/annotations/{}", k.replace('~', "~0").replace('/', "~1")),
                    "value": v,
                })
            })
            .collect(),
    };
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
    use crate::author::{
        authorship, Authorship, Stamping, StoredSecret, AUTHOR_ANNOTATION, PROOF_ANNOTATION,
    };
    use serde_json::json;
    use std::sync::Arc;

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
            extra: BTreeMap::from([("scopes".to_string(), vec!["a".to_string()])]),
        }
    }

    fn review(object: serde_json::Value, user: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "r-1",
                "namespace": "team",
                "name": "sh.helm.release.v1.ops.v2",
                "operation": "CREATE",
                "userInfo": user,
                "object": object,
            }
        }))
        .unwrap()
    }

    fn response(body: &[u8]) -> serde_json::Value {
        let response: serde_json::Value = serde_json::from_slice(body).unwrap();
        assert_eq!(response["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(response["response"]["uid"], "r-1");
        assert_eq!(response["response"]["allowed"], true);
        response
    }

    fn applied(body: &[u8], object: serde_json::Value) -> serde_json::Value {
        let response = response(body);
        assert_eq!(response["response"]["patchType"], "JSONPatch");
        let patch = base64::engine::general_purpose::STANDARD
            .decode(response["response"]["patch"].as_str().unwrap())
            .unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
        let mut object = object;
        json_patch::patch(&mut object, &patch).unwrap();
        object
    }

    #[test]
    fn the_webhook_stamps_a_release_secret_with_the_authenticated_user_over_what_the_writer_put() {
        let data = base64::engine::general_purpose::STANDARD.encode(b"H4sI-release");
        let user = json!({"username": "alice", "uid": "u-1", "groups": ["system:authenticated"], "extra": {"scopes": ["a"]}});
        // Without annotations, and with a forged stamp naming an admin.
        for annotations in [
            None,
            Some(
                json!({"keep": "me", AUTHOR_ANNOTATION: "{\"username\":\"admin\"}", PROOF_ANNOTATION: "v1.AAAA"}),
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
            let body = stamp(&key(), &review(object.clone(), user.clone())).unwrap();
            let stored_object = applied(&body, object);
            let annotations: BTreeMap<String, String> =
                serde_json::from_value(stored_object["metadata"]["annotations"].clone()).unwrap();
            let secret = StoredSecret {
                namespace: "team",
                name: "sh.helm.release.v1.ops.v2",
                annotations: Some(&annotations),
                resource_version: Some("900"),
                release: b"H4sI-release",
            };
            assert_eq!(
                authorship(&stamping(), secret),
                Authorship::Known(Arc::new(alice()))
            );
            if annotations.contains_key("keep") {
                assert_eq!(annotations["keep"], "me");
            }
        }
    }

    #[test]
    fn other_secrets_pass_unchanged_and_a_bad_review_is_an_error() {
        let object = json!({"kind": "Secret", "type": "Opaque", "metadata": {"name": "x"}, "data": {"release": "!!"}});
        let body = stamp(&key(), &review(object, json!({"username": "alice"}))).unwrap();
        let response = response(&body);
        assert!(response["response"].get("patch").is_none());
        // A release Secret whose data is not base64 cannot be stamped.
        let object = json!({"kind": "Secret", "type": RELEASE_SECRET_TYPE, "metadata": {"name": "x"}, "data": {"release": "!!"}});
        assert!(stamp(&key(), &review(object, json!({"username": "alice"}))).is_err());
        assert!(stamp(&key(), b"{not json").is_err());
        assert!(stamp(&key(), br#"{"apiVersion":"admission.k8s.io/v1"}"#).is_err());
    }
}
