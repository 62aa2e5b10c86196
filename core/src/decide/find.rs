//! Which locked object a review writes, and through which door: asked once per review, from
//! its head, and carried through the user's rules to the whole decision ([`Found`]).

use std::borrow::Cow;

use crate::index::{Claims, Index, LockedObject, ReleaseKey, Revision};
use crate::policy::{Config, Policy};
use crate::release::describe_json_error;
use crate::review::{Operation, Request};
use crate::schema::Schema;

use super::{Allowed, DecideError, Decision, Lock};

/// Which part of a locked object a request writes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Door {
    /// `scale`: the parent's replicas.
    pub(super) scale: bool,
    /// `status`: compared on metadata.
    pub(super) status: bool,
    /// `pods/eviction`: a delete.
    pub(super) evict: bool,
}

/// What a review's head says about the object it writes: found once ([`find`]), answered from
/// the head where it can be ([`Found::answer`]), checked against the release's rules once its
/// user is read ([`Found::check_user`]), and decided with the whole review
/// ([`super::decide_found`]).
#[derive(Debug)]
pub struct Found<'i> {
    pub(super) at: At<'i>,
    /// Rules 2 to 4, once checked for the sole claim (none of them freed the write).
    pub(super) ruled: Option<Ruled<'i>>,
    /// The release the stored object's annotations name, read by the caller for a write whose
    /// request holds no metadata of the object ([`Found::owner_to_read`]); `Some(None)`: it
    /// names none.
    pub(super) stored_owner: Option<Option<ReleaseKey>>,
}

#[derive(Debug)]
pub(super) enum At<'i> {
    /// Nothing locked to find: the write is free for this reason.
    Free(Allowed),
    /// A write that names no object in its head (the namespace controller's collection
    /// DELETEs name each object only in `oldObject`): found with the whole review.
    Unnamed,
    /// Claimed by one release or more, written through `door`.
    Object { claims: Claims<'i>, door: Door },
}

/// The release, its newest revision and its policy, when rules 2 to 4 leave the write locked.
pub(super) type Ruled<'i> = (ReleaseKey, &'i Revision, Policy<'i>);

/// Which locked object `request` writes, read from what a review's head holds (kind,
/// resource, subresource, name, namespace, operation); the same for the head and the whole
/// review.
pub fn find<'i>(index: &'i Index, schema: &Schema, request: &Request<'_>) -> Found<'i> {
    let at = match request.name() {
        None if request.operation != Operation::Connect => At::Unnamed,
        name => locate(index, schema, request, name.unwrap_or_default()),
    };
    Found {
        at,
        ruled: None,
        stored_owner: None,
    }
}

impl<'i> Found<'i> {
    /// What the head decides on its own: an object no release owns, or a subresource never
    /// locked (the fast path). `None` when the object is locked and more is needed.
    ///
    /// A write that names no object is answered only when no release renders anything in its
    /// namespace.
    pub fn answer(&self, index: &Index, request: &Request<'_>) -> Option<Decision> {
        match &self.at {
            At::Free(allowed) => Some(Decision::Allow(allowed.clone())),
            At::Unnamed => {
                let is_namespace =
                    request.kind.group.is_empty() && request.kind.kind == "Namespace";
                let elsewhere = match request.namespace() {
                    Some(namespace) if !is_namespace => !index.holds_objects_in(namespace),
                    _ => false,
                };
                elsewhere.then_some(Decision::Allow(Allowed::NotOwned))
            }
            At::Object { .. } => None,
        }
    }

    /// What the head and its user decide about a locked object, without reading either
    /// object: rules 2 to 4 (Helm at work, a release not locked, an exempt user such as the
    /// deployment controller writing a chart's Deployment's status), and all that
    /// [`answer`](Self::answer) decides. `None` when the whole review is needed; the rules'
    /// outcome is kept for it. `request` is a head with its user
    /// ([`crate::review::Head::read_user`]).
    pub fn check_user(
        &mut self,
        index: &'i Index,
        config: &'i Config,
        request: &Request<'_>,
    ) -> Option<Decision> {
        let At::Object { claims, .. } = &self.at else {
            return self.answer(index, request);
        };
        // Two releases render the object (`helm install --take-ownership`): the one that holds
        // it is named in the stored object's annotations, which only the whole review has.
        if claims.contested() || self.ruled.is_some() {
            return None;
        }
        match Lock::rules(index, config, request, claims.owner(|| None)) {
            Ok(ruled) => {
                self.ruled = Some(ruled);
                None
            }
            Err(allowed) => Some(Decision::Allow(*allowed)),
        }
    }

