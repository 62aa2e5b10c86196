//! The API calls a reconcile makes, behind a trait ([`Cluster`]) as the fresh read is behind
//! [`crate::confirm::Confirm`]: the reverter's steps ask through it, the API server answers
//! ([`KubeCluster`]), and the steps' unit tests answer in memory.

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{pinned_kind, Scope};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::Client;
use serde_json::Value;

use crate::confirm::BoxFuture;
use crate::controller::author_check::AuthorChecks;
use crate::core::{AuthorNeed, AuthorPermission, Authorship};

/// Where an object lives, as the API server serves its kind.
#[derive(Clone, Debug)]
pub(super) struct Place {
    pub(super) ar: ApiResource,
    /// Whether discovery says the kind is namespaced.
    pub(super) namespaced: bool,
    pub(super) namespace: Option<String>,
    pub(super) name: String,
}

/// One write to a live object.
#[derive(Clone, Debug)]
pub(super) enum Write {
    /// A forced server-side apply as this field manager.
    Apply { manager: String, body: Value },
    /// A JSON patch, as this field manager (`None`: no field manager named).
    Json {
        manager: Option<String>,
        patch: json_patch::Patch,
    },
}

/// The calls the reverter's steps make of the API server.
pub(super) trait Cluster: Send + Sync {
    /// The kind's resource and whether it is namespaced (discovery).
    fn discover<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
    ) -> BoxFuture<'a, Result<(ApiResource, bool), kube::Error>>;

    /// The object as the API server has it now (`None`: it does not exist).
    fn get<'a>(&'a self, place: &'a Place) -> BoxFuture<'a, Result<Option<Value>, kube::Error>>;

    /// Writes a live object; `dry_run`: the API server answers what it would store, and
    /// stores nothing.
    fn patch<'a>(
        &'a self,
        place: &'a Place,
        write: &'a Write,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<DynamicObject, kube::Error>>;

    /// Creates an object, as this field manager.
    fn create<'a>(
        &'a self,
        place: &'a Place,
        manager: &'a str,
        body: &'a DynamicObject,
    ) -> BoxFuture<'a, Result<DynamicObject, kube::Error>>;

    /// What the API server would store `body` (a [`crate::core::stored_form_body`]) as: a
    /// dry-run create, of an object of the kind in `place`'s namespace under a generated name.
    /// Nothing is stored.
    fn stored_form<'a>(
        &'a self,
        place: &'a Place,
        body: &'a Value,
    ) -> BoxFuture<'a, Result<Value, kube::Error>>;

    /// Whether the revision's author may make these accesses (SubjectAccessReviews).
    fn author_permission<'a>(
        &'a self,
        author: &'a Authorship,
        needed: &'a [AuthorNeed],
    ) -> BoxFuture<'a, Result<AuthorPermission, kube::Error>>;

    /// Publishes an Event about `reference`.
    fn publish<'a>(
        &'a self,
        event: &'a Event,
        reference: &'a k8s_openapi::api::core::v1::ObjectReference,
    ) -> BoxFuture<'a, Result<(), kube::Error>>;
}

/// The API server's answers.
pub(super) struct KubeCluster {
    pub(super) client: Client,
    pub(super) recorder: Recorder,
    /// Whether a revision's author may make a write (SubjectAccessReviews, cached).
    pub(super) authors: AuthorChecks,
}

impl KubeCluster {
    fn api(&self, place: &Place) -> Api<DynamicObject> {
        match (place.namespaced, place.namespace.as_deref()) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &place.ar),
            _ => Api::all_with(self.client.clone(), &place.ar),
        }
    }
}

impl Cluster for KubeCluster {
    fn discover<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
    ) -> BoxFuture<'a, Result<(ApiResource, bool), kube::Error>> {
        Box::pin(async move {
            let (ar, caps) = pinned_kind(&self.client, gvk).await?;
            Ok((ar, caps.scope == Scope::Namespaced))
        })
    }

    fn get<'a>(&'a self, place: &'a Place) -> BoxFuture<'a, Result<Option<Value>, kube::Error>> {
        Box::pin(async move {
            let live = self.api(place).get_opt(&place.name).await?;
            live.as_ref()
                .map(serde_json::to_value)
                .transpose()
                .map_err(kube::Error::SerdeError)
        })
    }

    fn patch<'a>(
        &'a self,
        place: &'a Place,
        write: &'a Write,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<DynamicObject, kube::Error>> {
        Box::pin(async move {
            let api = self.api(place);
            match write {
                Write::Apply { manager, body } => {
                    let params = PatchParams {
                        dry_run,
                        ..PatchParams::apply(manager).force()
                    };
                    api.patch(&place.name, &params, &Patch::Apply(body)).await
                }
                Write::Json { manager, patch } => {
                    let params = PatchParams {
                        field_manager: manager.clone(),
                        dry_run,
                        ..PatchParams::default()
                    };
                    api.patch(&place.name, &params, &Patch::<()>::Json(patch.clone()))
                        .await
                }
            }
        })
    }

    fn create<'a>(
        &'a self,
        place: &'a Place,
        manager: &'a str,
        body: &'a DynamicObject,
    ) -> BoxFuture<'a, Result<DynamicObject, kube::Error>> {
        Box::pin(async move {
            let params = PostParams {
                field_manager: Some(manager.to_string()),
                ..PostParams::default()
            };
            self.api(place).create(&params, body).await
        })
    }

    fn stored_form<'a>(
        &'a self,
        place: &'a Place,
        body: &'a Value,
    ) -> BoxFuture<'a, Result<Value, kube::Error>> {
        Box::pin(async move {
            let body: DynamicObject =
                serde_json::from_value(body.clone()).map_err(kube::Error::SerdeError)?;
            let params = PostParams {
                dry_run: true,
                field_manager: Some(crate::core::STORED_FORM_MANAGER.into()),
            };
            let answer = self.api(place).create(&params, &body).await?;
            serde_json::to_value(answer).map_err(kube::Error::SerdeError)
        })
    }

    fn author_permission<'a>(
        &'a self,
        author: &'a Authorship,
        needed: &'a [AuthorNeed],
    ) -> BoxFuture<'a, Result<AuthorPermission, kube::Error>> {
        Box::pin(self.authors.permission(author, needed))
    }

    /// With the recorder, except about a cluster-scoped object: the recorder puts that in
    /// `default`, which kube-apiserver before 1.22 refuses for events.k8s.io Events
    /// ([`crate::attempts::create`] falls back to `kube-system` there).
    fn publish<'a>(
        &'a self,
        event: &'a Event,
        reference: &'a k8s_openapi::api::core::v1::ObjectReference,
    ) -> BoxFuture<'a, Result<(), kube::Error>> {
        Box::pin(async move {
            if reference
                .namespace
                .as_deref()
                .is_some_and(|ns| !ns.is_empty())
            {
                return self.recorder.publish(event, reference).await;
            }
            let instance = std::env::var("HOSTNAME")
                .ok()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "helm-locker".into());
            let type_ = match event.type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            };
            let event = crate::attempts::event_about(
                reference,
                crate::attempts::Note {
                    type_,
                    reason: &event.reason,
                    action: &event.action,
                    note: event.note.clone().unwrap_or_default(),
                },
                ("helm-locker", &instance),
                k8s_openapi::jiff::Timestamp::now(),
            );
            crate::attempts::create(&self.client, event).await
        })
    }
}
