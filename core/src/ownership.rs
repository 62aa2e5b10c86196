//! What Helm owns in an object, and the writes that change it.
//!
//! Helm owns exactly what server-side apply attributes to its field manager when it applies the
//! chart's object (plus the release annotations and `managed-by` label Helm adds to every
//! object). Which fields those are follows from the object's [`Schema`]:
//!
//! - a scalar, an atomic list, an atomic map or struct, or a value no schema describes, is one
//!   owned value;
//! - a granular map or struct owns each entry the chart sets (an empty struct, `emptyDir: {}`,
//!   is itself an owned value: removing it changes what the chart set);
//! - a set owns each item the chart lists; a map-list (containers by `name`, ports by
//!   `containerPort` and `protocol`...) owns each item the chart lists, by its keys, and inside it
//!   what the chart sets;
//! - a null owns nothing, and neither does an empty set or map-list.
//!
//! A *locked change* is a write that changes an owned value away from the chart's (or removes
//! it, or removes an owned item), unless the value was already different before the write (drift
//! does not block unrelated writes, and moving a field back to the chart's value is allowed).
//! Values compare as the API server stores them: quantities canonically, numbers by value.
//!
//! The same ownership as a set of `fieldsV1` paths, to be checked against the `managedFields`
//! entry the API server itself wrote for Helm, is the module `fields_v1`'s (it builds on this
//! one's helpers; this module does not use it).
//!
//! This file holds the entry points. Beneath it: `walk` (the walk of the chart's object beside a
//! request's), `compare` (when two values are the same), `item_key` (how map-list items pair
//! up), `duplicates` (items server-side apply could not read), `applied` and `order` (the
//! chart's object in the form it is compared in), `pointer` (the paths) and `change` (what is
//! reported).

mod applied;
mod change;
mod compare;
mod duplicates;
mod item_key;
mod order;
use crate::pointer;
pub(crate) use crate::pointer::{push_segment, segment as pointer_segment};
mod walk;

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::schema::{Schema, TypeId};
use crate::tree::Tree;
use compare::same_json;
use walk::Walk;

pub use applied::applied_object;
pub(crate) use applied::{stored_form, RELEASE_NAMESPACE_ANNOTATION, RELEASE_NAME_ANNOTATION};
// Beside the release annotations at its old path, though only this module's files read it.
pub(crate) use crate::pointer::is_ignored;
#[allow(unused_imports)]
pub(crate) use applied::MANAGED_BY_LABEL;
pub(crate) use change::repair_patch;
pub use change::{Change, OwnedValue};
pub(crate) use compare::{null_is_owned, Node};
pub(crate) use duplicates::duplicate_keys;
pub(crate) use item_key::{item_key, normalize_number};
pub(crate) use order::{chart_in_one_order, has_unordered_sets, in_one_order};

/// Changes a request makes to the release annotations and `managed-by` label Helm adds to
/// every object (`release` is the release's name and namespace), where the chart does not set
/// them itself ([`locked_changes`] covers those).
pub(crate) fn helm_metadata_changes(
    chart: &Tree,
    release: (&str, &str),
    new: &Value,
    old: Option<&Value>,
    ignore: &[&str],
) -> Vec<Change> {
    let mut walk = Walk::new_unchecked(ignore, old.is_some());
    walk.helm_metadata(chart, release, new, old);
    walk.changes
}

/// [`helm_metadata_changes`] for drift: every difference counts.
pub(crate) fn helm_metadata_drift(
    chart: &Tree,
    release: (&str, &str),
    live: &Value,
    ignore: &[&str],
) -> Vec<Change> {
    let mut walk = Walk::new_unchecked(ignore, false);
    walk.helm_metadata(chart, release, live, None);
    walk.changes
}

/// Finds the changes a request makes to what Helm owns. `ignore` holds JSON pointers (a `*`
/// segment matches any key or index) whose subtrees are free.
pub fn locked_changes(
    schema: &Schema,
    root: TypeId,
    chart: &Tree,
    new: &Value,
    old: Option<&Value>,
    ignore: &[&str],
) -> Vec<Change> {
    // A CREATE has no stored object: every difference from the chart counts, a field the chart
    // sets that the new object leaves out included (the next helm upgrade puts it back).
    let mut walk = Walk::new(schema, ignore, old.is_some());
    walk.object(root, chart, new, old);
    walk.changes
}

/// Owned values of `live` that differ from the chart (drift to revert): like
/// [`locked_changes`] without an old value, so every difference counts.
pub fn drifted_fields(
    schema: &Schema,
    root: TypeId,
    chart: &Tree,
    live: &Value,
    ignore: &[&str],
) -> Vec<Change> {
    let mut walk = Walk::new(schema, ignore, false);
    walk.object(root, chart, live, None);
    walk.changes
}

