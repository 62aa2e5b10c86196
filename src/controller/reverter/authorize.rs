//! Whether the revision's author may make the write (RBAC, asked of the API server), and the
//! report of a write refused for its author ([`Refusals`], with its gauge).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::events::{self, Reason};
use serde_json::Value;

use crate::core::notes;
use crate::core::{
    author_needs, role_ref, AuthorAccess, AuthorPermission, Index, LockedObject, ReverterWrite,
    RoleRef, UnknownAuthor, UnknownAuthorOutOfScope, WritePlace,
};
use crate::metrics::Metrics;

use super::attempt::{Attempt, Outcome, RevertError, SkipReason, Step};
use super::cluster::{Cluster, Place};
use super::key::ObjectKey;

/// Why the reverter leaves a drifted object as it is, for its author.
pub(super) enum Refusal<'a> {
    /// The revision's author lacks these accesses.
    Lacks(&'a [AuthorAccess]),
    /// The author is not known, and the object is out of what is held for such a revision.
    NotKnown(UnknownAuthor, UnknownAuthorOutOfScope),
    /// The author is not known: these paths are held at what was live.
    Held(UnknownAuthor, &'a [String]),
}

/// Whether the newest revision's author may make the write (docs/security.md): on when
/// granted, else the refusal, reported, ends the attempt.
pub(super) async fn authorize(
    cluster: &dyn Cluster,
    refusals: &Refusals,
    attempt: &Attempt<'_>,
    desired: &Value,
) -> Step<()> {
    let (object, ar) = (&*attempt.object, &attempt.place.ar);
    let key = ObjectKey::of(object);
    let write = if attempt.live.is_some() {
        ReverterWrite::Patch
    } else {
        ReverterWrite::Create
    };
    let Some(newest) = attempt.state.newest() else {
        return Err(Outcome::Skipped(SkipReason::NotRevertable).into());
    };
    // The scope the API server gives the kind (discovery), never the chart's namespace for
    // a cluster-scoped kind.
    let Some(place) = WritePlace::of(Some(attempt.place.namespaced), key.namespace.as_deref())
    else {
        tracing::warn!(object = %object.describe(), "a namespaced kind without a namespace; not written");
        return Err(Outcome::Skipped(SkipReason::NoNamespace).into());
    };
    // A binding grants the role as it is live, whatever the chart says of it.
    let role = match role_ref(&key.group, &ar.plural, place, desired) {
        Some(role) => live_role(cluster, &role).await?,
        None => None,
    };
    let needed = author_needs(
        write,
        &key.group,
        &ar.plural,
        place,
        &key.name,
        desired,
        role.as_ref(),
    );
    let permission = cluster
        .author_permission(&newest.author, &needed)
        .await
        .map_err(RevertError::Author)?;
    let refusal = match &permission {
        AuthorPermission::Granted => None,
        AuthorPermission::Refused(accesses) => Some(Refusal::Lacks(accesses)),
        AuthorPermission::NoAuthor(why) => Some(Refusal::NotKnown(
            *why,
            UnknownAuthorOutOfScope::NotHeld(*why),
        )),
    };
    if let Some(refusal) = refusal {
        refusals.report(cluster, newest, object, refusal).await;
        return Err(Outcome::Refused.into());
    }
    refusals.clear(&key);
    Ok(())
}

/// The role a binding refers to, as the API server has it now (`None`: it does not exist).
async fn live_role(cluster: &dyn Cluster, role: &RoleRef) -> Result<Option<Value>, kube::Error> {
    let ar = kube::core::ApiResource {
        group: "rbac.authorization.k8s.io".into(),
        version: "v1".into(),
        api_version: "rbac.authorization.k8s.io/v1".into(),
        kind: if role.resource == "roles" {
            "Role"
        } else {
            "ClusterRole"
        }
        .into(),
        plural: role.resource.into(),
    };
    let place = Place {
        ar,
        namespaced: role.namespace.is_some(),
        namespace: role.namespace.clone(),
        name: role.name.clone(),
    };
    cluster.get(&place).await
}

/// Objects left drifted because their revision's author may not write them (or is not known),
/// with the revision's Secret: each reported once per revision; the gauge
/// `author_refused_objects` counts them.
pub(super) struct Refusals {
    refused: Mutex<HashMap<ObjectKey, String>>,
    metrics: Arc<Metrics>,
}

impl Refusals {
    pub(super) fn new(metrics: Arc<Metrics>) -> Self {
        Refusals {
            refused: Mutex::new(HashMap::new()),
            metrics,
        }
    }

    fn refused(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, String>> {
        self.refused.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A write refused for the revision's author: a warning log line and a Warning Event on the
    /// revision's Secret (`AuthorLacksRights` naming the author and what they may not do, or
    /// `UnknownAuthor`), once per object, revision and author; counted in `author_refused_objects`.
    pub(super) async fn report(
        &self,
        cluster: &dyn Cluster,
        revision: &crate::core::Revision,
        object: &LockedObject,
        refusal: Refusal<'_>,
    ) {
        let key = ObjectKey::of(object);
        // Once per revision and author: a vouch gives the same revision another author.
        let seen = format!("{} by {}", revision.secret, revision.author);
        {
            let mut refused = self.refused();
            let new = refused.insert(key, seen.clone()).as_ref() != Some(&seen);
            self.metrics
                .author_refused_objects
                .set(refused.len() as i64);
            if !new {
                return;
            }
        }
        let (object_name, release, number) =
            (object.describe(), &object.release, revision.revision);
        let (reason, note) = match refusal {
            Refusal::Lacks(accesses) => {
                let refused: Vec<String> = accesses.iter().map(ToString::to_string).collect();
                tracing::warn!(object = %object_name, release = %release, revision = number, author = %revision.author, refused = ?refused, "drift not reverted: the revision's author may not make the write");
                (
                    Reason::AuthorLacksRights,
                    notes::author_lacks_rights(
                        &object_name,
                        (release, number),
                        &revision.author,
                        &refused,
                    ),
                )
            }
            Refusal::NotKnown(why, out) => {
                tracing::warn!(object = %object_name, release = %release, revision = number, why = why.as_str(), scope = out.as_str(), "drift not reverted: the revision's author is not known");
                (
                    Reason::UnknownAuthor,
                    notes::unknown_author_not_written(
                        &object_name,
                        (release, number),
                        why.as_str(),
                        out.as_str(),
                    ),
                )
            }
            Refusal::Held(why, paths) => (
                Reason::UnknownAuthor,
                notes::unknown_author_held(&object_name, (release, number), paths, why.as_str()),
            ),
        };
        let reference = crate::attempts::revision_reference(&revision.secret);
        // The object as the related one: one Event per object refused, not one series per Secret.
        let related = crate::attempts::locked_reference(object);
        let event = events::event(reason, note, Some(related));
        if let Err(e) = cluster.publish(&event, &reference).await {
            events::not_recorded(reason, &e);
        }
    }

    /// The author may make the write (again): a later refusal is reported anew.
    pub(super) fn clear(&self, key: &ObjectKey) {
        let mut refused = self.refused();
        if refused.remove(key).is_some() {
            self.metrics
                .author_refused_objects
                .set(refused.len() as i64);
        }
    }

    #[cfg(test)]
    pub(super) fn kept(&self) -> usize {
        self.refused().len()
    }

    /// Forgets the refusals of objects no release renders any more.
    pub(super) fn forget(&self, index: &Index) {
        let mut refused = self.refused();
        refused.retain(|key, _| key.claimed(index));
        self.metrics
            .author_refused_objects
            .set(refused.len() as i64);
    }
}
