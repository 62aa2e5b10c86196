//! What a decision reads of a write beyond its head: the objects as far as they differ, the
//! proof that the stored object is the release's, and what managedFields and ownerReferences
//! a write adds.

use std::borrow::Cow;

use serde_json::Value;

use crate::index::ReleaseKey;
use crate::release::describe_json_error;
use crate::review::Request;
use crate::schema::Schema;

use super::find::annotated_release;
use super::DecideError;

/// What a write asks for: the new object and the stored one. An UPDATE is read as what it
/// changes: the parts object and oldObject share are left out of both (crate::prune). A Scale
/// is small and compared at one path: read whole.
pub(super) fn written(
    request: &Request<'_>,
    scale: bool,
) -> Result<(Value, Option<Value>), DecideError> {
    Ok(match (request.object(), request.old_object()) {
        (Some(new), Some(old)) if !scale => {
            let (new, old) = crate::prune::changed_parts(new.get(), old.get()).map_err(|e| {
                DecideError::BadObject {
                    field: "object",
                    reason: describe_json_error(&e),
                }
            })?;
            (new, Some(old))
        }
        (new, old) => (
            parse_object(new, "object")?.unwrap_or(Value::Null),
            parse_object(old, "oldObject")?,
        ),
    })
}

pub(super) fn parse_object(
    raw: Option<crate::review::RawObject<'_>>,
    field: &'static str,
) -> Result<Option<Value>, DecideError> {
    raw.map(|raw| serde_json::from_str(raw.get()))
        .transpose()
        .map_err(|e| DecideError::BadObject {
            field,
            reason: describe_json_error(&e),
        })
}

/// Fields Helm owns that a server-side apply by `manager` would make it co-own. Read from the
/// request's managedFields without building their values, and only as far as needed: most
/// applies are Helm's own (its entry owns the release annotation).
pub(super) fn co_owner_claims(
    schema: &Schema,
    root: crate::schema::TypeId,
    chart: &crate::tree::Tree,
    helm: (&str, &str),
    manager: &str,
    request: &Request<'_>,
) -> Vec<String> {
    // Helm's entry is an Apply entry that owns the release annotation. Applying the same
    // annotation values shares their ownership, so the applier's own entry may own it too, and
    // come first (entries made in the same second are ordered by manager name): the apply is
    // Helm's own only when no other manager's Apply entry owns it.
    let Some(new) = request
        .object()
        .and_then(|o| crate::prune::managed_fields(o.get()))
    else {
        return Vec::new();
    };
    let owns = |mine: bool| {
        new.applies
            .iter()
            .any(|e| (e.manager == manager) == mine && e.owns_release_annotation())
    };
    if owns(true) && !owns(false) {
        return Vec::new();
    }
    let Some(claimed) = new.applies.iter().find(|e| e.manager == manager) else {
        return Vec::new();
    };
    // kube-apiserver 1.20 hands admission an oldObject that shares the new object's
    // managedFields on a server-side apply (measured: a first apply by kubectl shows its own
    // entry in both), so the old entry counts only when it differs from the new one.
    let before = request
        .old_object()
        .and_then(|o| crate::prune::managed_fields(o.get()))
        .filter(|old| old.raw != new.raw)
        .and_then(|old| {
            old.applies
                .iter()
                .find(|e| e.manager == manager)
                .map(|e| e.field_set())
        })
        .unwrap_or_default();
    crate::fields_v1::co_owned_paths(schema, root, chart, helm, &claimed.field_set(), &before)
}

/// Whether an object's Helm annotations name `release`. Read with the scanner up to
/// `metadata.annotations` (near the start of what the API server sends); serde reads the
/// whole object only when the scanner gives up.
pub(super) fn names_release(
    object: Option<crate::review::RawObject<'_>>,
    release: &ReleaseKey,
) -> bool {
    let Some(object) = object else {
        return false;
    };
    let names = |name: Option<Cow<'_, str>>, namespace: Option<Cow<'_, str>>| {
        name.is_some_and(|n| n == release.name.as_str())
            && namespace.is_some_and(|n| n == release.namespace.as_str())
    };
    match crate::scan::member_at(object.get(), &["metadata", "annotations"]) {
        Some(None) => false,
        Some(Some(annotations)) => {
            // Read as a map of strings is: any value not a string makes it none, and the last
            // of a repeated key counts. Anything the scanner does not take, serde reads.
            let (mut name, mut namespace) = (None, None);
            let read = crate::scan::Scanner::new(annotations).each_entry(|scanner, key| {
                let value = scanner.string_value()?;
                match key.as_ref() {
                    crate::ownership::RELEASE_NAME_ANNOTATION => name = Some(value),
                    crate::ownership::RELEASE_NAMESPACE_ANNOTATION => namespace = Some(value),
                    _ => {}
                }
                Some(crate::scan::Flow::Next)
            });
            match read {
                Some(_) => names(name, namespace),
                None => {
                    serde_json::from_str::<std::collections::HashMap<Cow<'_, str>, Cow<'_, str>>>(
                        annotations,
                    )
                    .is_ok_and(|mut a| {
                        names(
                            a.remove(crate::ownership::RELEASE_NAME_ANNOTATION),
                            a.remove(crate::ownership::RELEASE_NAMESPACE_ANNOTATION),
                        )
                    })
                }
            }
        }
        None => annotated_release(Some(object)).as_ref() == Some(release),
    }
}

/// Owner references in `new` (position and value) that neither `old` nor the chart has, by uid.
pub(super) fn added_owner_references(
    chart: &crate::tree::Tree,
    new: &Value,
    old: Option<&Value>,
) -> Vec<(usize, Value)> {
    let uids = |refs: Option<&Value>| -> Vec<String> {
        refs.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
            .collect()
    };
    let Some(new_refs) = new
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let before = uids(old.and_then(|o| o.pointer("/metadata/ownerReferences")));
    let charted = uids(
        chart
            .pointer("/metadata/ownerReferences")
            .map(|t| t.to_json())
            .as_ref(),
    );
    new_refs
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            let uid = r.get("uid").and_then(Value::as_str).unwrap_or_default();
            !before.iter().any(|u| u == uid) && !charted.iter().any(|u| u == uid)
        })
        .map(|(i, r)| (i, r.clone()))
        .collect()
}

/// The managedFields entries of a created object: `None` when it has none (nothing to check).
/// Only `metadata.managedFields` is parsed; the scanner steps to it (the object is valid
/// JSON: it was parsed before this is asked).
pub(super) fn creation_entries(object: &str) -> Option<Vec<CreationEntry>> {
    let entries = crate::scan::member_at(object, &["metadata", "managedFields"])??;
    serde_json::from_str::<Option<Vec<CreationEntry>>>(entries)
        .ok()?
        .filter(|entries| !entries.is_empty())
}

#[derive(serde::Deserialize)]
pub(super) struct CreationEntry {
    pub(super) manager: Option<String>,
    pub(super) operation: Option<String>,
    #[serde(rename = "fieldsV1")]
    pub(super) fields: Option<Value>,
}
