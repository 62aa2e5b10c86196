//! The objects Helm keeps a release's revisions in, as a watch and a read see them: the
//! Kubernetes type of each driver's kind (what a driver is, its kind, labels, payload and
//! stamp, is said once in core: [`crate::core::ReleaseDriver::spec`]). [`with_kind`] is the one
//! place the shell goes from a driver to its type: a driver added in core without a type here
//! does not compile.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ListParams;
use kube::{Api, Client, Resource, ResourceExt};

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
    /// The name of the supervised task that watches this kind.
    const WATCH_TASK: &'static str;

    /// Helm's layer of `data.release`: a Secret's after its own base64 (the client undid it),
    /// a ConfigMap's as it is.
    fn payload(&self) -> Option<&[u8]>;

    /// Its `type` (a Secret's; a ConfigMap has none).
    fn object_type(&self) -> Option<&str>;
}

impl ReleaseObject for Secret {
    const DRIVER: ReleaseDriver = ReleaseDriver::Secret;
    const WATCH_TASK: &'static str = "a release Secret watch";

    fn payload(&self) -> Option<&[u8]> {
        Some(self.data.as_ref()?.get("release")?.0.as_slice())
    }

    fn object_type(&self) -> Option<&str> {
        self.type_.as_deref()
    }
}

impl ReleaseObject for ConfigMap {
    const DRIVER: ReleaseDriver = ReleaseDriver::ConfigMap;
    const WATCH_TASK: &'static str = "a release ConfigMap watch";

    fn payload(&self) -> Option<&[u8]> {
        Some(self.data.as_ref()?.get("release")?.as_bytes())
    }

    fn object_type(&self) -> Option<&str> {
        None
    }
}

/// Something done with the Kubernetes type of a driver's kind ([`with_kind`]).
pub(crate) trait KindVisitor {
    type Output;
    fn visit<K: ReleaseObject>(self) -> Self::Output;
}

/// `visitor` run with the Kubernetes type of `driver`'s kind.
pub(crate) fn with_kind<V: KindVisitor>(driver: ReleaseDriver, visitor: V) -> V::Output {
    match driver {
        ReleaseDriver::Secret => visitor.visit::<Secret>(),
        ReleaseDriver::ConfigMap => visitor.visit::<ConfigMap>(),
    }
}

/// The list parameters of `K`'s release objects, with `labels`.
pub(crate) fn list_params<K: ReleaseObject>(labels: &str) -> ListParams {
    let params = ListParams::default().labels(labels);
    match K::DRIVER.field_selector() {
        Some(fields) => params.fields(&fields),
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

/// One stored revision as read, whatever its kind: where it is, its metadata and Helm's layer
/// of its `data.release`.
pub(crate) struct StoredRevision {
    pub(crate) place: SecretRef,
    pub(crate) meta: ObjectMeta,
    pub(crate) payload: Option<Vec<u8>>,
    /// What an Event on it names.
    pub(crate) reference: ObjectReference,
}

fn stored<K: ReleaseObject>(found: &K) -> StoredRevision {
    StoredRevision {
        place: secret_ref(found),
        meta: found.meta().clone(),
        payload: found.payload().map(<[u8]>::to_vec),
        reference: found.object_ref(&()),
    }
}

/// An object that holds a revision, as it is decoded and warned on: a watched object of its
/// kind's type, or a [`StoredRevision`] read with every kind's.
pub(crate) trait HoldsRevision {
    /// Where it is.
    fn place(&self) -> SecretRef;
    fn metadata(&self) -> &ObjectMeta;
    /// Helm's layer of its `data.release`.
    fn helm_layer(&self) -> Option<&[u8]>;
    /// What an Event on it names.
    fn reference(&self) -> ObjectReference;
}

impl<K: ReleaseObject> HoldsRevision for K {
    fn place(&self) -> SecretRef {
        secret_ref(self)
    }
    fn metadata(&self) -> &ObjectMeta {
        self.meta()
    }
    fn helm_layer(&self) -> Option<&[u8]> {
        self.payload()
    }
    fn reference(&self) -> ObjectReference {
        self.object_ref(&())
    }
}

impl HoldsRevision for StoredRevision {
    fn place(&self) -> SecretRef {
        self.place.clone()
    }
    fn metadata(&self) -> &ObjectMeta {
        &self.meta
    }
    fn helm_layer(&self) -> Option<&[u8]> {
        self.payload.as_deref()
    }
    fn reference(&self) -> ObjectReference {
        self.reference.clone()
    }
}

/// Lists `driver`'s release objects labelled `labels` in `namespace` (all when `None`).
pub(crate) async fn list_stored(
    client: &Client,
    driver: ReleaseDriver,
    namespace: Option<&str>,
    labels: &str,
) -> Result<Vec<StoredRevision>, kube::Error> {
    struct List<'a>(&'a Client, Option<&'a str>, &'a str);
    impl<'a> KindVisitor for List<'a> {
        type Output = BoxFuture<'a, Result<Vec<StoredRevision>, kube::Error>>;
        fn visit<K: ReleaseObject>(self) -> Self::Output {
            let List(client, namespace, labels) = self;
            Box::pin(async move {
                let api: Api<K> = match namespace {
                    Some(ns) => Api::namespaced(client.clone(), ns),
                    None => Api::all(client.clone()),
                };
                let list = api.list(&list_params::<K>(labels)).await?;
                Ok(list.items.iter().map(stored).collect())
            })
        }
    }
    with_kind(driver, List(client, namespace, labels)).await
}

/// Reads the object `secret` names, of its driver's kind, when it is one that a list of
/// release `release`'s objects finds (labels `owner=helm,name=<release>`, and for a Secret its
/// type, as [`list_params`] select them); `None` when there is none, or it is not.
pub(crate) async fn read_listed(
    client: &Client,
    secret: &SecretRef,
    release: &str,
) -> Result<Option<StoredRevision>, kube::Error> {
    struct Read<'a>(&'a Client, &'a SecretRef, &'a str);
    impl<'a> KindVisitor for Read<'a> {
        type Output = BoxFuture<'a, Result<Option<StoredRevision>, kube::Error>>;
        fn visit<K: ReleaseObject>(self) -> Self::Output {
            let Read(client, secret, release) = self;
            Box::pin(async move {
                let api: Api<K> = Api::namespaced(client.clone(), &secret.namespace);
                let Some(found) = api.get_opt(&secret.name).await? else {
                    return Ok(None);
                };
                let labels = found.labels();
                let label = |key: &str| labels.get(key).map(String::as_str);
                let listed = label("owner") == Some("helm")
                    && label("name") == Some(release)
                    && K::DRIVER.field_selector().is_none_or(|_| {
                        K::DRIVER.stamps_as_revision(found.object_type(), Some("helm"), true)
                    });
                Ok(listed.then(|| stored(&found)))
            })
        }
    }
    with_kind(secret.driver, Read(client, secret, release)).await
}

