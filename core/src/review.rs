//! AdmissionReview in and out (admission.k8s.io/v1, and v1beta1 which has the same shape).
//!
//! Reading borrows from the request body and leaves `object`/`oldObject` as raw JSON: most
//! requests are for objects no release owns and are answered from the head alone
//! ([`read_head`]); the rest of the review is then read on from where the head stopped. Both
//! are read with the one-pass scanner ([`crate::scan`]); serde reads what the scanner declines,
//! to say what is wrong with it.
//! Responses are written by hand-rolled serde structs: a mutating response's `patch` must be a
//! base64 string (kube-rs's `AdmissionResponse` writes a number array, kube-rs#1781).

use std::borrow::Cow;

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::release::describe_json_error;
use crate::scan::{Entries, Flow, Scanner};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    /// Every operation, in the order of the admission metric's series.
    pub const ALL: [Operation; 4] = [
        Operation::Create,
        Operation::Update,
        Operation::Delete,
        Operation::Connect,
    ];

    /// As the AdmissionReview names it: the `operation` label of the metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// Which of the locker's admission webhooks a review came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /validate`: denies and warns.
    Validate,
    /// `POST /mutate`: repairs.
    Mutate,
}

impl Endpoint {
    /// Every endpoint, in the order of the admission metric's series.
    pub const ALL: [Endpoint; 2] = [Endpoint::Validate, Endpoint::Mutate];

    /// The `endpoint` label of the metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::Validate => "validate",
            Endpoint::Mutate => "mutate",
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
    /// The token was bound to a pod: `extra` names one (`authentication.kubernetes.io/pod-name`,
    /// which the API server adds for a pod's projected service-account token). Only the key's
    /// presence is read; `extra`'s values are stepped over as before.
    #[serde(default, rename = "extra", deserialize_with = "names_a_pod")]
    pub from_pod: bool,
}

/// The `extra` key the API server sets for a token bound to a pod.
const POD_NAME_EXTRA: &str = "authentication.kubernetes.io/pod-name";

/// Whether `userInfo.extra` (a map of string lists) has [`POD_NAME_EXTRA`] with a value: its
/// keys are compared, its other values stepped over unread. Anything else in its place (`null`,
/// another type) is no pod and no error: `extra` was never a reason to refuse a review.
fn names_a_pod<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    deserializer.deserialize_any(Extra { pod_name: false })
}

/// A visitor of `extra` (`pod_name: false`) or of its pod name's value (`true`): whether it
/// names a pod. Every type is taken.
struct Extra {
    pod_name: bool,
}

impl<'de> serde::de::Visitor<'de> for Extra {
    type Value = bool;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<bool, M::Error> {
        let mut pod = false;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if !self.pod_name && key == POD_NAME_EXTRA {
                pod |= map.next_value_seed(Extra { pod_name: true })?;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(pod && !self.pod_name)
    }
    fn visit_seq<S: serde::de::SeqAccess<'de>>(self, mut seq: S) -> Result<bool, S::Error> {
        let mut items = 0;
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
            items += 1;
        }
        Ok(self.pod_name && items > 0)
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<bool, E> {
        Ok(self.pod_name && !v.is_empty())
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Extra {
    type Value = bool;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RequestOptions<'a> {
    #[serde(borrow, default)]
    pub field_manager: Option<Cow<'a, str>>,
}

/// A review's `object` or `oldObject`: its JSON text in the body, unparsed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RawObject<'a>(&'a str);

impl<'a> RawObject<'a> {
    /// JSON text, checked to be one JSON value.
    pub fn from_json(text: &'a str) -> Result<Self, serde_json::Error> {
        serde_json::from_str::<&RawValue>(text).map(|raw| RawObject(raw.get()))
    }
    pub fn get(&self) -> &'a str {
        self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RawObject<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <&'de RawValue>::deserialize(deserializer).map(|raw| RawObject(raw.get()))
    }
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
    pub object: Option<RawObject<'a>>,
    #[serde(borrow, default)]
    pub old_object: Option<RawObject<'a>>,
    #[serde(default)]
    pub dry_run: Option<bool>,
    #[serde(borrow, default)]
    pub(crate) options: Option<RequestOptions<'a>>,
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
    pub fn object(&self) -> Option<RawObject<'a>> {
        self.object.filter(|o| o.get() != "null")
    }
    pub fn old_object(&self) -> Option<RawObject<'a>> {
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

/// The keys of an AdmissionRequest in the order the API server writes them (Go's field order,
/// which encoding/json always follows).
pub(crate) const GO_ORDER: &[&str] = &[
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

/// The head of a review: the fields the API server writes before the objects (`uid`, `kind`,
/// `resource`, `subResource`, `name`, `namespace`, `operation`), read without scanning the
/// objects, the user or the options. Most writes are for objects no release owns, and that is
/// known from the head alone; anything else is decided from the full review, which
/// [`Head::rest`] reads on from where the head stopped.
/// `None` when the head is incomplete or the body is not an AdmissionReview. A head may name
/// no object: a collection DELETE names it only in `oldObject` ([`crate::decide::Found::answer`]).
pub fn read_head(body: &[u8]) -> Option<Head<'_>> {
    // The head is in the body's first few hundred bytes (under 520 in every recorded review):
    // only a prefix needs to be UTF-8 for it, not the objects that follow. A longer head (long
    // names, a CRD's long group) is read from the whole body.
    const PREFIX: usize = 1024;
    if body.len() > PREFIX {
        let prefix = &body[..PREFIX];
        let text = match std::str::from_utf8(prefix) {
            Ok(text) => text,
            Err(e) => std::str::from_utf8(&prefix[..e.valid_up_to()]).ok()?,
        };
        if let Some(head) = Head::read(body, text) {
            return Some(head);
        }
    }
    Head::read(body, std::str::from_utf8(body).ok()?)
}

/// [`read_head`], the head alone.
pub fn parse_head(body: &[u8]) -> Option<Review<'_>> {
    read_head(body).map(|head| head.review)
}

