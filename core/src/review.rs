//! AdmissionReview in and out (admission.k8s.io/v1, and v1beta1 which has the same shape).
//!
//! Parsing borrows from the request body and leaves `object`/`oldObject` as raw JSON: most
//! requests are for objects no release owns and are answered from the header fields alone.
//! Responses are written by hand-rolled serde structs: a mutating response's `patch` must be a
//! base64 string (kube-rs's `AdmissionResponse` writes a number array, kube-rs#1781).

use std::borrow::Cow;

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::release::describe_json_error;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct GroupVersionKind<'a> {
    #[serde(borrow, default)]
    pub group: Cow<'a, str>,
    #[serde(borrow, default)]
    pub version: Cow<'a, str>,
    #[serde(borrow, default)]
    pub kind: Cow<'a, str>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct GroupVersionResource<'a> {
    #[serde(borrow, default)]
    pub group: Cow<'a, str>,
    #[serde(borrow, default)]
    pub version: Cow<'a, str>,
    #[serde(borrow, default)]
    pub resource: Cow<'a, str>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct UserInfo<'a> {
    #[serde(borrow, default)]
    pub username: Cow<'a, str>,
    #[serde(borrow, default)]
    pub groups: Vec<Cow<'a, str>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestOptions<'a> {
    #[serde(borrow, default)]
    pub field_manager: Option<Cow<'a, str>>,
}

/// The fields of an AdmissionRequest that helm-locker reads.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request<'a> {
    #[serde(borrow)]
    pub uid: Cow<'a, str>,
    #[serde(borrow)]
    pub kind: GroupVersionKind<'a>,
    #[serde(borrow, default)]
    pub resource: GroupVersionResource<'a>,
    #[serde(borrow, default)]
    pub sub_resource: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub namespace: Option<Cow<'a, str>>,
    pub operation: Operation,
    #[serde(borrow, default)]
    pub user_info: UserInfo<'a>,
    #[serde(borrow, default)]
    pub object: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub old_object: Option<&'a RawValue>,
    #[serde(default)]
    pub dry_run: Option<bool>,
    #[serde(borrow, default)]
    pub options: Option<RequestOptions<'a>>,
}

impl<'a> Request<'a> {
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref().filter(|n| !n.is_empty())
    }
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref().filter(|n| !n.is_empty())
    }
    pub fn sub_resource(&self) -> Option<&str> {
        self.sub_resource.as_deref().filter(|s| !s.is_empty())
    }
    pub fn object(&self) -> Option<&'a RawValue> {
        self.object.filter(|o| o.get() != "null")
    }
    pub fn old_object(&self) -> Option<&'a RawValue> {
        self.old_object.filter(|o| o.get() != "null")
    }
    pub fn field_manager(&self) -> Option<&str> {
        self.options
            .as_ref()
            .and_then(|o| o.field_manager.as_deref())
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawReview<'a> {
    #[serde(borrow, default)]
    api_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    request: Option<&'a RawValue>,
}

/// A parsed AdmissionReview request.
#[derive(Debug)]
pub struct Review<'a> {
    pub api_version: Cow<'a, str>,
    pub request: Request<'a>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ReviewError {
    #[error("request body is not JSON: {0}")]
    NotJson(String),
    #[error("not an AdmissionReview (kind {0:?})")]
    NotAdmissionReview(String),
    #[error("unsupported apiVersion {0:?}: expected admission.k8s.io/v1")]
    UnsupportedVersion(String),
    #[error("AdmissionReview has no request")]
    NoRequest,
    #[error("AdmissionReview request is malformed: {0}")]
    BadRequest(String),
}