/// Reads the object `secret` names, of its driver's kind; `None` when there is none.
pub(crate) async fn read_stored(
    client: &Client,
    secret: &SecretRef,
) -> Result<Option<StoredRevision>, kube::Error> {
    struct Read<'a>(&'a Client, &'a SecretRef);
    impl<'a> KindVisitor for Read<'a> {
        type Output = BoxFuture<'a, Result<Option<StoredRevision>, kube::Error>>;
        fn visit<K: ReleaseObject>(self) -> Self::Output {
            let Read(client, secret) = self;
            Box::pin(async move {
                let api: Api<K> = Api::namespaced(client.clone(), &secret.namespace);
                Ok(api.get_opt(&secret.name).await?.map(|found| stored(&found)))
            })
        }
    }
    with_kind(secret.driver, Read(client, secret)).await
}

/// Merge-patches the object `secret` names, of its driver's kind, as `field_manager`: its
/// annotations as written, `None` when the API server refuses the write as a conflict (the
/// patch's resourceVersion is no longer the object's).
pub(crate) async fn merge_patch_stored(
    client: &Client,
    secret: &SecretRef,
    field_manager: &str,
    patch: &serde_json::Value,
) -> Result<Option<std::collections::BTreeMap<String, String>>, kube::Error> {
    struct Patch<'a>(&'a Client, &'a SecretRef, &'a str, &'a serde_json::Value);
    impl<'a> KindVisitor for Patch<'a> {
        type Output =
            BoxFuture<'a, Result<Option<std::collections::BTreeMap<String, String>>, kube::Error>>;
        fn visit<K: ReleaseObject>(self) -> Self::Output {
            let Patch(client, secret, field_manager, patch) = self;
            Box::pin(async move {
                let api: Api<K> = Api::namespaced(client.clone(), &secret.namespace);
                let params = kube::api::PatchParams {
                    field_manager: Some(field_manager.into()),
                    ..Default::default()
                };
                match api
                    .patch(&secret.name, &params, &kube::api::Patch::Merge(patch))
                    .await
                {
                    Ok(written) => Ok(Some(written.annotations().clone())),
                    Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
                    Err(e) => Err(e),
                }
            })
        }
    }
    with_kind(secret.driver, Patch(client, secret, field_manager, patch)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every driver core knows has a Kubernetes type here, of its kind and resource.
    #[test]
    fn every_driver_has_a_type_of_its_kind_and_resource() {
        struct Names;
        impl KindVisitor for Names {
            type Output = (ReleaseDriver, String, String, &'static str);
            fn visit<K: ReleaseObject>(self) -> Self::Output {
                let (kind, plural) = (K::kind(&()), K::plural(&()));
                (
                    K::DRIVER,
                    kind.into_owned(),
                    plural.into_owned(),
                    K::WATCH_TASK,
                )
            }
        }
        for &driver in ReleaseDriver::ALL {
            let (named, kind, plural, task) = with_kind(driver, Names);
            assert_eq!(named, driver);
            assert_eq!(kind, driver.kind());
            assert_eq!(plural, driver.resource());
            assert!(task.contains(driver.kind()), "{task}");
        }
    }

    #[test]
    fn a_secret_list_selects_helms_type_and_a_config_map_list_only_its_labels() {
        let secrets = list_params::<Secret>("owner=helm");
        assert_eq!(
            secrets.field_selector.as_deref(),
            Some("type=helm.sh/release.v1")
        );
        let config_maps = list_params::<ConfigMap>("owner=helm");
        assert_eq!(config_maps.field_selector, None);
        assert_eq!(config_maps.label_selector.as_deref(), Some("owner=helm"));
    }
}