/// Every owned value of `live`, equal to the chart's or not, in the order [`drifted_fields`]
/// walks them (the same comparison: lists by their keys, quantities canonically).
pub(crate) fn owned_values(
    schema: &Schema,
    root: TypeId,
    chart: &Tree,
    live: &Value,
    ignore: &[&str],
) -> Vec<OwnedValue> {
    let mut walk = Walk::new(schema, ignore, false);
    walk.keep_equal = true;
    walk.object(root, chart, live, None);
    walk.owned_values()
}

/// [`helm_metadata_drift`] with the equal values too.
pub(crate) fn helm_metadata_values(
    chart: &Tree,
    release: (&str, &str),
    live: &Value,
    ignore: &[&str],
) -> Vec<OwnedValue> {
    let mut walk = Walk::new_unchecked(ignore, false);
    walk.keep_equal = true;
    walk.helm_metadata(chart, release, live, None);
    walk.owned_values()
}

/// Only the chart's `metadata` (what every version and the `status` subresource share).
pub(crate) fn metadata_of(chart: &Tree) -> Tree {
    Tree::map_from(
        chart
            .get("metadata")
            .map(|m| vec![("metadata".into(), m.clone())])
            .unwrap_or_default(),
    )
}

/// Changes a request made through another version of the kind than the chart's (kubectl reads
/// and writes an HPA as `autoscaling/v1` when the chart writes `autoscaling/v2beta2`): the
/// paths of the two versions differ, so beyond `metadata` (the same in every version, compared
/// as usual) every top-level field the write changes counts (`chart` is `null` in those).
pub(crate) fn cross_version_changes(
    schema: &Schema,
    root: TypeId,
    chart: &Tree,
    new: &Value,
    old: Option<&Value>,
    ignore: &[&str],
) -> Vec<Change> {
    let mut changes = locked_changes(schema, root, &metadata_of(chart), new, old, ignore);
    let empty = Map::new();
    let new_map = new.as_object().unwrap_or(&empty);
    let old_map = old.and_then(Value::as_object).unwrap_or(&empty);
    let keys: BTreeSet<&String> = new_map.keys().chain(old_map.keys()).collect();
    for key in keys {
        if matches!(key.as_str(), "apiVersion" | "kind" | "metadata" | "status") {
            continue;
        }
        let path = pointer_segment(key);
        if is_ignored(&path, ignore) {
            continue;
        }
        let (n, o) = (new_map.get(key), old_map.get(key));
        if !same_json(schema, TypeId::UNTYPED, n, o) {
            changes.push(Change {
                path,
                chart: Value::Null,
                requested: n.cloned(),
            });
        }
    }
    changes
}

/// Changes a write through an older version makes by way of an annotation the API server
/// converts into a field ([`crate::kinds::CONVERSION_ANNOTATIONS`]): through `autoscaling/v1`,
/// `autoscaling.alpha.kubernetes.io/metrics` becomes the `spec.metrics` a `v2` chart sets.
/// Each counts as a change of that field when the chart sets it.
pub(crate) fn conversion_annotation_changes(
    chart: &Tree,
    group: &str,
    kind: &str,
    requested_version: &str,
    new: &Value,
    old: Option<&Value>,
    ignore: &[&str],
) -> Vec<Change> {
    let annotation = |object: Option<&Value>, key: &str| {
        object
            .and_then(|o| o.pointer("/metadata/annotations"))
            .and_then(|a| a.get(key))
            .cloned()
    };
    crate::kinds::CONVERSION_ANNOTATIONS
        .iter()
        .filter(|(g, k, v, _, _)| *g == group && *k == kind && *v == requested_version)
        .filter_map(|(_, _, _, key, field)| {
            let chart_value = chart.pointer(field)?;
            let path = format!("/metadata/annotations{}", pointer_segment(key));
            if is_ignored(&path, ignore) || is_ignored(field, ignore) {
                return None;
            }
            let requested = annotation(Some(new), key);
            (requested != annotation(old, key)).then(|| Change {
                path,
                chart: chart_value.to_json(),
                requested,
            })
        })
        .collect()
}

/// Changes to one owned path made of field names, written through another object: the
/// `scale` subresource holds the parent's `/spec/replicas` (or a custom resource's
/// `specReplicasPath`, `chart_pointer`) at `/spec/replicas` of a Scale (`request_pointer`).
/// The changes name the chart's path. `at`: the field's pointer in the chart and in the request.
pub(crate) fn locked_changes_at(
    schema: &Schema,
    root: TypeId,
    chart: &Tree,
    (chart_pointer, request_pointer): (&str, &str),
    new: &Value,
    old: Option<&Value>,
    ignore: &[&str],
) -> Vec<Change> {
    let Some(chart_value) = chart.pointer(chart_pointer) else {
        return Vec::new();
    };
    let ty = chart_pointer
        .split('/')
        .skip(1)
        .fold(root, |ty, name| schema.field(ty, name));
    let mut walk = Walk::new(schema, ignore, true);
    walk.path = chart_pointer.to_string();
    walk.visit(
        ty,
        chart_value,
        new.pointer(request_pointer),
        old.and_then(|o| o.pointer(request_pointer)),
    );
    walk.changes
}

#[cfg(test)]
mod tests;
