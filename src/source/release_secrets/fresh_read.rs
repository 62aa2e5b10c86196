//! Rule 7's fresh read: a release's revisions as the API server stores them now, in every kind
//! read, and what they say its newest revision is.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use kube::{Api, Client};

use super::decode::{decode, read_author};
use crate::confirm::{BoxFuture, Confirm, ConfirmError, StoredObject};
use crate::core::{
    release_secret_from_parts, Authorship, ReleaseDriver, ReleaseKey, ReleaseSecret, SecretRef,
    Stamping, Status,
};
use crate::metrics::Metrics;
use crate::source::author_key::StampingRx;
use crate::source::release_object::{list_stored, HoldsRevision, StoredRevision};
use crate::source::storage_gate::StorageGate;

const LABELS: &str = "owner=helm";

/// A release's revisions as the API server stores them now, in each kind read (the drivers
/// on): a release may be kept by any driver, so every one is read and each counts.
#[derive(Default)]
pub(crate) struct StoredRevisions(pub(crate) Vec<StoredRevision>);

impl StoredRevisions {
    /// The revisions of release `name` stored in `namespace`, in each of `drivers` (the kinds
    /// are listed together: a fresh read before a denial takes one round trip, not one per
    /// kind). The label selector only narrows what is read; every payload read is decoded.
    pub(crate) async fn read(
        client: &Client,
        namespace: &str,
        name: &str,
        drivers: &[ReleaseDriver],
    ) -> Result<StoredRevisions, kube::Error> {
        let labels = format!("{LABELS},name={name}");
        let read = futures::future::try_join_all(
            drivers
                .iter()
                .map(|&driver| list_stored(client, driver, Some(namespace), &labels)),
        )
        .await?;
        Ok(StoredRevisions(read.into_iter().flatten().collect()))
    }

    /// Every revision that decodes, of every kind.
    pub(super) fn decoded(&self, stamping: &Stamping, metrics: &Metrics) -> Vec<ReleaseSecret> {
        self.0
            .iter()
            .filter_map(|s| decode(s, stamping, metrics))
            .collect()
    }

    /// Whether more than one driver keeps revisions of it.
    fn kept_by_several_drivers(&self) -> bool {
        let drivers: HashSet<ReleaseDriver> = self.0.iter().map(|s| s.place.driver).collect();
        drivers.len() > 1
    }

    /// The stored object at `place`.
    pub(super) fn at(&self, place: &SecretRef) -> Option<&StoredRevision> {
        self.0.iter().find(|s| s.place == *place)
    }
}

/// Rule 7 against the API server: the newest revision and its status as the release Secrets'
/// payloads say ([`crate::core::newest_revision`]); their labels are the writer's word and are
/// not read. A Secret whose payload does not decode counts for nothing. With the ConfigMap
/// driver on, the release's ConfigMaps are read too and count as its Secrets do: whoever may
/// write a release's ConfigMaps may open it with a pending revision, as whoever may write its
/// Secrets may.
pub(crate) struct KubeConfirm {
    pub client: Client,
    /// The author key, to tell who wrote each revision of a release stored in another
    /// namespace.
    pub stamping: StampingRx,
    pub gate: Arc<StorageGate>,
    /// The kinds a release's revisions are read from (`--release-drivers`).
    pub drivers: Vec<ReleaseDriver>,
}

impl KubeConfirm {
    /// The payloads of `secrets` that may speak for `release`: all of them for a release stored
    /// in its own namespace; for one stored elsewhere, only those whose author passes the
    /// storage gate, as the watch admits them (a tenant who may write Secrets in the storage
    /// namespace cannot open the release with a pending revision of her own).
    async fn admitted<'s>(
        &self,
        release: &ReleaseKey,
        secrets: &'s [StoredRevision],
    ) -> Vec<(SecretRef, &'s [u8])> {
        let payloads = secrets
            .iter()
            .filter_map(|s| Some((s, s.place.clone(), s.helm_layer()?)));
        if release.stored_in.is_none() {
            return payloads.map(|(_, r, p)| (r, p)).collect();
        }
        let stamping = self.stamping.borrow().clone();
        let mut admitted = Vec::new();
        for (secret, reference, payload) in payloads {
            let Ok(mut decoded) =
                release_secret_from_parts(reference.clone(), BTreeMap::new(), payload)
            else {
                continue;
            };
            if let Some(stamping) = &stamping {
                read_author(secret, &mut decoded, stamping, payload);
            }
            if decoded.key() == *release && self.gate.admit(&decoded).await.is_ok() {
                admitted.push((reference, payload));
            }
        }
        admitted
    }
}

