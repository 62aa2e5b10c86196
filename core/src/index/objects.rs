//! What a release's manifest locks, ready for the index: its objects parsed, each a
//! [`LockedObject`] of its release, before the index holds them.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{ReleaseKey, Revision};
use crate::interning::Interner;
use crate::kinds::{same_group, scope_of, Scope};
use crate::locked::LockedObject;
use crate::manifest::{scan_manifest, ScannedObject, SkippedDocument};
use crate::object_content::{ObjectContent, ReleaseContents};
use crate::release::{Release, ReleaseSecret, SecretRef};

/// When the earliest of `revisions` was created (`i64::MAX` when none says): a release's place
/// in the order its storage namespace's releases are kept in.
pub(super) fn first_created(revisions: &BTreeMap<u64, Box<Revision>>) -> i64 {
    revisions
        .values()
        .filter_map(|r| r.created)
        .min()
        .unwrap_or(i64::MAX)
}

pub(super) fn revision_of(
    release: &Release,
    secret: SecretRef,
    labels: BTreeMap<String, String>,
    author: crate::author::Authorship,
    created: Option<i64>,
) -> Revision {
    Revision {
        revision: release.revision,
        author,
        status: release.status,
        description: release.description.clone(),
        notes: release.notes.clone(),
        chart: release.chart.clone(),
        apply_method: release.apply_method.clone(),
        secret,
        labels,
        created,
    }
}

pub(super) fn locked_object(
    object: ScannedObject,
    held: ObjectContent,
    release: &Arc<ReleaseKey>,
    strings: &mut Interner,
) -> LockedObject {
    let namespace = match scope_of(&object.group, &object.kind) {
        Scope::Cluster => None,
        Scope::Namespaced | Scope::Unknown => {
            Some(strings.intern(object.namespace.as_deref().unwrap_or(&release.namespace)))
        }
    };
    LockedObject {
        group: strings.intern(&object.group),
        version: strings.intern(&object.version),
        kind: strings.intern(&object.kind),
        namespace,
        name: object.name.into_boxed_str(),
        held,
        release: release.clone(),
        scaled_by: None,
    }
}

/// Marks each object that a HorizontalPodAutoscaler of the same release targets
/// (`spec.scaleTargetRef`: apiVersion's group, kind and name, in the autoscaler's namespace):
/// the autoscaler owns its `spec.replicas` by design (docs/reliability.md, "The reverter never
/// fights a controller").
pub(super) fn mark_scaled(objects: &mut [LockedObject]) {
    let targets: Vec<(
        String,
        String,
        String,
        Option<crate::interning::SharedStr>,
        crate::interning::SharedStr,
    )> = objects
        .iter()
        .filter(|o| {
            o.kind.as_ref() == "HorizontalPodAutoscaler" && o.group.as_ref() == "autoscaling"
        })
        .filter_map(|hpa| {
            let content = hpa.content().to_json();
            let target = content.pointer("/spec/scaleTargetRef")?;
            let api_version = target
                .get("apiVersion")
                .and_then(|v| v.as_str())
                .unwrap_or("v1");
            let group = api_version
                .rsplit_once('/')
                .map_or("", |(g, _)| g)
                .to_string();
            Some((
                group,
                target.get("kind")?.as_str()?.to_string(),
                target.get("name")?.as_str()?.to_string(),
                hpa.namespace.clone(),
                hpa.name.as_ref().into(),
            ))
        })
        .collect();
    for (group, kind, name, namespace, hpa) in targets {
        for object in objects.iter_mut() {
            if *object.name == *name
                && object.kind.as_ref() == kind
                && same_group(&object.group, &group, &kind)
                && object.namespace == namespace
            {
                object.scaled_by = Some(hpa.clone());
            }
        }
    }
}

/// A release Secret whose manifest is parsed into what it locks ([`Index::prepare`]); its
/// manifest text is gone.
pub struct PreparedSecret {
    pub(super) secret: ReleaseSecret,
    pub(super) objects: Objects,
}

impl PreparedSecret {
    /// The storage namespace of its release.
    pub fn storage_namespace(&self) -> String {
        self.secret.key().storage_namespace().to_string()
    }

    /// How many objects its manifest renders (also once dropped).
    pub fn object_count(&self) -> usize {
        self.objects.dropped.unwrap_or(self.objects.objects.len())
    }

    /// Lets its parsed objects go, as more than its namespace's bound keeps; the index decides
    /// again from the count ([`Index::bound_listing`]).
    pub fn drop_objects(&mut self) {
        if self.objects.dropped.is_none() {
            self.objects = Objects {
                objects: Vec::new(),
                skipped: Vec::new(),
                dropped: Some(self.objects.objects.len()),
            };
        }
    }
}

/// What a release's manifest locks, ready for the index.
#[derive(Default)]
pub(super) struct Objects {
    pub(super) objects: Vec<Arc<LockedObject>>,
    pub(super) skipped: Vec<SkippedDocument>,
    /// The objects were dropped before the index saw them, as more than its namespace's bound
    /// keeps ([`Index::bound_listing`]): how many there were.
    pub(super) dropped: Option<usize>,
}

impl Objects {
    pub(super) fn of(key: &ReleaseKey, manifest: &str, strings: &mut Interner) -> Objects {
        let (mut scanned, skipped) = scan_manifest(manifest);
        let held = scanned
            .iter_mut()
            .map(|o| {
                std::mem::replace(
                    &mut o.held,
                    crate::object_content::Held::Document { start: 0, end: 0 },
                )
            })
            .collect();
        let contents = ReleaseContents::new(manifest, held);
        let key = Arc::new(key.clone());
        let mut objects: Vec<LockedObject> = scanned
            .into_iter()
            .enumerate()
            .map(|(at, o)| locked_object(o, ObjectContent::new(&contents, at), &key, strings))
            .collect();
        mark_scaled(&mut objects);
        // Collected in place, the list would keep the room of the `LockedObject`s it was made
        // from (128 bytes each) for 8-byte pointers: 3.6 kB of nothing per release of 30.
        let mut objects: Vec<Arc<LockedObject>> = objects.into_iter().map(Arc::new).collect();
        objects.shrink_to_fit();
        Objects {
            objects,
            skipped,
            dropped: None,
        }
    }
}