    /// Whether the owner of the object a write names can only be known from the stored
    /// object's annotations, which the request does not hold: a `scale` or an eviction (their
    /// body carries no metadata of the parent) of an object two releases or more claim, none of
    /// them of the object's own namespace ([`Claims::unresolved`]). The caller reads them and
    /// gives them with [`Found::with_stored_owner`]; a subresource is its parent's owner's.
    pub fn owner_to_read(&self) -> bool {
        matches!(&self.at, At::Object { claims, door } if (door.scale || door.evict) && claims.unresolved())
    }

    /// The release the stored object's annotations name (`None`: none), as the caller read it
    /// for [`Found::owner_to_read`].
    pub fn with_stored_owner(mut self, owner: Option<ReleaseKey>) -> Self {
        self.stored_owner = Some(owner);
        self
    }

    /// The found object, once the whole review is read: the owner of a contested object
    /// ([`Claims::owner`]: the release its annotations name, else the release of its own
    /// namespace), and the object an unnamed write names in `oldObject`.
    pub(super) fn resolve(
        self,
        index: &'i Index,
        schema: &Schema,
        request: &Request<'_>,
    ) -> Result<Resolved<'i>, DecideError> {
        let (claims, door) = match self.at {
            At::Free(allowed) => return Ok(Resolved::Free(allowed)),
            At::Unnamed => match name_in_objects(request)? {
                None => return Ok(Resolved::Free(Allowed::NotOwned)),
                Some(name) => {
                    return Found {
                        at: locate(index, schema, request, &name),
                        ruled: None,
                        stored_owner: None,
                    }
                    .resolve(index, schema, request)
                }
            },
            At::Object { claims, door } => (claims, door),
        };
        let in_hand = !(door.scale || door.evict);
        let stored_owner = self.stored_owner;
        let unknown = !in_hand && stored_owner.is_none() && claims.unresolved();
        let object = claims.owner(|| match stored_owner {
            Some(owner) => owner,
            None if in_hand => annotated_release(request.old_object().or(request.object())),
            None => None,
        });
        // The rules checked with the user were the sole claim's, which is the owner.
        let ruled = self.ruled.filter(|_| !claims.contested());
        // The owner could not be read: no claim may open the object on its own word.
        let others = if unknown {
            claims
                .all()
                .filter(|c| !std::sync::Arc::ptr_eq(c, object))
                .collect()
        } else {
            Vec::new()
        };
        Ok(Resolved::Object {
            object,
            door,
            ruled,
            others,
        })
    }
}

/// A found object, with the whole review read.
pub(super) enum Resolved<'i> {
    Free(Allowed),
    Object {
        object: &'i std::sync::Arc<LockedObject>,
        door: Door,
        ruled: Option<Ruled<'i>>,
        /// The other claims, when the owner is not known ([`Found::owner_to_read`] and not
        /// read): the first of them that locks decides if the owner's candidate does not.
        others: Vec<&'i std::sync::Arc<LockedObject>>,
    },
}

