//! The objects Helm keeps a release's revisions in, as a watch and a read see them: a Secret
//! (Helm's default driver) or a ConfigMap (its ConfigMap driver), and what names each one.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::ListParams;
use kube::{Resource, ResourceExt};

use crate::core::{ReleaseDriver, SecretRef};

/// An object Helm keeps a release revision in, as its driver stores it: a Secret (Helm's
/// default) or a ConfigMap (`HELM_DRIVER=configmap`, k3s's helm-controller with
/// `spec.driver: configmap`). Both hold Helm's layer of the release in `data.release`.
pub(crate) trait ReleaseObject:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    const DRIVER: ReleaseDriver;
    /// What a list or watch selects beyond the labels: a Secret's type (a ConfigMap has none).
    const FIELDS: Option<&'static str>;

    /// Helm's layer of `data.release`: a Secret's after its own base64 (the client undid it),
    /// a ConfigMap's as it is.
    fn payload(&self) -> Option<&[u8]>;
}

impl ReleaseObject for Secret {
    const DRIVER: ReleaseDriver = ReleaseDriver::Secret;
    const FIELDS: Option<&'static str> = Some("type=helm.sh/release.v1");

    fn payload(&self) -> Option<&[u8]> {
        Some(self.data.as_ref()?.get("release")?.0.as_slice())
    }
}

impl ReleaseObject for ConfigMap {
    const DRIVER: ReleaseDriver = ReleaseDriver::ConfigMap;
    const FIELDS: Option<&'static str> = None;

    fn payload(&self) -> Option<&[u8]> {
        Some(self.data.as_ref()?.get("release")?.as_bytes())
    }
}

/// The list parameters of `K`'s release objects, with `labels`.
pub(crate) fn list_params<K: ReleaseObject>(labels: &str) -> ListParams {
    let params = ListParams::default().labels(labels);
    match K::FIELDS {
        Some(fields) => params.fields(fields),
        None => params,
    }
}

/// The resourceVersion `secret` was read at.
pub(crate) fn resource_version<K: ReleaseObject>(secret: &K) -> Option<String> {
    secret.meta().resource_version.clone()
}

/// What names `secret` in the index.
pub(crate) fn secret_ref<K: ReleaseObject>(secret: &K) -> SecretRef {
    SecretRef {
        namespace: secret.namespace().unwrap_or_default(),
        name: secret.name_any(),
        driver: K::DRIVER,
    }
}