/// The head of a review: the fields the API server writes before the objects (`uid`, `kind`,
/// `resource`, `subResource`, `name`, `namespace`, `operation`), read without scanning the
/// objects, the user or the options. Most writes are for objects no release owns, and that is
/// known from the head alone; anything else is decided from the full [`parse_review`].
/// `None` when the head is incomplete, has no name, or the body is not an AdmissionReview.
pub fn parse_head(body: &[u8]) -> Option<Review<'_>> {
    use serde::de::{DeserializeSeed, Error as _, IgnoredAny, MapAccess, Visitor};
    use std::cell::RefCell;

    const STOP: &str = "helm-locker: head read";
    const GO_ORDER: &[&str] = &[
        "uid",
        "kind",
        "resource",
        "subResource",
        "requestKind",
        "requestResource",
        "requestSubResource",
        "name",
        "namespace",
        "operation",
        "userInfo",
        "object",
        "oldObject",
        "dryRun",
        "options",
    ];

    #[derive(Default)]
    struct Head<'a> {
        api_version: Option<Cow<'a, str>>,
        review_kind: Option<Cow<'a, str>>,
        uid: Option<Cow<'a, str>>,
        kind: Option<GroupVersionKind<'a>>,
        resource: Option<GroupVersionResource<'a>>,
        sub_resource: Option<Cow<'a, str>>,
        name: Option<Cow<'a, str>>,
        namespace: Option<Cow<'a, str>>,
        operation: Option<Operation>,
        complete: bool,
    }

    struct RequestSeed<'h, 'a>(&'h RefCell<Head<'a>>);
    impl<'de, 'h> DeserializeSeed<'de> for RequestSeed<'h, 'de> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_map(self)
        }
    }
    impl<'de, 'h> Visitor<'de> for RequestSeed<'h, 'de> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an AdmissionRequest")
        }
        fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
            // Stopping early is only safe when the keys come in the API server's order (Go's
            // field order, which encoding/json always follows): then no head field can follow
            // `userInfo`. Bodies in any other order are read to the end.
            let mut in_order = true;
            let mut last_rank = None;
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                let rank = GO_ORDER.iter().position(|k| *k == key);
                in_order &= rank.is_some() && rank > last_rank;
                last_rank = rank;
                let mut head = self.0.borrow_mut();
                match &*key {
                    "uid" => head.uid = Some(map.next_value()?),
                    "kind" => head.kind = Some(map.next_value()?),
                    "resource" => head.resource = Some(map.next_value()?),
                    "subResource" => head.sub_resource = map.next_value()?,
                    "name" => head.name = map.next_value()?,
                    "namespace" => head.namespace = map.next_value()?,
                    "operation" => head.operation = Some(map.next_value()?),
                    "userInfo" | "object" | "oldObject" if in_order && head.operation.is_some() => {
                        head.complete = true;
                        return Err(M::Error::custom(STOP));
                    }
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            self.0.borrow_mut().complete = true;
            Ok(())
        }
    }

    struct ReviewVisitor<'h, 'a>(&'h RefCell<Head<'a>>);
    impl<'de, 'h> Visitor<'de> for ReviewVisitor<'h, 'de> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an AdmissionReview")
        }
        fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                match &*key {
                    "apiVersion" => self.0.borrow_mut().api_version = Some(map.next_value()?),
                    "kind" => self.0.borrow_mut().review_kind = Some(map.next_value()?),
                    "request" => return map.next_value_seed(RequestSeed(self.0)),
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(())
        }
    }

    let head = RefCell::new(Head::default());
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let _ = serde::Deserializer::deserialize_map(&mut deserializer, ReviewVisitor(&head));
    let head = head.into_inner();
    let (Some(api_version), Some("AdmissionReview"), true) =
        (head.api_version, head.review_kind.as_deref(), head.complete)
    else {
        return None;
    };
    if api_version != "admission.k8s.io/v1" && api_version != "admission.k8s.io/v1beta1" {
        return None;
    }
    let request = Request {
        uid: head.uid?,
        kind: head.kind?,
        resource: head.resource.unwrap_or_default(),
        sub_resource: head.sub_resource,
        name: Some(head.name.filter(|n| !n.is_empty())?),
        namespace: head.namespace,
        operation: head.operation?,
        user_info: UserInfo::default(),
        object: None,
        old_object: None,
        dry_run: None,
        options: None,
    };
    Some(Review {
        api_version,
        request,
    })
}

/// The whole review in one pass: what nearly every request is.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OnePassReview<'a> {
    #[serde(borrow, default)]
    api_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    request: Option<Request<'a>>,
}