/// A review's head, and where its reading stopped.
pub struct Head<'a> {
    /// The review with only the head's fields (and the user, once [`Head::read_user`] read it).
    pub review: Review<'a>,
    body: &'a [u8],
    /// Stopped at the request's entry with this key, in the API server's key order.
    stopped: Option<(ReviewScan<'a>, Cow<'a, str>)>,
    /// The whole body as text, once the user was read past the head's prefix: the scan
    /// then stands after `userInfo`'s value.
    user_read: Option<&'a str>,
}

impl<'a> Head<'a> {
    fn read(body: &'a [u8], text: &'a str) -> Option<Head<'a>> {
        // The head as the API server writes it, matched as text; anything else is read the
        // general way. Both give the same head (tests below), the first without looking keys up.
        if let Some((scan, key)) = ReviewScan::head_as_sent(text) {
            return Some(Head {
                review: scan.head_review()?,
                body,
                stopped: Some((scan, key)),
                user_read: None,
            });
        }
        Self::read_any_order(body, text)
    }

    /// The head read entry by entry, keys in any order.
    fn read_any_order(body: &'a [u8], text: &'a str) -> Option<Head<'a>> {
        let mut scan = ReviewScan::new(text);
        let stopped = scan.top(&mut Entries::Start, Extent::Head)?;
        if stopped.is_none() && !scan.scanner.at_end() {
            return None;
        }
        let review = scan.head_review()?;
        Some(Head {
            review,
            body,
            stopped: stopped.map(|key| (scan, key)),
            user_read: None,
        })
    }

    /// Reads the user (`userInfo`, which the API server writes right after the head), so that
    /// who writes can be judged before the objects are read; [`Head::rest`] reads on after it.
    /// Whether the review's user is now in [`Head::review`]: `false` when the head did not stop
    /// at the user (keys in another order: the rest is read from the start) or the user is
    /// not what the scanner reads (then [`Head::rest`] reads the whole review from the start).
    pub fn read_user(&mut self) -> bool {
        if self.user_read.is_some() {
            return true;
        }
        let Some((scan, key)) = &mut self.stopped else {
            return false;
        };
        if key != "userInfo" {
            return false;
        }
        let Ok(text) = std::str::from_utf8(self.body) else {
            self.stopped = None;
            return false;
        };
        scan.scanner = Scanner::at(text, scan.scanner.pos);
        if scan.request_entry("userInfo").is_none() {
            self.stopped = None;
            return false;
        }
        self.review.request.user_info = scan.f.user_info.clone().unwrap_or_default();
        self.user_read = Some(text);
        true
    }

    /// The whole review: read on from where the head stopped, without reading the head again;
    /// from the start ([`parse_review`]) when the head was not read in the API server's order.
    pub fn rest(self) -> Result<Review<'a>, ReviewError> {
        if let Some((scan, key)) = self.stopped {
            let review = match self.user_read {
                Some(text) => scan.finish_after_entry(text),
                None => std::str::from_utf8(self.body)
                    .ok()
                    .and_then(|text| scan.finish(text, &key)),
            };
            if let Some(review) = review {
                return Ok(review);
            }
        }
        parse_review(self.body)
    }
}

/// How much of a review [`ReviewScan`] reads.
#[derive(Clone, Copy, PartialEq)]
enum Extent {
    /// Up to the user, when the keys come in the API server's order; the head's fields only.
    Head,
    Whole,
}

/// A review read with the scanner: the objects are only stepped over, and nothing is built but
/// the few strings of the head. `None` at each step for anything unexpected (a repeated field,
/// a value of the wrong type, a body that is not an AdmissionReview of a supported version),
/// which [`parse_review`] then reads with serde to say what is wrong.
struct ReviewScan<'a> {
    scanner: Scanner<'a>,
    api_version: Option<Cow<'a, str>>,
    kind: Option<Cow<'a, str>>,
    request_seen: bool,
    f: Fields<'a>,
    /// Whether the request's keys so far came in the API server's order, and the last one's
    /// place in it.
    in_order: bool,
    last_rank: Option<usize>,
}

/// The request's fields as read so far.
#[derive(Default)]
struct Fields<'a> {
    uid: Option<Cow<'a, str>>,
    kind: Option<GroupVersionKind<'a>>,
    resource: Option<GroupVersionResource<'a>>,
    sub_resource: Option<Option<Cow<'a, str>>>,
    name: Option<Option<Cow<'a, str>>>,
    namespace: Option<Option<Cow<'a, str>>>,
    operation: Option<Operation>,
    user_info: Option<UserInfo<'a>>,
    object: Option<Option<RawObject<'a>>>,
    old_object: Option<Option<RawObject<'a>>>,
    dry_run: Option<Option<bool>>,
    options: Option<Option<RequestOptions<'a>>>,
}

impl<'a> ReviewScan<'a> {
    fn new(text: &'a str) -> Self {
        ReviewScan {
            scanner: Scanner::new(text),
            api_version: None,
            kind: None,
            request_seen: false,
            f: Fields::default(),
            in_order: true,
            last_rank: None,
        }
    }

