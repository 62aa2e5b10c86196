//! Deleted objects: created again as Helm would, or reported once as missing.

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType};
use serde_json::Value;

use crate::core::index::{LockedObject, ReleaseState};
use crate::core::revert_plan::HelmWriter;

use super::attempt::Failure;
use super::key::ObjectKey;
use super::Reverter;

impl Reverter {
    /// Creates a deleted object again: by server-side apply when Helm applies, else by a create.
    pub(super) async fn recreate(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        writer: &HelmWriter,
        desired: Value,
    ) -> Result<DynamicObject, Failure> {
        Ok(match writer {
            HelmWriter::Apply(manager) => {
                api.patch(
                    name,
                    &PatchParams::apply(manager).force(),
                    &Patch::Apply(&desired),
                )
                .await?
            }
            HelmWriter::Update(manager) => {
                let body: DynamicObject = serde_json::from_value(desired)?;
                let params = PostParams {
                    field_manager: Some(manager.clone()),
                    ..PostParams::default()
                };
                api.create(&params, &body).await?
            }
        })
    }

    /// A deleted object the reverter will not create: reported once (while it stays missing) as
    /// a Warning Event on the release's newest Secret, and counted.
    pub(super) async fn report_missing(
        &self,
        state: &ReleaseState,
        object: &LockedObject,
        why: &str,
    ) {
        let key = ObjectKey::of(object);
        {
            let mut proofs = self.proofs();
            let new = proofs.missing.insert(key);
            self.metrics
                .missing_objects
                .set(proofs.missing.len() as i64);
            if !new {
                return;
            }
        }
        tracing::warn!(object = %object.describe(), release = %object.release, why, "locked object is missing; left to helm upgrade");
        let Some(secret) = state.newest().map(|r| r.secret.clone()) else {
            return;
        };
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Secret".into()),
            namespace: Some(secret.namespace),
            name: Some(secret.name),
            ..Default::default()
        };
        let event = Event {
            type_: EventType::Warning,
            reason: "LockedObjectMissing".into(),
            note: Some(format!(
                "{} of release {} does not exist; helm-locker does not create it ({why}). Run helm upgrade to create it.",
                object.describe(),
                object.release
            )),
            action: "Report".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            tracing::debug!(error = %e, "could not record the LockedObjectMissing event");
        }
    }
}