pub fn parse_review(body: &[u8]) -> Result<Review<'_>, ReviewError> {
    // One pass over the body (the objects in it are only scanned, not parsed). When it fails,
    // the two-step parse below names what is wrong.
    if let Ok(OnePassReview {
        api_version: Some(api_version),
        kind: Some(kind),
        request: Some(request),
    }) = serde_json::from_slice::<OnePassReview>(body)
    {
        if kind == "AdmissionReview"
            && (api_version == "admission.k8s.io/v1" || api_version == "admission.k8s.io/v1beta1")
        {
            return Ok(Review {
                api_version,
                request,
            });
        }
    }
    let raw: RawReview =
        serde_json::from_slice(body).map_err(|e| ReviewError::NotJson(describe_json_error(&e)))?;
    let kind = raw.kind.unwrap_or_default();
    if kind != "AdmissionReview" {
        return Err(ReviewError::NotAdmissionReview(kind.into_owned()));
    }
    let api_version = raw.api_version.unwrap_or_default();
    if api_version != "admission.k8s.io/v1" && api_version != "admission.k8s.io/v1beta1" {
        return Err(ReviewError::UnsupportedVersion(api_version.into_owned()));
    }
    let request = raw
        .request
        .filter(|r| r.get() != "null")
        .ok_or(ReviewError::NoRequest)?;
    let request: Request = serde_json::from_str(request.get()).map_err(|e| {
        // Name the field without quoting values (requests can carry Secrets).
        let msg = e.to_string();
        let field = msg
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next())
            .map(|f| format!("missing field `{f}`, "))
            .unwrap_or_default();
        ReviewError::BadRequest(format!("{field}{}", describe_json_error(&e)))
    })?;
    Ok(Review {
        api_version,
        request,
    })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseReview<'a> {
    api_version: &'a str,
    kind: &'static str,
    response: Response<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Response<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status<'a>>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    warnings: &'a [&'a str],
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
}

#[derive(Serialize)]
struct Status<'a> {
    code: u16,
    reason: &'static str,
    message: &'a str,
    status: &'static str,
}

