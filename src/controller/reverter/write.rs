//! The writes: the plan carried out (a patch or a forced apply as Helm's field manager, a
//! deleted object created again, ownership handed back), and the Events about them.

use std::time::Instant;

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::Resource;
use serde_json::Value;

use crate::core::{revert_patch, Change, HelmWriter, OwnershipReturn};

use super::attempt::{Attempt, Failure, Outcome};
use super::plan::Plan;
use super::work::Worker;
use super::Reverter;

impl Reverter {
    /// Carries the plan out: the drifted fields put back (`fixed` names them), the object
    /// created again, or ownership handed back to Helm. The object as written, the outcome and
    /// the note of the `Reverted` Event.
    pub(super) async fn write_plan(
        &self,
        attempt: &Attempt<'_>,
        plan: &Plan,
        desired: Value,
        fixed: &str,
    ) -> Result<(DynamicObject, Outcome, String), Failure> {
        let (object, writer, revision) = (&attempt.object, &attempt.writer, attempt.revision);
        Ok(match (plan, &attempt.live) {
            (Plan::Revert(changes), Some(live)) => {
                let written = self.write(attempt, &desired, changes, live, false).await?;
                tracing::info!(object = %object.describe(), release = %object.release, revision, paths = %fixed, manager = writer.manager(), "drift reverted");
                let note = format!("helm-locker put back {fixed} to the values of release {} revision {revision}, as field manager {}", object.release, writer.manager());
                (written, Outcome::Reverted, note)
            }
            (Plan::Revert(_), None) => {
                let written = self.recreate(attempt, desired).await?;
                tracing::info!(object = %object.describe(), release = %object.release, revision, manager = writer.manager(), "deleted object recreated");
                let note = format!(
                    "helm-locker recreated this object from release {} revision {revision}",
                    object.release
                );
                (written, Outcome::Recreated, note)
            }
            (Plan::ReturnOwnership(back), _) => {
                let written = self.return_ownership(attempt, back).await?;
                let note = format!("helm-locker handed back to Helm's field manager {} what another manager co-owned with the values of release {} revision {revision}: {}", writer.manager(), object.release, back.describe());
                (written, Outcome::OwnershipReturned, note)
            }
        })
    }

    /// Puts the chart's values back on a live object as Helm's field manager would: a forced
    /// server-side apply, or a JSON patch guarded by the resource version. `dry_run`: the API
    /// server answers what it would store, and stores nothing.
    pub(super) async fn write(
        &self,
        attempt: &Attempt<'_>,
        desired: &Value,
        changes: &[Change],
        live: &Value,
        dry_run: bool,
    ) -> Result<DynamicObject, Failure> {
        let (api, name, writer) = (&attempt.api, attempt.key().name.as_str(), &attempt.writer);
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
                api.patch(name, &params, &Patch::<()>::Json(revert_patch(changes, rv)))
                    .await
            }
        }
        .map_err(|e| Failure::of(e, guarded))
    }

    /// Writes the object's `managedFields` with the fields another manager co-owned handed back
    /// to Helm ([`crate::core::ownership_return`]), if the object is still the one read.
    pub(super) async fn return_ownership(
        &self,
        attempt: &Attempt<'_>,
        back: &OwnershipReturn,
    ) -> Result<DynamicObject, Failure> {
        let (object, writer, revision) = (&attempt.object, &attempt.writer, attempt.revision);
        let rv = attempt
            .live
            .as_ref()
            .and_then(|l| l.pointer("/metadata/resourceVersion"))
            .and_then(Value::as_str);
        let written = attempt
            .api
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

    /// After a write: the drift a dry run showed unstored is forgotten, the revert counts
    /// toward a fight ([`crate::core::Fights`]), and a Normal Event `Reverted` goes on the object.
    pub(super) async fn written(
        &self,
        worker: &mut Worker,
        attempt: &Attempt<'_>,
        fought: &str,
        written: &DynamicObject,
        note: String,
    ) {
        let key = attempt.key();
        worker.not_stored.remove(key);
        self.fights()
            .reverted(key, attempt.revision, fought, Instant::now());
        let event = Event {
            type_: EventType::Normal,
            reason: "Reverted".into(),
            note: Some(note),
            action: "Revert".into(),
            secondary: None,
        };
        if let Err(e) = self.publish(&event, &written.object_ref(&attempt.ar)).await {
            tracing::debug!(error = %e, "could not record the Reverted event");
        }
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