    /// The head as kube-apiserver writes it (compact JSON, Go's field order: `kind`,
    /// `apiVersion`, then the request's `uid`, `kind`, `resource`, `subResource`,
    /// `requestKind`, `requestResource`, `requestSubResource`, `name`, `namespace`,
    /// `operation` and `userInfo`, those after `resource` but the last two left out when
    /// empty), read by matching its keys and punctuation as literal text: the scan stops at
    /// `userInfo`, as [`ReviewScan::request`] does. Strings are read as everywhere else.
    /// `None` at the first byte that differs: whitespace, another order, an escaped key, a
    /// null, a key the API server does not write. The caller then reads the head the general
    /// way, from the start.
    fn head_as_sent(text: &'a str) -> Option<(Self, Cow<'a, str>)> {
        let mut scan = ReviewScan::new(text);
        let s = &mut scan.scanner;
        s.literal(br#"{"kind":"#)?;
        scan.kind = Some(s.string_value()?);
        s.literal(br#","apiVersion":"#)?;
        scan.api_version = Some(s.string_value()?);
        s.literal(br#","request":{"uid":"#)?;
        scan.request_seen = true;
        let f = &mut scan.f;
        f.uid = Some(s.string_value()?);
        s.literal(br#","kind":{"group":"#)?;
        let group = s.string_value()?;
        s.literal(br#","version":"#)?;
        let version = s.string_value()?;
        s.literal(br#","kind":"#)?;
        let kind = s.string_value()?;
        f.kind = Some(GroupVersionKind {
            group,
            version,
            kind,
        });
        s.literal(br#"},"resource":{"group":"#)?;
        let group = s.string_value()?;
        s.literal(br#","version":"#)?;
        let version = s.string_value()?;
        s.literal(br#","resource":"#)?;
        let resource = s.string_value()?;
        f.resource = Some(GroupVersionResource {
            group,
            version,
            resource,
        });
        s.literal(b"}")?;
        // A string value for an optional key, when it comes next.
        fn optional<'a>(s: &mut Scanner<'a>, key: &[u8]) -> Option<Option<Cow<'a, str>>> {
            match s.literal(key) {
                Some(()) => s.string_value().map(Some),
                None => Some(None),
            }
        }
        f.sub_resource = optional(s, br#","subResource":"#)?.map(Some);
        for key in [&br#","requestKind":"#[..], br#","requestResource":"#] {
            if s.literal(key).is_some() {
                s.skip_value()?;
            }
        }
        optional(s, br#","requestSubResource":"#)?;
        f.name = optional(s, br#","name":"#)?.map(Some);
        f.namespace = optional(s, br#","namespace":"#)?.map(Some);
        s.literal(br#","operation":"#)?;
        f.operation = Some(match &*s.string_value()? {
            "CREATE" => Operation::Create,
            "UPDATE" => Operation::Update,
            "DELETE" => Operation::Delete,
            "CONNECT" => Operation::Connect,
            _ => return None,
        });
        s.literal(br#","userInfo":"#)?;
        // Where `request` leaves the scan when it stops at the user.
        scan.last_rank = GO_ORDER.iter().position(|k| *k == "userInfo");
        Some((scan, Cow::Borrowed("userInfo")))
    }

    /// The review's entries from `entries` on; `Some(Some(key))` when the head is read and
    /// the scanner stopped at the request's entry `key`.
    fn top(&mut self, entries: &mut Entries, extent: Extent) -> Option<Option<Cow<'a, str>>> {
        while let Some(key) = self.scanner.next_entry(entries)? {
            match &*key {
                "apiVersion" => once(&mut self.api_version, self.scanner.string_value()?)?,
                "kind" => once(&mut self.kind, self.scanner.string_value()?)?,
                "request" if !self.request_seen => {
                    self.request_seen = true;
                    if let Some(key) = self.request(&mut Entries::Start, extent)? {
                        return Some(Some(key));
                    }
                }
                "request" => return None,
                _ => self.scanner.skip_value()?,
            }
        }
        Some(None)
    }

    /// The request's entries from `entries` on; `Some(Some(key))` when only the head was
    /// asked for, it is complete, and the scanner stopped at the entry `key`. Stopping early
    /// trusts the API server's order: every review it sends has its keys in Go's field order
    /// (encoding/json), so no head field follows `userInfo` or the objects. A body whose keys
    /// are out of that order before the stop is read to the end; one in order up to the stop
    /// and out of it after (no API server writes it) has a head without the head fields that
    /// follow, and [`Head::rest`] reads them. The webhook's answer goes only to whoever sent
    /// the review, so such a body changes nothing in a cluster.
    fn request(&mut self, entries: &mut Entries, extent: Extent) -> Option<Option<Cow<'a, str>>> {
        while let Some(key) = self.scanner.next_entry(entries)? {
            let rank = GO_ORDER.iter().position(|k| *k == key);
            self.in_order &= rank.is_some() && rank > self.last_rank;
            self.last_rank = rank;
            match (extent, &*key) {
                (Extent::Head, "userInfo" | "object" | "oldObject")
                    if self.in_order && self.f.operation.is_some() =>
                {
                    return Some(Some(key))
                }
                (Extent::Head, "userInfo" | "object" | "oldObject" | "dryRun" | "options") => {
                    self.scanner.skip_value()?
                }
                (_, key) => self.request_entry(key)?,
            }
        }
        Some(None)
    }

    /// One entry of the request, the scanner at its value.
    fn request_entry(&mut self, key: &str) -> Option<()> {
        let (scanner, f) = (&mut self.scanner, &mut self.f);
        match key {
            "uid" => once(&mut f.uid, scanner.string_value()?),
            "kind" => {
                let [group, version, kind] = string_fields(scanner, ["group", "version", "kind"])?;
                once(
                    &mut f.kind,
                    GroupVersionKind {
                        group,
                        version,
                        kind,
                    },
                )
            }
            "resource" => {
                let [group, version, resource] =
                    string_fields(scanner, ["group", "version", "resource"])?;
                once(
                    &mut f.resource,
                    GroupVersionResource {
                        group,
                        version,
                        resource,
                    },
                )
            }
            "subResource" => once(&mut f.sub_resource, nullable_string(scanner)?),
            "name" => once(&mut f.name, nullable_string(scanner)?),
            "namespace" => once(&mut f.namespace, nullable_string(scanner)?),
            "operation" => {
                let operation = match &*scanner.string_value()? {
                    "CREATE" => Operation::Create,
                    "UPDATE" => Operation::Update,
                    "DELETE" => Operation::Delete,
                    "CONNECT" => Operation::Connect,
                    _ => return None,
                };
                once(&mut f.operation, operation)
            }
            // Small and rare: serde reads them from their text.
            "userInfo" => once(
                &mut f.user_info,
                serde_json::from_str(scanner.value_text()?).ok()?,
            ),
            "options" => once(
                &mut f.options,
                serde_json::from_str(scanner.value_text()?).ok()?,
            ),
            "object" => once(&mut f.object, nullable_object(scanner)?),
            "oldObject" => once(&mut f.old_object, nullable_object(scanner)?),
            "dryRun" => {
                let dry_run = match scanner.value_text()? {
                    "true" => Some(true),
                    "false" => Some(false),
                    "null" => None,
                    _ => return None,
                };
                once(&mut f.dry_run, dry_run)
            }
            _ => scanner.skip_value(),
        }
    }

    /// The rest of the review, after the head stopped at the request's entry `key`: `text`
    /// is the whole body, of which the head read a prefix.
    fn finish(mut self, text: &'a str, key: &str) -> Option<Review<'a>> {
        self.scanner = Scanner::at(text, self.scanner.pos);
        self.request_entry(key)?;
        self.finish_after_entry(text)
    }

    /// [`ReviewScan::finish`] once the entry it stopped at is read: the scanner is after its
    /// value, in `text`.
    fn finish_after_entry(mut self, text: &'a str) -> Option<Review<'a>> {
        self.scanner = Scanner::at(text, self.scanner.pos);
        self.request(&mut Entries::AfterValue, Extent::Whole)?;
        self.top(&mut Entries::AfterValue, Extent::Whole)?;
        if !self.scanner.at_end() {
            return None;
        }
        self.into_review()
    }

    fn api_version(&self) -> Option<Cow<'a, str>> {
        let api_version = self.api_version.clone()?;
        (self.kind.as_deref() == Some("AdmissionReview")
            && (api_version == "admission.k8s.io/v1" || api_version == "admission.k8s.io/v1beta1"))
            .then_some(api_version)
    }

    /// The review with the head's fields only.
    fn head_review(&self) -> Option<Review<'a>> {
        let f = &self.f;
        let request = Request {
            uid: f.uid.clone()?,
            kind: f.kind.clone()?,
            resource: f.resource.clone().unwrap_or_default(),
            sub_resource: f.sub_resource.clone().flatten(),
            name: f.name.clone().flatten(),
            namespace: f.namespace.clone().flatten(),
            operation: f.operation?,
            user_info: UserInfo::default(),
            object: None,
            old_object: None,
            dry_run: None,
            options: None,
        };
        Some(Review {
            api_version: self.api_version()?,
            request,
        })
    }

    fn into_review(self) -> Option<Review<'a>> {
        let api_version = self.api_version()?;
        let f = self.f;
        let request = Request {
            uid: f.uid?,
            kind: f.kind?,
            resource: f.resource.unwrap_or_default(),
            sub_resource: f.sub_resource.flatten(),
            name: f.name.flatten(),
            namespace: f.namespace.flatten(),
            operation: f.operation?,
            user_info: f.user_info.unwrap_or_default(),
            object: f.object.flatten(),
            old_object: f.old_object.flatten(),
            dry_run: f.dry_run.flatten(),
            options: f.options.flatten(),
        };
        Some(Review {
            api_version,
            request,
        })
    }
}

/// The whole review with the scanner; `None` for anything it does not take.
fn scan_review(text: &str) -> Option<Review<'_>> {
    let mut scan = ReviewScan::new(text);
    scan.top(&mut Entries::Start, Extent::Whole)?;
    if !scan.scanner.at_end() {
        return None;
    }
    scan.into_review()
}

/// Sets a field read once; `None` when it was already set (serde rejects a repeated field).
fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    match slot {
        Some(_) => None,
        None => {
            *slot = Some(value);
            Some(())
        }
    }
}

/// A string that may be `null`.
fn nullable_string<'a>(scanner: &mut Scanner<'a>) -> Option<Option<Cow<'a, str>>> {
    scanner.nullable_string_value()
}

/// An object's text, `None` for `null` (as serde reads an `Option`).
fn nullable_object<'a>(scanner: &mut Scanner<'a>) -> Option<Option<RawObject<'a>>> {
    match scanner.value_text()? {
        "null" => Some(None),
        text => Some(Some(RawObject(text))),
    }
}

/// An object of string fields (`kind`, `resource`): the three keys of `keys`, in any order,
/// each at most once; other keys are stepped over.
fn string_fields<'a>(scanner: &mut Scanner<'a>, keys: [&str; 3]) -> Option<[Cow<'a, str>; 3]> {
    let mut found: [Option<Cow<'a, str>>; 3] = Default::default();
    scanner.each_entry(|scanner, key| {
        match keys.iter().position(|k| *k == key) {
            Some(i) => once(&mut found[i], scanner.string_value()?)?,
            None => scanner.skip_value()?,
        }
        Some(Flow::Next)
    })?;
    Some(found.map(Option::unwrap_or_default))
}

/// The whole review. Read with the scanner: the objects are stepped over once and left as
/// text for [`decide`](crate::decide) to read as far as it needs. A body the scanner does not
/// take is parsed with serde, which says what is wrong with it.
pub fn parse_review(body: &[u8]) -> Result<Review<'_>, ReviewError> {
    if let Some(review) = std::str::from_utf8(body).ok().and_then(scan_review) {
        return Ok(review);
    }
    parse_review_with_serde(body)
}

/// The whole review, parsed with serde: what the scanner declines, and the reference it is
/// tested against.
fn parse_review_with_serde(body: &[u8]) -> Result<Review<'_>, ReviewError> {
    let raw: RawReview<'_> =
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
    let request: Request<'_> = serde_json::from_str(request.get()).map_err(|e| {
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
    /// Allowed with a JSON patch and no warning (the author stamp on a release Secret).
    Mutate(&'a json_patch::Patch),
}

/// The AdmissionReview response: allowed, denied, allowed with a warning, or allowed with a
/// base64 JSON patch.
pub fn render_response(api_version: &str, uid: &str, verdict: Verdict<'_>) -> Vec<u8> {
    // Nine reviews in ten are allowed: their answer is written as serde_json would write it,
    // without its serializer, when neither string needs escaping (a uid never does).
    if let Verdict::Allow = verdict {
        if !needs_escaping(api_version) && !needs_escaping(uid) {
            return allowed(api_version, uid);
        }
    }
    render_with_serde(api_version, uid, verdict)
}

/// [`render_response`] through serde_json, for every verdict and string.
fn render_with_serde(api_version: &str, uid: &str, verdict: Verdict<'_>) -> Vec<u8> {
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
        Verdict::Mutate(patch) => {
            let bytes = serde_json::to_vec(patch).expect("a JSON patch serializes");
            response.patch = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
            response.patch_type = Some("JSONPatch");
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

/// Whether serde_json escapes anything in `text`: a quote, a backslash or a control character.
fn needs_escaping(text: &str) -> bool {
    text.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\')
}

/// `{"apiVersion":…,"kind":"AdmissionReview","response":{"uid":…,"allowed":true}}`, for strings
/// that need no escaping.
fn allowed(api_version: &str, uid: &str) -> Vec<u8> {
    const AFTER_VERSION: &[u8] = br#"","kind":"AdmissionReview","response":{"uid":""#;
    const END: &[u8] = br#"","allowed":true}}"#;
    let mut out =
        Vec::with_capacity(16 + api_version.len() + AFTER_VERSION.len() + uid.len() + END.len());
    out.extend_from_slice(br#"{"apiVersion":""#);
    out.extend_from_slice(api_version.as_bytes());
    out.extend_from_slice(AFTER_VERSION);
    out.extend_from_slice(uid.as_bytes());
    out.extend_from_slice(END);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::go_order;

    #[test]
    fn an_allowed_answer_is_written_as_serde_json_writes_it() {
        for (api_version, uid) in [
            (
                "admission.k8s.io/v1",
                "0a41ec13-d967-4db9-a205-8b7b0bfdd844",
            ),
            ("admission.k8s.io/v1beta1", ""),
            ("admission.k8s.io/v1", "é ünïcode \u{7f}"),
            ("admission.k8s.io/v1", "a \"quoted\" uid"),
            ("admission.k8s.io/v1", "back\\slash"),
            ("admission.k8s.io/v1", "tab\there"),
            ("v1\n", "u"),
        ] {
            let written = render_response(api_version, uid, Verdict::Allow);
            assert_eq!(
                String::from_utf8(written).unwrap(),
                String::from_utf8(render_with_serde(api_version, uid, Verdict::Allow)).unwrap(),
                "{uid:?}"
            );
        }
    }

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
        // No name (a collection DELETE names the object in oldObject): a head all the same,
        // without the object.
        let nameless = parse_head(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u3","kind":{"kind":"ConfigMap"},"operation":"DELETE","oldObject":{"metadata":{"name":"x"}}}}"#).unwrap();
        assert_eq!(nameless.request.name(), None);
        assert!(nameless.request.old_object().is_none());
        // No uid, not a review: the full parse decides.
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

    fn recorded_reviews() -> Vec<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/cluster-capture/reviews");
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap())
            .collect()
    }

    /// The scanner's review is serde's, field for field, and it declines only what serde
    /// rejects; the head is the full review's.
    fn assert_scanned_as_serde_parses(body: &[u8]) -> bool {
        let serde = parse_review_with_serde(body);
        let scanned = std::str::from_utf8(body).ok().and_then(scan_review);
        if let Some(scanned) = &scanned {
            let serde = serde.as_ref().expect("serde reads what the scanner reads");
            assert_eq!(format!("{scanned:?}"), format!("{serde:?}"));
        }
        // Read on from the head: the same review, or the same refusal.
        if let Some(head) = read_head(body) {
            match (head.rest(), &serde) {
                (Ok(rest), Ok(serde)) => assert_eq!(format!("{rest:?}"), format!("{serde:?}")),
                (Err(rest), Err(serde)) => assert_eq!(&rest, serde),
                (rest, serde) => panic!("read on from the head: {rest:?}, serde: {serde:?}"),
            }
        }
        // The head matched as the API server writes it is the head read entry by entry, and
        // both stop at the same place.
        assert_head_as_sent_is_read_any_order(body);
        // And the scanner takes every UTF-8 review serde does: the serde path is for errors.
        assert!(scanned.is_some() || serde.is_err() || std::str::from_utf8(body).is_err());
        // (The head is read without what follows it, which may be what serde rejects.) It is
        // the whole review's when the head was read to the end, or when the request's keys
        // come in the API server's order, as they always do from it: a body in that order up
        // to where the head stopped and out of it after may put a head field after the stop.
        let head_is_whole = read_head(body).is_some_and(|head| head.stopped.is_none())
            || request_keys_in_api_server_order(body);
        if let (Some(head), Ok(whole), true) = (parse_head(body), &serde, head_is_whole) {
            let (h, w) = (&head.request, &whole.request);
            assert_eq!(head.api_version, whole.api_version);
            assert_eq!(
                format!(
                    "{:?}",
                    (
                        &h.uid,
                        &h.kind,
                        &h.resource,
                        h.sub_resource(),
                        h.name(),
                        h.namespace(),
                        h.operation
                    )
                ),
                format!(
                    "{:?}",
                    (
                        &w.uid,
                        &w.kind,
                        &w.resource,
                        w.sub_resource(),
                        w.name(),
                        w.namespace(),
                        w.operation
                    )
                )
            );
        }
        scanned.is_some()
    }

    /// When [`ReviewScan::head_as_sent`] reads a head, it is the one read entry by entry: the
    /// same review, stopped at the same key and byte. Returns whether it read one.
    fn assert_head_as_sent_is_read_any_order(body: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(body) else {
            return false;
        };
        let Some((sent, key)) = ReviewScan::head_as_sent(text) else {
            return false;
        };
        let general = Head::read_any_order(body, text);
        match (sent.head_review(), general) {
            (Some(review), Some(general)) => {
                assert_eq!(format!("{review:?}"), format!("{:?}", general.review));
                let (scan, stopped_at) = general.stopped.expect("the general read stops too");
                assert_eq!((sent.scanner.pos, key), (scan.scanner.pos, stopped_at));
                assert_eq!(sent.last_rank, scan.last_rank);
                assert!(scan.in_order && sent.in_order);
            }
            (None, None) => {}
            (sent, general) => panic!(
                "as sent: {sent:?}, any order: {:?}",
                general.map(|h| h.review)
            ),
        }
        true
    }

    /// Whether every key of the review's request is one the API server writes, in its order.
    fn request_keys_in_api_server_order(body: &[u8]) -> bool {
        let keys = || {
            let text = std::str::from_utf8(body).ok()?;
            let request = crate::scan::member_at(text, &["request"])??;
            let (mut scanner, mut entries) = (Scanner::new(request), Entries::Start);
            let mut keys = Vec::new();
            while let Some(key) = scanner.next_entry(&mut entries)? {
                keys.push(GO_ORDER.iter().position(|k| *k == key));
                scanner.skip_value()?;
            }
            Some(keys)
        };
        keys().is_some_and(|ranks| {
            ranks.iter().all(Option::is_some) && ranks.windows(2).all(|pair| pair[0] < pair[1])
        })
    }

    /// The recorded write of the 1.36 cluster's deployment-controller (its token carries
    /// `extra`, a credential id, and no pod), and the same with a pod bound to the token (as
    /// the API server adds `authentication.kubernetes.io/pod-name` for a pod's projected token).
    fn recorded_service_account_write(pod: bool) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../tests/fixtures/cluster-capture-1.36/reviews/053-helm-install-update-deployment-status-shop-web.json",
        );
        let mut review: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let extra = &mut review["request"]["userInfo"]["extra"];
        assert!(extra
            .get("authentication.kubernetes.io/credential-id")
            .is_some());
        if pod {
            extra["authentication.kubernetes.io/pod-name"] =
                serde_json::json!(["scaler-7d4b9-x2k"]);
            extra["authentication.kubernetes.io/pod-uid"] =
                serde_json::json!(["0b1c2d3e-0000-4000-8000-000000000001"]);
        }
        go_order(&review.to_string())
    }

    #[test]
    fn a_pod_bound_token_is_told_from_extra_by_the_head_and_the_whole_review() {
        for pod in [false, true] {
            let body = recorded_service_account_write(pod);
            let whole = parse_review(body.as_bytes()).unwrap();
            assert_eq!(whole.request.user_info.from_pod, pod);
            let mut head = read_head(body.as_bytes()).unwrap();
            assert!(head.read_user());
            assert_eq!(head.review.request.user_info.from_pod, pod);
            assert_eq!(
                head.review.request.user_info.username,
                "system:serviceaccount:kube-system:deployment-controller"
            );
            assert_eq!(head.rest().unwrap().request.user_info.from_pod, pod);
        }
    }

    #[test]
    fn an_odd_extra_is_no_pod_and_no_reason_to_refuse_a_review() {
        let review = |extra: &str| {
            format!(
                r#"{{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{{"uid":"u","kind":{{"group":"","version":"v1","kind":"ConfigMap"}},"resource":{{"group":"","version":"v1","resource":"configmaps"}},"name":"c","namespace":"shop","operation":"UPDATE","userInfo":{{"username":"u","extra":{extra}}},"object":{{}},"oldObject":{{}}}}}}"#
            )
        };
        for (extra, pod) in [
            ("null", false),
            ("[{}]", false),
            ("{}", false),
            ("5", false),
            (r#"{"authentication.kubernetes.io/pod-name":[]}"#, false),
            (r#"{"authentication.kubernetes.io/pod-name":[""]}"#, true),
            (r#"{"authentication.kubernetes.io/pod-name":null}"#, false),
            (
                r#"{"authentication.kubernetes.io/pod-name":{"a":["b"]}}"#,
                false,
            ),
            (r#"{"authentication.kubernetes.io/pod-name":"web-1"}"#, true),
            (
                r#"{"other":["x"],"authentication.kubernetes.io/pod-name":["web-1"]}"#,
                true,
            ),
        ] {
            let body = review(extra);
            let whole = parse_review(body.as_bytes()).unwrap_or_else(|e| panic!("{extra}: {e}"));
            assert_eq!(whole.request.user_info.from_pod, pod, "{extra}");
            let mut head = read_head(body.as_bytes()).unwrap();
            assert!(head.read_user(), "{extra}");
            assert_eq!(head.review.request.user_info.from_pod, pod, "{extra}");
        }
    }

    #[test]
    fn a_head_field_after_the_objects_is_read_with_the_whole_review() {
        // In the API server's order up to `object`, then `namespace`: no API server writes
        // this; the head stops at `object` without the namespace, and the whole review has it.
        let body = br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"ConfigMap"},"name":"c","operation":"CREATE","object":{},"namespace":"shop"}}"#;
        assert!(!request_keys_in_api_server_order(body));
        let head = read_head(body).unwrap();
        assert_eq!(head.review.request.namespace(), None);
        assert_eq!(head.rest().unwrap().request.namespace(), Some("shop"));
        assert_eq!(
            parse_review(body).unwrap().request.namespace(),
            Some("shop")
        );
    }

    #[test]
    fn every_recorded_review_is_scanned_as_serde_parses_it() {
        let reviews = recorded_reviews();
        assert!(reviews.len() > 100);
        for body in &reviews {
            // As recorded (sorted keys, pretty) and as the API server sends it.
            assert!(assert_scanned_as_serde_parses(body.as_bytes()));
            let go = go_order(body);
            assert!(assert_scanned_as_serde_parses(go.as_bytes()));
            // As the API server sends it, the head is matched as text.
            assert!(assert_head_as_sent_is_read_any_order(go.as_bytes()), "{go}");
            // In Go's order the head is read, and the scan stops at the user, to read on
            // from there; the user read from the head is the review's, and the rest read on
            // after it is the review read from the start.
            if let Some(head) = read_head(go.as_bytes()) {
                assert!(head.stopped.is_some());
            }
            let whole = parse_review(go.as_bytes()).unwrap();
            let mut head = read_head(go.as_bytes()).unwrap();
            assert!(head.read_user() && head.read_user());
            assert_eq!(
                format!("{:?}", head.review.request.user_info),
                format!("{:?}", whole.request.user_info)
            );
            assert!(head.review.request.object.is_none());
            assert_eq!(
                format!("{:?}", head.rest()),
                format!("{:?}", Ok::<_, ReviewError>(whole))
            );
            // Every recorded head is read, those that name no object (collection DELETEs)
            // included, with the name serde reads.
            let head = parse_head(go.as_bytes()).expect("a head");
            let name = serde_json::from_str::<serde_json::Value>(body).unwrap()["request"]["name"]
                .as_str()
                .filter(|n| !n.is_empty())
                .map(str::to_string);
            assert_eq!(head.request.name().map(str::to_string), name);
        }
    }

    #[test]
    fn the_head_needs_only_a_prefix_to_be_utf8() {
        let mut body = go_order(&recorded_reviews()[0]).into_bytes();
        // Invalid UTF-8 in a long object, after the head: the head is still read.
        let at = body.windows(9).position(|w| w == b"\"object\":").unwrap() + 9;
        let mut padded = body[..at].to_vec();
        padded.extend_from_slice(b"{\"junk\":\"");
        padded.extend(std::iter::repeat_n(b'x', 8000));
        padded.extend_from_slice(&[0xff, 0xfe]);
        padded.extend_from_slice(b"\"},\"rest\":");
        padded.extend_from_slice(&body[at..]);
        assert!(parse_head(&padded).is_some());
        assert!(parse_review(&padded).is_err());
        assert!(read_head(&padded).unwrap().rest().is_err());
        // The user needs the whole body as text: not read, and the rest is refused as before.
        let mut head = read_head(&padded).unwrap();
        assert!(!head.read_user());
        assert!(head.rest().is_err());
        body.truncate(at);
        assert!(parse_review(&body).is_err());
    }

    #[test]
    fn a_head_longer_than_the_prefix_is_read_from_the_whole_body() {
        let name = "n".repeat(253);
        let group = format!("{}.example.com", "g".repeat(230));
        let body = format!(
            r#"{{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{{"uid":"u","kind":{{"group":"{group}","version":"v1","kind":"Widget"}},"resource":{{"group":"{group}","version":"v1","resource":"widgets"}},"requestKind":{{"group":"{group}","version":"v1","kind":"Widget"}},"name":"{name}","namespace":"{ns}","operation":"UPDATE","userInfo":{{"username":"u"}},"object":{{"a":"{pad}"}},"oldObject":null}}}}"#,
            ns = "s".repeat(63),
            pad = "x".repeat(5000),
        );
        let mut head = read_head(body.as_bytes()).expect("the head");
        assert!(body.find(r#""userInfo""#).unwrap() > 1024);
        assert_eq!(head.review.request.name.as_deref(), Some(name.as_str()));
        assert_eq!(head.review.request.kind.group, group);
        assert!(head.read_user());
        assert_eq!(head.review.request.user_info.username, "u");
        assert_eq!(
            format!("{:?}", head.rest().unwrap()),
            format!("{:?}", parse_review(body.as_bytes()).unwrap())
        );
        // A user the scanner does not take: not read, and the review is read from the start.
        let odd = body.replace(
            r#""userInfo":{"username":"u"}"#,
            r#""userInfo":{"username":5}"#,
        );
        let mut head = read_head(odd.as_bytes()).expect("the head");
        assert!(!head.read_user());
        assert_eq!(
            format!("{:?}", head.rest()),
            format!("{:?}", parse_review(odd.as_bytes()))
        );
        assert!(assert_scanned_as_serde_parses(body.as_bytes()));
    }

    #[test]
    fn what_serde_rejects_the_scanner_does_not_take() {
        let review = |request: &str| {
            format!(
                r#"{{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{request}}}"#
            )
        };
        let base = r#""uid":"u","kind":{"group":"","version":"v1","kind":"ConfigMap"},"name":"c","operation":"UPDATE""#;
        for request in [
            format!(r#"{{{base},"name":"again"}}"#),
            format!("{{{}}}", base.replace("UPDATE", "PATCH")),
            format!(r#"{{{base},"dryRun":"yes"}}"#),
            format!(r#"{{{base},"userInfo":{{"username":1}}}}"#),
            format!(r#"{{{base},"namespace":7}}"#),
            format!(r#"{{{base},"object":{{"a":1}},"object":{{"a":2}}}}"#),
            format!("{{{base},\"namespace\":\"a\tb\"}}"),
            r#"{"kind":{},"operation":"UPDATE"}"#.to_string(),
            r#"{"uid":"u","kind":{"kind":"A","kind":"B"},"operation":"UPDATE"}"#.to_string(),
        ] {
            let body = review(&request);
            assert!(!assert_scanned_as_serde_parses(body.as_bytes()), "{body}");
            assert!(parse_review(body.as_bytes()).is_err(), "{body}");
        }
        // Trailing text, a repeated top-level field, another kind.
        for body in [
            format!("{} x", review(&format!("{{{base}}}"))),
            review(&format!("{{{base}}}")).replacen('{', r#"{"kind":"Pod","#, 1),
            review(&format!("{{{base}}}")).replace("AdmissionReview", "Review"),
        ] {
            assert!(!assert_scanned_as_serde_parses(body.as_bytes()), "{body}");
            assert!(parse_review(body.as_bytes()).is_err(), "{body}");
        }
        // Escapes, nulls, unknown fields and whitespace are read as serde reads them.
        let body = review(&format!(
            "{{ {base} , \"namespace\" : null, \"subResource\":\"st\\u0061tus\", \"extra\": [{{}}],\n \"dryRun\":null, \"options\":null, \"oldObject\": null }}"
        ));
        assert!(assert_scanned_as_serde_parses(body.as_bytes()), "{body}");
        let parsed = parse_review(body.as_bytes()).unwrap();
        assert_eq!(parsed.request.sub_resource(), Some("status"));
        assert!(parsed.request.old_object().is_none());
    }

    proptest::proptest! {
        /// Reviews with fields in any order, escaped strings, nulls and unknown fields: what
        /// the scanner reads is what serde parses.
        #[test]
        fn a_scanned_review_is_the_parsed_one(
            fields in fields(),
            again in proptest::option::weighted(0.2, field()),
            shuffle in proptest::collection::vec(proptest::prelude::any::<u16>(), 14),
            pretty in proptest::prelude::any::<bool>(),
        ) {
            // Each field at most once, and sometimes one of them again.
            let mut fields: Vec<String> = fields.into_iter().flatten().chain(again).collect();
            for (i, j) in shuffle.iter().enumerate().take(fields.len()) {
                let len = fields.len();
                fields.swap(i, *j as usize % len);
            }
            let sep = if pretty { ",\n  " } else { "," };
            let body = format!(
                r#"{{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{{{}}}}}"#,
                fields.join(sep)
            );
            assert_scanned_as_serde_parses(body.as_bytes());
        }
    }

    proptest::proptest! {
        /// Heads in the API server's shape, with strings of every sort (escapes, quotes,
        /// non-ASCII, empty), nulls, optional keys left out, a byte changed anywhere: matched
        /// as text, or declined, never read otherwise than entry by entry.
        #[test]
        fn a_head_matched_as_sent_is_the_head_read_entry_by_entry(
            strings in proptest::collection::vec(head_string(), 12),
            present in proptest::collection::vec(proptest::prelude::any::<bool>(), 6),
            operation in proptest::sample::select(vec!["CREATE", "UPDATE", "DELETE", "CONNECT", "PATCH"]),
            flip in proptest::option::weighted(0.3, (proptest::prelude::any::<u16>(), proptest::prelude::any::<u8>())),
        ) {
            let optional = |i: usize, key: &str, value: &str| {
                if present[i] { format!(r#","{key}":{value}"#) } else { String::new() }
            };
            let gvk = format!(r#"{{"group":{},"version":{},"kind":{}}}"#, strings[3], strings[4], strings[5]);
            let body = format!(
                concat!(
                    r#"{{"kind":{},"apiVersion":{},"request":{{"uid":{},"kind":{},"resource":{{"group":{},"version":{},"resource":{}}}"#,
                    r#"{}{}{}{}{}{},"operation":"{}","userInfo":{{"username":{}}},"object":null}}}}"#
                ),
                if present[0] { r#""AdmissionReview""# } else { r#""Other""# },
                if present[1] { r#""admission.k8s.io/v1""# } else { &strings[0] },
                strings[1], gvk, strings[6], strings[7], strings[8],
                optional(2, "subResource", &strings[9]),
                optional(3, "requestKind", &gvk),
                optional(3, "requestResource", r#"{"group":"","version":"v1","resource":"x"}"#),
                optional(4, "requestSubResource", &strings[9]),
                optional(4, "name", &strings[10]),
                optional(5, "namespace", &strings[11]),
                operation, strings[2],
            );
            let mut body = body.into_bytes();
            match flip {
                // A byte changed: matched as text or declined, as read entry by entry.
                Some((at, byte)) => {
                    let at = at as usize % body.len();
                    body[at] = byte;
                    assert_head_as_sent_is_read_any_order(&body);
                }
                None => {
                    let matched = assert_head_as_sent_is_read_any_order(&body);
                    assert_scanned_as_serde_parses(&body);
                    // Every head in the API server's shape with plain strings is matched.
                    let plain = strings.iter().all(|s| s.starts_with('"') && !s.contains('\\'));
                    if plain && present[0] && present[1] && operation != "PATCH" {
                        proptest::prop_assert!(matched, "{}", String::from_utf8_lossy(&body));
                    }
                }
            }
        }
    }

    /// A JSON value where the head has a string: mostly plain, sometimes escaped, quoted,
    /// non-ASCII, empty, or not a string at all.
    fn head_string() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            30 => "[a-z0-9.-]{1,12}".prop_map(|s| format!("\"{s}\"")),
            1 => Just("\"\"".to_string()),
            1 => Just("\"w\\u0065b\"".to_string()),
            1 => Just("\"a\\\"b\"".to_string()),
            1 => Just("\"caf\u{e9}\"".to_string()),
            1 => Just("null".to_string()),
            1 => Just("1".to_string()),
        ]
    }

    /// The request's 13 kinds of field, each at most once (each present 80% of the time).
    fn fields() -> impl proptest::strategy::Strategy<Value = Vec<Option<String>>> {
        (0..13)
            .map(|kind| proptest::option::weighted(0.8, field_of(kind)))
            .collect::<Vec<_>>()
    }

    /// A field of any kind.
    fn field() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        (0..13usize).prop_flat_map(field_of)
    }

    /// A field of one kind, its key and a value: mostly what the API server sends, now and
    /// then what serde rejects somewhere.
    fn field_of(kind: usize) -> proptest::strategy::BoxedStrategy<String> {
        use proptest::prelude::*;
        let text = prop_oneof![
            6 => Just("\"web\"".to_string()),
            3 => Just("\"w\\u0065b\"".to_string()),
            1 => Just("\"\"".to_string()),
            1 => Just("null".to_string()),
            1 => Just("1".to_string()),
        ];
        let object = prop_oneof![
            Just("{\"a\":[1,{\"b\":\"}\"}]}".to_string()),
            Just("null".to_string()),
            Just("{}".to_string()),
        ];
        match kind {
            0 => text.prop_map(|t| format!("\"uid\":{t}")).boxed(),
            1 => text.prop_map(|t| format!("\"name\":{t}")).boxed(),
            2 => text.prop_map(|t| format!("\"namespace\":{t}")).boxed(),
            3 => text.prop_map(|t| format!("\"subResource\":{t}")).boxed(),
            4 => text
                .prop_map(|t| format!("\"kind\":{{\"group\":\"apps\",\"kind\":{t}}}"))
                .boxed(),
            5 => text
                .prop_map(|t| format!("\"resource\":{{\"resource\":{t},\"version\":\"v1\"}}"))
                .boxed(),
            6 => prop_oneof![
                Just("\"CREATE\""),
                Just("\"UPDATE\""),
                Just("\"DELETE\""),
                Just("\"CONNECT\""),
                Just("\"update\"")
            ]
            .prop_map(|o| format!("\"operation\":{o}"))
            .boxed(),
            7 => text
                .prop_map(|t| format!("\"userInfo\":{{\"username\":{t},\"groups\":[\"g\"]}}"))
                .boxed(),
            8 => text
                .prop_map(|t| format!("\"options\":{{\"fieldManager\":{t}}}"))
                .boxed(),
            9 => object.prop_map(|o| format!("\"object\":{o}")).boxed(),
            10 => object.prop_map(|o| format!("\"oldObject\":{o}")).boxed(),
            11 => prop_oneof![Just("true"), Just("false"), Just("null")]
                .prop_map(|d| format!("\"dryRun\":{d}"))
                .boxed(),
            _ => object.prop_map(|o| format!("\"requestKind\":{o}")).boxed(),
        }
    }
}
