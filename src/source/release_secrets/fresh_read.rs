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
use crate::source::release_object::{list_stored, read_listed, HoldsRevision, StoredRevision};
use crate::source::storage_gate::StorageGate;

const LABELS: &str = "owner=helm";

/// How many revisions past the one the index holds a fresh read looks for by name before it
/// lists the release instead: Helm writes one at a time, each the one above the newest.
const READ_PAST_KNOWN: u64 = 8;

/// The name Helm gives revision `revision` of release `release`, in either kind.
fn helm_object_name(release: &str, revision: u64) -> String {
    format!("sh.helm.release.v1.{release}.v{revision}")
}

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

    /// The revisions of release `name` in `namespace` from `known` (the newest the index holds)
    /// up, read by the names Helm gives them in each of `drivers`: `known` and the one above it
    /// at once, then each next one found. A few GETs, where a list by label has the API server
    /// filter the whole namespace (a denial waited 415 ms at 50,000 releases in one namespace).
    /// `None` when that may not be the whole answer and the release is to be listed: revision
    /// `known` is in no kind by that name (deleted, or never named so), revisions are kept in
    /// several kinds (the driver rule reads every revision), or more than [`READ_PAST_KNOWN`]
    /// are above it.
    pub(crate) async fn read_from(
        client: &Client,
        namespace: &str,
        name: &str,
        drivers: &[ReleaseDriver],
        known: u64,
    ) -> Result<Option<StoredRevisions>, kube::Error> {
        Self::read_from_with(namespace, name, drivers, known, |place| async move {
            read_listed(client, &place, name).await
        })
        .await
    }

    /// [`read_from`](Self::read_from) with `get` reading the object at a place.
    async fn read_from_with<E, F, Fut>(
        namespace: &str,
        name: &str,
        drivers: &[ReleaseDriver],
        known: u64,
        get: F,
    ) -> Result<Option<StoredRevisions>, E>
    where
        F: Fn(SecretRef) -> Fut,
        Fut: std::future::Future<Output = Result<Option<StoredRevision>, E>>,
    {
        let at = |revision: u64| {
            futures::future::try_join_all(drivers.iter().map(|&driver| {
                get(SecretRef {
                    namespace: namespace.to_string(),
                    name: helm_object_name(name, revision),
                    driver,
                })
            }))
        };
        let (held, mut above) = futures::future::try_join(at(known), at(known + 1)).await?;
        if held.iter().all(Option::is_none) {
            return Ok(None);
        }
        let mut found: Vec<StoredRevision> = held.into_iter().flatten().collect();
        let mut revision = known + 1;
        while above.iter().any(Option::is_some) {
            if revision > known + READ_PAST_KNOWN {
                return Ok(None);
            }
            found.extend(above.into_iter().flatten());
            revision += 1;
            above = at(revision).await?;
        }
        let read = StoredRevisions(found);
        Ok((!read.kept_by_several_drivers()).then_some(read))
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
        known: Option<u64>,
    ) -> BoxFuture<'a, Result<Option<(u64, Status)>, ConfirmError>> {
        Box::pin(async move {
            let (namespace, name) = (release.storage_namespace(), release.name.as_str());
            let by_name = match known {
                Some(known) => {
                    StoredRevisions::read_from(&self.client, namespace, name, &self.drivers, known)
                        .await
                }
                None => Ok(None),
            };
            let read = match by_name {
                Ok(Some(read)) => Ok(read),
                Ok(None) => {
                    StoredRevisions::read(&self.client, namespace, name, &self.drivers).await
                }
                Err(e) => Err(e),
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Stored objects by place: what `read_from_with` reads, and the places it asked for.
    struct Stored {
        objects: Vec<SecretRef>,
        asked: std::sync::Mutex<Vec<String>>,
    }

    impl Stored {
        fn of(places: &[(&str, ReleaseDriver)]) -> Stored {
            Stored {
                objects: places
                    .iter()
                    .map(|&(name, driver)| SecretRef {
                        namespace: "team".into(),
                        name: name.into(),
                        driver,
                    })
                    .collect(),
                asked: Default::default(),
            }
        }

        async fn read(&self, known: u64, drivers: &[ReleaseDriver]) -> Option<Vec<String>> {
            let read = StoredRevisions::read_from_with("team", "shop", drivers, known, |place| {
                self.asked.lock().unwrap().push(place.name.clone());
                let found =
                    self.objects
                        .iter()
                        .find(|o| **o == place)
                        .map(|place| StoredRevision {
                            place: place.clone(),
                            meta: Default::default(),
                            payload: None,
                            reference: Default::default(),
                        });
                async move { Ok::<_, ()>(found) }
            })
            .await
            .unwrap()?;
            Some(read.0.into_iter().map(|s| s.place.name).collect())
        }
    }

    const SECRET: ReleaseDriver = ReleaseDriver::Secret;
    const CONFIG_MAP: ReleaseDriver = ReleaseDriver::ConfigMap;

    #[tokio::test]
    async fn the_revision_held_and_those_helm_wrote_above_it_are_read_by_name() {
        let stored = Stored::of(&[
            ("sh.helm.release.v1.shop.v1", SECRET),
            ("sh.helm.release.v1.shop.v2", SECRET),
            ("sh.helm.release.v1.shop.v3", SECRET),
            ("sh.helm.release.v1.shop.v4", SECRET),
        ]);
        // The index holds 2; Helm has written 3 and 4 since.
        assert_eq!(
            stored.read(2, &[SECRET, CONFIG_MAP]).await,
            Some(vec![
                "sh.helm.release.v1.shop.v2".to_string(),
                "sh.helm.release.v1.shop.v3".into(),
                "sh.helm.release.v1.shop.v4".into(),
            ])
        );
        // Nothing older than what the index holds, nothing past the first revision missing.
        let asked = stored.asked.lock().unwrap().clone();
        assert!(!asked.iter().any(|n| n.ends_with(".v1")), "{asked:?}");
        assert!(!asked.iter().any(|n| n.ends_with(".v6")), "{asked:?}");
    }

    #[tokio::test]
    async fn the_release_is_listed_when_reading_by_name_may_not_be_the_whole_answer() {
        // The revision held is gone (deleted, or never named as Helm names it).
        let gone = Stored::of(&[("sh.helm.release.v1.shop.v3", SECRET)]);
        assert_eq!(gone.read(2, &[SECRET]).await, None);
        // Revisions in two kinds: the driver rule reads every revision.
        let two_kinds = Stored::of(&[
            ("sh.helm.release.v1.shop.v2", SECRET),
            ("sh.helm.release.v1.shop.v3", CONFIG_MAP),
        ]);
        assert_eq!(two_kinds.read(2, &[SECRET, CONFIG_MAP]).await, None);
        // The same kept by the one kind read is read by name.
        assert_eq!(
            two_kinds.read(2, &[SECRET]).await,
            Some(vec!["sh.helm.release.v1.shop.v2".to_string()])
        );
        // More above it than Helm writes at once.
        let names: Vec<String> = (2..=2 + READ_PAST_KNOWN + 1)
            .map(|r| helm_object_name("shop", r))
            .collect();
        let many = Stored::of(
            &names
                .iter()
                .map(|n| (n.as_str(), SECRET))
                .collect::<Vec<_>>(),
        );
        assert_eq!(many.read(2, &[SECRET]).await, None);
        let names: Vec<String> = (2..=2 + READ_PAST_KNOWN)
            .map(|r| helm_object_name("shop", r))
            .collect();
        let at_most = Stored::of(
            &names
                .iter()
                .map(|n| (n.as_str(), SECRET))
                .collect::<Vec<_>>(),
        );
        assert_eq!(
            at_most.read(2, &[SECRET]).await.map(|r| r.len()),
            Some(names.len())
        );
    }
}
