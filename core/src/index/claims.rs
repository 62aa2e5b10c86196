//! Who claims an object: each release's claim on what its newest revision renders, keyed by
//! a hash of the object's identity, and which release holds an object several claim
//! ([`Claims::owner`]).

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::{Conflict, Index, ReleaseKey, ReleaseState};
use crate::kinds::{canonical_group, same_group, scope_of, Scope};
use crate::locked::LockedObject;

#[derive(Clone, Debug)]
pub(super) struct Claim {
    pub(super) object: Arc<LockedObject>,
    /// Registered under "no namespace" too because the kind's scope is unknown (a custom
    /// resource, a kind newer than [`crate::kinds`]): matches a cluster-scoped request, whatever
    /// namespace the chart gives.
    pub(super) alias: bool,
}

/// The claims on one identity hash: nearly always one, kept without an allocation of its own.
#[derive(Clone, Debug)]
pub(super) enum ClaimSet {
    One(Claim),
    Many(Arc<[Claim]>),
}

impl ClaimSet {
    pub(super) fn from_vec(claims: Vec<Claim>) -> ClaimSet {
        match <[Claim; 1]>::try_from(claims) {
            Ok([claim]) => ClaimSet::One(claim),
            Err(claims) => ClaimSet::Many(claims.into()),
        }
    }

    pub(super) fn as_slice(&self) -> &[Claim] {
        match self {
            ClaimSet::One(claim) => std::slice::from_ref(claim),
            ClaimSet::Many(claims) => claims,
        }
    }
}

impl Index {
    pub(super) fn claim(&mut self, state: &ReleaseState) -> Vec<Conflict> {
        let mut conflicts = Vec::new();
        for object in state.objects.iter().flatten() {
            let ns = object.namespace.as_deref();
            self.add_claim(
                object_hash(&object.group, &object.kind, ns, &object.name),
                Claim {
                    object: object.clone(),
                    alias: false,
                },
            );
            if ns.is_some() && scope_of(&object.group, &object.kind) == Scope::Unknown {
                self.add_claim(
                    object_hash(&object.group, &object.kind, None, &object.name),
                    Claim {
                        object: object.clone(),
                        alias: true,
                    },
                );
            }
            self.object_count += 1;
            if let Some(ns) = &object.namespace {
                let held = self.per_namespace.get(ns).copied().unwrap_or(0);
                self.per_namespace.insert(ns.clone(), held + 1);
            }
            let (winner, losers) = self.claimants(&object.group, &object.kind, ns, &object.name);
            if !losers.is_empty() {
                conflicts.push(Conflict {
                    object: object.describe(),
                    winner: winner.clone(),
                    losers,
                });
            }
        }
        conflicts
    }

    pub(super) fn add_claim(&mut self, hash: u64, claim: Claim) {
        let mut claims: Vec<Claim> = self
            .objects
            .get(&hash)
            .map(|c| c.as_slice().to_vec())
            .unwrap_or_default();
        claims.push(claim);
        claims.sort_by(|a, b| (a.alias, &a.object.release).cmp(&(b.alias, &b.object.release)));
        self.objects.insert(hash, ClaimSet::from_vec(claims));
    }

    pub(super) fn unclaim(&mut self, state: &ReleaseState) {
        for object in state.objects.iter().flatten() {
            let ns = object.namespace.as_deref();
            let mut hashes = vec![object_hash(&object.group, &object.kind, ns, &object.name)];
            if ns.is_some() {
                hashes.push(object_hash(&object.group, &object.kind, None, &object.name));
            }
            for hash in hashes {
                if let Some(claims) = self.objects.get(&hash) {
                    let kept: Vec<Claim> = claims
                        .as_slice()
                        .iter()
                        .filter(|c| !Arc::ptr_eq(&c.object, object))
                        .cloned()
                        .collect();
                    if kept.is_empty() {
                        self.objects.remove(&hash);
                    } else if kept.len() != claims.as_slice().len() {
                        self.objects.insert(hash, ClaimSet::from_vec(kept));
                    }
                }
            }
            self.object_count -= 1;
            if let Some(ns) = &object.namespace {
                match self.per_namespace.get(ns).copied().unwrap_or(0) {
                    0 | 1 => {
                        self.per_namespace.remove(ns);
                    }
                    held => {
                        self.per_namespace.insert(ns.clone(), held - 1);
                    }
                }
            }
        }
    }

