//! The writes: a patch or a forced apply as Helm's field manager, ownership handed back, and the
//! Events about them.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use serde_json::Value;

use crate::core::index::LockedObject;
use crate::core::ownership::Change;
use crate::core::revert_plan::{self, HelmWriter};

use super::attempt::Failure;
use super::Reverter;

impl Reverter {
    /// Puts the chart's values back on a live object as Helm's field manager would: a forced
    /// server-side apply, or a JSON patch guarded by the resource version. `dry_run`: the API
    /// server answers what it would store, and stores nothing.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn write(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        writer: &HelmWriter,
        desired: &Value,
        changes: &[Change],
        live: &Value,
        dry_run: bool,
    ) -> Result<DynamicObject, Failure> {
        let guarded = match writer {
            HelmWriter::Apply(_) => None,
            HelmWriter::Update(_) => live
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str),
        };
        match writer {
            HelmWriter::Apply(manager) => {
                let params = PatchParams {
                    dry_run,
                    ..PatchParams::apply(manager).force()
                };
                api.patch(name, &params, &Patch::Apply(desired)).await
            }
            HelmWriter::Update(manager) => {
                let rv = live
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str);
                let params = PatchParams {
                    field_manager: Some(manager.clone()),
                    dry_run,
                    ..PatchParams::default()
                };
                api.patch(
                    name,
                    &params,
                    &Patch::<()>::Json(revert_plan::revert_patch(changes, rv)),
                )
                .await
            }
        }
        .map_err(|e| Failure::of(e, guarded))
    }

    /// Writes the object's `managedFields` with the fields another manager co-owned handed back
    /// to Helm ([`revert_plan::ownership_return`]), if the object is still the one read.
    pub(super) async fn return_ownership(
        &self,
        api: &Api<DynamicObject>,
        object: &LockedObject,
        back: &revert_plan::OwnershipReturn,
        live: Option<&Value>,
        writer: &HelmWriter,
        revision: u64,
    ) -> Result<DynamicObject, Failure> {
        let rv = live
            .and_then(|l| l.pointer("/metadata/resourceVersion"))
            .and_then(Value::as_str);
        let written = api
            .patch(
                &object.name,
                &PatchParams::default(),
                &Patch::<()>::Json(back.patch(rv)),
            )
            .await
            .map_err(|e| Failure::of(e, rv))?;
        tracing::info!(object = %object.describe(), release = %object.release, revision, manager = writer.manager(), taken = %back.describe(), "fields another manager co-owned handed back to Helm");
        Ok(written)
    }

    /// Publishes an Event with the recorder, except about a cluster-scoped object: the recorder
    /// puts that in `default`, which kube-apiserver before 1.22 refuses for events.k8s.io
    /// Events ([`crate::attempts::create`] falls back to `kube-system` there).
    pub(super) async fn publish(
        &self,
        event: &Event,
        reference: &k8s_openapi::api::core::v1::ObjectReference,
    ) -> Result<(), kube::Error> {
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
    }
}