impl KubeConfirm {
    /// The revisions of `release` in `read` that count by the driver rule
    /// ([`crate::core::counts_beside_its_release`]): those of the release's driver, and those
    /// of the other whose author may create the release's driver's kind in its namespace.
    async fn beside_its_release(
        &self,
        release: &ReleaseKey,
        read: &StoredRevisions,
    ) -> std::collections::HashSet<SecretRef> {
        fn decoded(
            objects: &[StoredRevision],
            release: &ReleaseKey,
            stamping: Option<&Stamping>,
        ) -> Vec<ReleaseSecret> {
            objects
                .iter()
                .filter_map(|object| {
                    let payload = object.helm_layer()?;
                    let mut decoded =
                        release_secret_from_parts(object.place(), BTreeMap::new(), payload).ok()?;
                    decoded.created = object
                        .meta
                        .creation_timestamp
                        .as_ref()
                        .map(|t| t.0.as_second());
                    if let Some(stamping) = stamping {
                        read_author(object, &mut decoded, stamping, payload);
                    }
                    (decoded.key() == *release).then_some(decoded)
                })
                .collect()
        }
        let stamping = self.stamping.borrow().clone();
        let revisions = decoded(&read.0, release, stamping.as_deref());
        let mut counted = std::collections::HashSet::new();
        let Some(release_driver) = crate::core::release_driver(
            revisions
                .iter()
                .map(|s| (s.secret.driver, s.created, s.release.revision)),
        ) else {
            return counted;
        };
        for mut revision in revisions {
            if self
                .gate
                .admit_beside(&mut revision, release_driver)
                .await
                .is_ok()
            {
                counted.insert(revision.secret);
            }
        }
        counted
    }
}

impl Confirm for KubeConfirm {
    fn newest_revision<'a>(
        &'a self,
        release: &'a ReleaseKey,
    ) -> BoxFuture<'a, Result<Option<(u64, Status)>, ConfirmError>> {
        Box::pin(async move {
            let read = StoredRevisions::read(
                &self.client,
                release.storage_namespace(),
                &release.name,
                &self.drivers,
            )
            .await
            .map_err(|source| ConfirmError::Revisions {
                release: release.clone(),
                source,
            })?;
            let mut payloads = self.admitted(release, &read.0).await;
            if read.kept_by_several_drivers() {
                // Kept by several drivers: one is the release's, and a revision of another
                // counts only as its author's answer says (as the watch admits it).
                let counted = self.beside_its_release(release, &read).await;
                payloads.retain(|(reference, _)| counted.contains(reference));
            }
            Ok(crate::core::newest_revision(release, payloads))
        })
    }

    fn author_may<'a>(
        &'a self,
        author: &'a crate::core::Author,
        access: &'a crate::core::AuthorAccess,
    ) -> BoxFuture<'a, Result<bool, ConfirmError>> {
        Box::pin(async move {
            let authorship = Authorship::Known(Arc::new(author.clone()));
            self.gate
                .author_checks()
                .may(&authorship, access)
                .await
                .map(|answer| answer.unwrap_or(false))
                .map_err(|source| ConfirmError::Authorize {
                    author: author.username.clone(),
                    verb: access.verb.clone(),
                    resource: access.resource.clone(),
                    source,
                })
        })
    }

    fn owner_of<'a>(
        &'a self,
        object: &'a StoredObject,
    ) -> BoxFuture<'a, Result<Option<ReleaseKey>, ConfirmError>> {
        Box::pin(async move {
            let resource = kube::core::ApiResource {
                group: object.group.clone(),
                version: object.version.clone(),
                api_version: crate::core::api_version(&object.group, &object.version),
                kind: String::new(),
                plural: object.resource.clone(),
            };
            let api: Api<kube::core::DynamicObject> = match &object.namespace {
                Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
                None => Api::all_with(self.client.clone(), &resource),
            };
            let meta =
                api.get_metadata_opt(&object.name)
                    .await
                    .map_err(|source| ConfirmError::Owner {
                        resource: object.resource.clone(),
                        name: object.name.clone(),
                        source,
                    })?;
            Ok(meta
                .and_then(|m| crate::core::annotated_release_key(m.metadata.annotations.as_ref()?)))
        })
    }
}