/// What a response says.
#[derive(Clone, Copy, Debug)]
pub enum Verdict<'a> {
    Allow,
    /// HTTP 200 with `allowed: false`, code 403, reason Forbidden, and this message.
    Deny(&'a str),
    /// Allowed, with an admission warning (kubectl prints it).
    Warn(&'a str),
    /// Allowed with a warning and a JSON patch (a mutating webhook's answer).
    Patch(&'a str, &'a json_patch::Patch),
}

/// The AdmissionReview response: allowed, denied, allowed with a warning, or allowed with a
/// base64 JSON patch.
pub fn render_response(api_version: &str, uid: &str, verdict: Verdict<'_>) -> Vec<u8> {
    let mut response = Response {
        uid,
        allowed: true,
        status: None,
        warnings: &[],
        patch_type: None,
        patch: None,
    };
    let warning;
    match verdict {
        Verdict::Allow => {}
        Verdict::Deny(message) => {
            response.allowed = false;
            response.status = Some(Status {
                code: 403,
                reason: "Forbidden",
                message,
                status: "Failure",
            });
        }
        Verdict::Warn(message) => {
            warning = [message];
            response.warnings = &warning;
        }
        Verdict::Patch(message, patch) => {
            warning = [message];
            response.warnings = &warning;
            let bytes = serde_json::to_vec(patch).expect("a JSON patch serializes");
            response.patch = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
            response.patch_type = Some("JSONPatch");
        }
    }
    serde_json::to_vec(&ResponseReview {
        api_version,
        kind: "AdmissionReview",
        response,
    })
    .expect("a response serializes")
}

/// The allow-everything response, for a request whose body is unusable but carries a uid.
pub fn render_allowed(api_version: &str, uid: &str) -> Vec<u8> {
    render_response(api_version, uid, Verdict::Allow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_is_read_without_the_objects_when_keys_come_in_the_api_servers_order() {
        // As the API server writes it; what follows `userInfo` is never read (here: not JSON).
        let go_order = br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u1","kind":{"group":"apps","version":"v1","kind":"Deployment"},"resource":{"group":"apps","version":"v1","resource":"deployments"},"requestKind":{"group":"apps","version":"v1","kind":"Deployment"},"name":"web","namespace":"shop","operation":"UPDATE","userInfo":{"username":"alice"},"object":{not json at all"#;
        let head = parse_head(go_order).expect("a head");
        assert_eq!(head.request.uid, "u1");
        assert_eq!(head.request.kind.kind, "Deployment");
        assert_eq!(head.request.namespace(), Some("shop"));
        assert_eq!(head.request.name(), Some("web"));
        assert_eq!(head.request.operation, Operation::Update);
        assert!(head.request.object.is_none());
        // Another order (sorted keys, as tools write them): read to the end, no early stop.
        let other = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"dryRun":false,"kind":{"group":"","version":"v1","kind":"ConfigMap"},"name":"cfg","object":{"a":1},"operation":"UPDATE","subResource":"status","uid":"u2"}}"#;
        let head = parse_head(other).unwrap();
        assert_eq!(
            (head.request.uid.as_ref(), head.request.sub_resource()),
            ("u2", Some("status"))
        );
        // No name (a collection DELETE names the object in oldObject), no uid, not a review:
        // the full parse decides.
        assert!(parse_head(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u3","kind":{"kind":"ConfigMap"},"operation":"DELETE","oldObject":{}}}"#).is_none());
        assert!(parse_head(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"kind":{"kind":"ConfigMap"},"name":"x","operation":"DELETE"}}"#).is_none());
        assert!(parse_head(br#"{"apiVersion":"v1","kind":"ConfigMap"}"#).is_none());
        assert!(parse_head(b"not json").is_none());
    }

    const REVIEW: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","kind":{"group":"apps","version":"v1","kind":"Deployment"},"resource":{"group":"apps","version":"v1","resource":"deployments"},"name":"web","namespace":"shop","operation":"UPDATE","userInfo":{"username":"admin","groups":["system:masters"]},"object":{"a":"with \"escapes\""},"oldObject":null,"dryRun":false,"options":{"fieldManager":"kubectl-patch"}}}"#;

    #[test]
    fn parses_the_header_and_leaves_objects_raw() {
        let review = parse_review(REVIEW.as_bytes()).unwrap();
        let r = &review.request;
        assert_eq!(review.api_version, "admission.k8s.io/v1");
        assert_eq!(
            (
                r.uid.as_ref(),
                r.kind.kind.as_ref(),
                r.namespace(),
                r.name()
            ),
            ("u1", "Deployment", Some("shop"), Some("web"))
        );
        assert_eq!(r.operation, Operation::Update);
        assert_eq!(r.user_info.groups, ["system:masters"]);
        assert_eq!(r.object().unwrap().get(), r#"{"a":"with \"escapes\""}"#);
        assert!(r.old_object().is_none());
        assert_eq!(r.field_manager(), Some("kubectl-patch"));
    }

    #[test]
    fn bad_bodies_say_what_is_wrong() {
        assert!(matches!(parse_review(b"{"), Err(ReviewError::NotJson(_))));
        assert!(matches!(
            parse_review(b"[]"),
            Err(ReviewError::NotAdmissionReview(_))
        ));
        assert_eq!(
            parse_review(br#"{"kind":"Pod"}"#).unwrap_err(),
            ReviewError::NotAdmissionReview("Pod".into())
        );
        assert!(matches!(
            parse_review(br#"{"kind":"AdmissionReview","apiVersion":"v2"}"#),
            Err(ReviewError::UnsupportedVersion(_))
        ));
        assert_eq!(
            parse_review(br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}"#)
                .unwrap_err(),
            ReviewError::NoRequest
        );
        let no_uid = br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"operation":"CREATE","kind":{}}}"#;
        let err = parse_review(no_uid).unwrap_err().to_string();
        assert!(err.contains("uid"), "{err}");
        let secret = br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"x","operation":"hunter2","kind":{}}}"#;
        assert!(!parse_review(secret)
            .unwrap_err()
            .to_string()
            .contains("hunter2"));
    }
}