    pub(super) fn claimants(
        &self,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> (&ReleaseKey, Vec<ReleaseKey>) {
        let mut owners = self
            .objects
            .get(&object_hash(group, kind, namespace, name))
            .into_iter()
            .flat_map(|c| c.as_slice())
            .filter(|c| !c.alias && c.object.matches(group, kind, namespace, name))
            .map(|c| &*c.object.release);
        let all: Vec<&ReleaseKey> = owners.by_ref().collect();
        // The owner when the annotations name none ([`Claims::owner`]): the release of the
        // object's own namespace, else the first.
        let at = all
            .iter()
            .position(|r| namespace.is_some_and(|ns| ns == r.namespace))
            .unwrap_or(0);
        let winner = all[at];
        let losers = all
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != at)
            .map(|(_, r)| (*r).clone())
            .collect();
        (winner, losers)
    }

    /// Every object claimed by more than one release.
    pub fn conflicts(&self) -> Vec<Conflict> {
        let mut out = Vec::new();
        for state in self.releases() {
            for object in state.objects.iter().flatten() {
                let (winner, losers) = self.claimants(
                    &object.group,
                    &object.kind,
                    object.namespace.as_deref(),
                    &object.name,
                );
                if !losers.is_empty() && *winner == state.key {
                    out.push(Conflict {
                        object: object.describe(),
                        winner: winner.clone(),
                        losers,
                    });
                }
            }
        }
        out
    }

    /// The locked object with this identity, held by the release [`Claims::owner`] picks when
    /// the object's annotations are not at hand: the release of the object's own namespace, else
    /// the sole claim, else the index's first (only among claims from other namespaces, none of
    /// which is proven without the annotations). The API version does not matter; `namespace`
    /// is the request's (`None` for cluster-scoped objects). This is the hot path: no
    /// allocation.
    pub fn lookup(
        &self,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<&Arc<LockedObject>> {
        self.find(group, kind, namespace, name)
            .map(|claims| claims.owner(|| None))
    }

    /// The locked object with this identity held by its owner ([`Claims::owner`]) as the live
    /// object's Helm annotations (`annotated`, read only when two releases claim it) decide.
    pub fn owned(
        &self,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        annotated: impl FnOnce() -> Option<ReleaseKey>,
    ) -> Option<&Arc<LockedObject>> {
        self.find(group, kind, namespace, name)
            .map(|claims| claims.owner(annotated))
    }

    /// Every release's claim on the object with this identity, found with one lookup; `None`
    /// when no release renders it. Allocates only when two releases claim it.
    pub fn find(
        &self,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Claims<'_>> {
        let mut matching = self
            .objects
            .get(&object_hash(group, kind, namespace, name))?
            .as_slice()
            .iter()
            .filter(|c| {
                c.object
                    .matches_request(group, kind, namespace, name, c.alias)
            })
            .map(|c| &c.object);
        let first = matching.next()?;
        Some(Claims {
            first,
            others: matching.collect(),
            namespaced: namespace.is_some(),
        })
    }
}

/// Every release's claim on one object: nearly always one. Two releases render it after
/// `helm install --take-ownership`, or when a release Secret of another namespace names the
/// object (anyone who may write Secrets there can); which of them holds it is decided here,
/// once, for the webhook, the reverter and `kubectl locker` alike ([`Claims::owner`]).
#[derive(Clone, Debug)]
pub struct Claims<'i> {
    pub(super) first: &'i Arc<LockedObject>,
    pub(super) others: Vec<&'i Arc<LockedObject>>,
    /// The object is looked up in a namespace (its request's): a claim of a release of that
    /// namespace is the release of the object's own namespace.
    pub(super) namespaced: bool,
}

impl<'i> Claims<'i> {
    /// Whether more than one release claims the object: then the object's own annotations say
    /// which holds it, and a review's head alone cannot tell.
    pub fn contested(&self) -> bool {
        !self.others.is_empty()
    }