/// The object `request` writes under `name`, and through which door; or why there is none.
fn locate<'i>(index: &'i Index, schema: &Schema, request: &Request<'_>, name: &str) -> At<'i> {
    if request.operation == Operation::Connect {
        return At::Free(Allowed::NotOwned);
    }
    // `scale` writes the parent's /spec/replicas; `status` keeps the metadata it is sent for
    // several kinds (measured on kube-apiserver 1.20: a Service's and a Namespace's labels and
    // annotations, a Deployment's annotations), so metadata is compared there (the review's
    // object already holds what will be stored); an eviction deletes the Pod.
    let door = |scale, status, evict| Door {
        scale,
        status,
        evict,
    };
    let is_pods = request.resource.group.is_empty() && request.resource.resource == "pods";
    let door = match request.sub_resource() {
        // `namespaces/finalize` keeps all metadata and `spec.finalizers` it is sent (measured on
        // 1.20, docs/subresources.md): compared like a write of the object itself.
        None | Some("finalize") => door(false, false, false),
        // `pods/resize` (Kubernetes 1.33+, in-place resize) writes the containers' `resources`
        // (and `resizePolicy`) of a Pod; a chart's bare Pod sets them. The Pod's own update may
        // not change them, so the next `helm upgrade` that applies the chart's would fail: a
        // write of the Pod itself, compared as one (its strategy keeps nothing else it is sent).
        Some("resize") if is_pods => door(false, false, false),
        Some("scale") => door(true, false, false),
        Some("status") => door(false, true, false),
        Some("eviction") if is_pods => door(false, false, true),
        Some(_) => return At::Free(Allowed::Subresource),
    };
    // For a Namespace the API server sets `request.namespace` to the Namespace's own name; it is
    // cluster-scoped, and indexed without a namespace.
    let is_namespace = request.kind.group.is_empty() && request.kind.kind == "Namespace";
    let namespace = request.namespace().filter(|_| !is_namespace);
    let claims = if door.evict {
        index.find("", "Pod", namespace, name)
    } else if door.scale {
        // A Scale names its parent by resource: the API server's schema (and each CRD's
        // `names`) says which kind that is; when nothing says (an offline decision about a
        // custom resource whose CRD was not given), the kinds the plural may stand for.
        let (group, plural) = (&request.resource.group, request.resource.resource.as_ref());
        match schema.kind_of_resource(group, plural) {
            Some(kind) => index.find(group, kind, namespace, name),
            None => singular_candidates(plural)
                .into_iter()
                .find_map(|kind| index.find(group, &kind, namespace, name)),
        }
    } else {
        index.find(&request.kind.group, &request.kind.kind, namespace, name)
    };
    match claims {
        Some(claims) => At::Object { claims, door },
        None => At::Free(Allowed::NotOwned),
    }
}

/// The name a write that names no object gives in `oldObject` (or `object`); `None` when it
/// gives none.
fn name_in_objects(request: &Request<'_>) -> Result<Option<String>, DecideError> {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(default)]
        name: String,
    }
    #[derive(serde::Deserialize)]
    struct Named {
        metadata: Option<Meta>,
    }
    let Some(old) = request.old_object().or(request.object()) else {
        return Ok(None);
    };
    // The scanner steps to the name without reading the rest of the object; serde reads what
    // it does not take (a null `metadata`, a name that is not a string) and says what is wrong.
    let scanned = crate::scan::member_at(old.get(), &["metadata", "name"])
        .map(|name| name.map(crate::scan::string));
    let name = match scanned {
        Some(None) => String::new(),
        Some(Some(Some(name))) => name.into_owned(),
        _ => {
            let named: Named =
                serde_json::from_str(old.get()).map_err(|e| DecideError::BadObject {
                    field: "oldObject",
                    reason: describe_json_error(&e),
                })?;
            named.metadata.map(|m| m.name).unwrap_or_default()
        }
    };
    Ok(Some(name).filter(|name| !name.is_empty()))
}

/// The release an object's `meta.helm.sh/release-name` and `-namespace` annotations name.
pub(super) fn annotated_release(
    object: Option<crate::review::RawObject<'_>>,
) -> Option<ReleaseKey> {
    #[derive(serde::Deserialize)]
    struct Annotated {
        metadata: Option<Meta>,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        annotations: Option<std::collections::BTreeMap<String, String>>,
    }
    let object: Annotated = serde_json::from_str(object?.get()).ok()?;
    crate::release::annotated_release_key(&object.metadata?.annotations?)
}

/// Kinds a plural resource name may stand for (`deployments` -> `deployment`, `registries` ->
/// `registry`; the index compares kinds without case), the inverse of the usual English plural
/// CRDs are given; only when nothing states the kind.
fn singular_candidates(plural: &str) -> Vec<Cow<'_, str>> {
    let mut out = Vec::with_capacity(3);
    if let Some(stem) = plural.strip_suffix("ies") {
        out.push(Cow::Owned(format!("{stem}y")));
    }
    if let Some(stem) = plural.strip_suffix("es") {
        out.push(Cow::Borrowed(stem));
    }
    if let Some(stem) = plural.strip_suffix('s') {
        out.push(Cow::Borrowed(stem));
    }
    out
}