    /// The claim of the release that holds the object; the one owner rule (docs/security.md,
    /// "One owner per object"). When two releases or more claim it:
    ///
    /// 1. the release its Helm annotations name (`annotated`, read only then), when it claims
    ///    the object: Helm's own rule for adoption, which only those who may write the object
    ///    can change;
    ///    (of two of that namespace and name, the one stored in its own namespace);
    /// 2. else the release of the object's own namespace stored there (the smallest name,
    ///    should several there claim it): a claim from another namespace, or of a release
    ///    stored in another (Flux's storage namespace), never outranks it, since whoever may
    ///    write Secrets in any namespace can make one;
    /// 3. else the index's first (smallest namespace and name). Only claims from other
    ///    namespaces are left then: when the annotations were at hand and named none of them,
    ///    none is proven and each decision frees the write ([`crate::Allowed::Unproven`]);
    ///    when they were not (a `scale` of a cluster-scoped object), they must be read first
    ///    ([`Claims::unresolved`]).
    ///
    /// The owner is all that decides: a claim whose release is not the owner never opens the
    /// object (its pending status, its mode) and is never followed by the reverter.
    pub fn owner(&self, annotated: impl FnOnce() -> Option<ReleaseKey>) -> &'i Arc<LockedObject> {
        if !self.contested() {
            return self.first;
        }
        if let Some(named) = annotated() {
            // The annotations name a release by namespace and name; one stored in its own
            // namespace before one of that name stored elsewhere.
            let mut claims = self.all().filter(|c| c.release.is(&named));
            let first = claims.next();
            if let Some(claim) = first
                .into_iter()
                .chain(claims)
                .find(|c| c.release.stored_in.is_none())
                .or(first)
            {
                return claim;
            }
        }
        self.own_namespace().unwrap_or(self.first)
    }

    /// Whether [`owner`](Self::owner) needs the object's annotations to decide: two releases or
    /// more claim it, and none is of the object's own namespace (a cluster-scoped object, or a
    /// namespaced one that only releases of other namespaces render). A write whose request
    /// holds no metadata of the object (a `scale`) reads the stored object's then.
    pub fn unresolved(&self) -> bool {
        self.contested() && self.own_namespace().is_none()
    }

    /// The claim of a release of the object's own namespace, the smallest name first.
    pub(super) fn own_namespace(&self) -> Option<&'i Arc<LockedObject>> {
        if !self.namespaced {
            return None;
        }
        self.all().find(|c| {
            c.release.stored_in.is_none()
                && c.namespace
                    .as_deref()
                    .is_some_and(|ns| ns == c.release.namespace)
        })
    }

    /// Every claim, the owner's first (as [`owner`](Self::owner) decides), then the index's order.
    pub fn by_owner(
        &self,
        annotated: impl FnOnce() -> Option<ReleaseKey>,
    ) -> Vec<&'i Arc<LockedObject>> {
        let owner = self.owner(annotated);
        std::iter::once(owner)
            .chain(self.all().filter(|c| !Arc::ptr_eq(c, owner)))
            .collect()
    }

    /// Every claim, in the index's order.
    pub fn all(&self) -> impl Iterator<Item = &'i Arc<LockedObject>> + '_ {
        std::iter::once(self.first).chain(self.others.iter().copied())
    }
}

impl LockedObject {
    pub(super) fn matches(
        &self,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> bool {
        &*self.name == name
            && same_group(&self.group, group, kind)
            && self.kind.eq_ignore_ascii_case(kind)
            && self.namespace.as_deref() == namespace
    }

    pub(super) fn matches_request(
        &self,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        alias: bool,
    ) -> bool {
        if alias {
            namespace.is_none()
                && &*self.name == name
                && same_group(&self.group, group, kind)
                && self.kind.eq_ignore_ascii_case(kind)
        } else {
            self.matches(group, kind, namespace, name)
        }
    }
}

/// Hashes an object identity; kind is case-insensitive (a `scale` request names the resource)
/// and the group is the one every group serving the kind shares.
pub(super) fn object_hash(group: &str, kind: &str, namespace: Option<&str>, name: &str) -> u64 {
    use std::hash::BuildHasher;
    // Faster than SipHash on these short keys, which need no DoS resistance (an object
    // is indexed only from a release's manifest, and equal hashes only share a claim list).
    let mut h = foldhash::fast::FixedState::with_seed(0).build_hasher();
    h.write(canonical_group(group, kind).as_bytes());
    h.write_u8(0xff);
    for b in kind.bytes() {
        h.write_u8(b.to_ascii_lowercase());
    }
    h.write_u8(0xff);
    namespace.hash(&mut h);
    h.write(name.as_bytes());
    h.finish()
}
