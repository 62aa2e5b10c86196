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

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use base64::Engine;

use serde_json::{Map, Value};

use crate::quantity::Quantity;
use crate::schema::{Atom, ListType, Scalar, Schema, TypeId};
use crate::tree::Tree;

/// The annotations and label Helm adds to every object it applies (not in the manifest).
pub(crate) const RELEASE_NAME_ANNOTATION: &str = "meta.helm.sh/release-name";
pub(crate) const RELEASE_NAMESPACE_ANNOTATION: &str = "meta.helm.sh/release-namespace";
pub(crate) const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// A locked path the request changes away from the chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// JSON pointer into the request's object (`-` for a list item the request removed).
    pub path: String,
    /// The chart's value; `null` for an item the request adds that repeats the key of a chart
    /// item (the chart has no such item: repair removes it).
    pub chart: Value,
    /// The requested value; `None` when the request removes the field.
    pub requested: Option<Value>,
}

/// The chart's object as Helm applies it: with Helm's release metadata (server-side apply
/// attributes a Secret's `stringData` to Helm as `stringData`, though only `data` is stored).
pub fn applied_object(chart: &Tree, release: (&str, &str)) -> Tree {
    let Tree::Map(entries) = chart else {
        return chart.clone();
    };
    let mut entries: Vec<(Box<str>, Tree)> = entries.to_vec();
    let (name, namespace) = release;
    let metadata = entries
        .iter()
        .position(|(k, _)| &**k == "metadata")
        .unwrap_or_else(|| {
            entries.push(("metadata".into(), Tree::Map(Box::new([]))));
            entries.len() - 1
        });
    let with = |map: &Tree, key: &str, extra: &[(&str, &str)]| -> Tree {
        let mut inner: Vec<(Box<str>, Tree)> = match map.get(key) {
            Some(Tree::Map(e)) => e.to_vec(),
            _ => Vec::new(),
        };
        for (k, v) in extra {
            if !inner.iter().any(|(ik, _)| &**ik == *k) {
                inner.push(((*k).into(), Tree::Str((*v).into())));
            }
        }
        Tree::map_from(inner)
    };
    let meta = &entries[metadata].1;
    let mut meta_entries: Vec<(Box<str>, Tree)> = match meta {
        Tree::Map(e) => e
            .iter()
            .filter(|(k, _)| !matches!(&**k, "annotations" | "labels"))
            .cloned()
            .collect(),
        _ => Vec::new(),
    };
    meta_entries.push((
        "annotations".into(),
        with(
            meta,
            "annotations",
            &[
                (RELEASE_NAME_ANNOTATION, name),
                (RELEASE_NAMESPACE_ANNOTATION, namespace),
            ],
        ),
    ));
    meta_entries.push((
        "labels".into(),
        with(meta, "labels", &[(MANAGED_BY_LABEL, "Helm")]),
    ));
    entries[metadata].1 = Tree::map_from(meta_entries);
    Tree::map_from(entries)
}

/// `stringData` entries become base64 `data` entries (they win over `data`, as on the server).
fn fold_string_data(entries: &mut Vec<(Box<str>, Tree)>) {
    let Some(position) = entries.iter().position(|(k, _)| &**k == "stringData") else {
        return;
    };
    let (_, string_data) = entries.remove(position);
    let Tree::Map(strings) = string_data else {
        return;
    };
    let mut data: Vec<(Box<str>, Tree)> = match entries.iter().find(|(k, _)| &**k == "data") {
        Some((_, Tree::Map(d))) => d.to_vec(),
        _ => Vec::new(),
    };
    for (key, value) in strings.iter() {
        let text = match value {
            Tree::Str(s) => s.to_string(),
            Tree::Null => continue,
            other => other.to_json().to_string(),
        };
        let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
        data.retain(|(k, _)| k != key);
        data.push((key.clone(), Tree::Str(encoded.into())));
    }
    entries.retain(|(k, _)| &**k != "data");
    entries.push(("data".into(), Tree::map_from(data)));
}

/// The chart's object as the API server stores it: a Secret's `stringData` folded into `data`
/// (borrowed unchanged for everything else).
pub(crate) fn stored_form<'t>(
    chart: &'t Tree,
    group: &str,
    kind: &str,
) -> std::borrow::Cow<'t, Tree> {
    match chart {
        Tree::Map(entries)
            if group.is_empty() && kind == "Secret" && chart.get("stringData").is_some() =>
        {
            let mut entries = entries.to_vec();
            fold_string_data(&mut entries);
            std::borrow::Cow::Owned(Tree::map_from(entries))
        }
        _ => std::borrow::Cow::Borrowed(chart),
    }
}

/// Whether a kind's lists hold sets that the API server stores in the order they are sent:
/// Endpoints' `subsets`, and each subset's `addresses`, `notReadyAddresses` and `ports` ("sets
/// of addresses and ports", core/v1). kube-apiserver does not repack them (its Endpoints
/// strategy canonicalizes nothing: measured on 1.20 in `tests/e2e/test_restore.py`), while the
/// endpoints controller and restore tools write them in their own order. Compared in one order
/// ([`in_one_order`]), the same sets in another order are no change.
pub(crate) fn has_unordered_sets(group: &str, kind: &str) -> bool {
    group.is_empty() && kind == "Endpoints"
}

/// `value` (an object of `group`/`kind`) with its unordered sets in one order: addresses by IP,
/// ports by name, port and protocol, then the subsets by what they hold.
pub(crate) fn in_one_order<'v>(group: &str, kind: &str, value: &'v Value) -> Cow<'v, Value> {
    let Some(subsets) = value.get("subsets").and_then(Value::as_array) else {
        return Cow::Borrowed(value);
    };
    if !has_unordered_sets(group, kind) {
        return Cow::Borrowed(value);
    }
    let text = |v: &Value, field: &str| match v.get(field) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let port = |v: &Value| v.get("port").and_then(Value::as_i64).unwrap_or_default();
    let mut subsets: Vec<Value> = subsets.clone();
    for subset in &mut subsets {
        for field in ["addresses", "notReadyAddresses"] {
            if let Some(Value::Array(addresses)) = subset.get_mut(field) {
                addresses.sort_by_cached_key(|a| (text(a, "ip"), a.to_string()));
            }
        }
        if let Some(Value::Array(ports)) = subset.get_mut("ports") {
            ports.sort_by_cached_key(|p| (text(p, "name"), port(p), text(p, "protocol")));
        }
    }
    subsets.sort_by_cached_key(Value::to_string);
    let mut value = value.clone();
    value["subsets"] = Value::Array(subsets);
    Cow::Owned(value)
}

/// The chart's object in the order [`in_one_order`] compares it in.
pub(crate) fn chart_in_one_order<'t>(
    group: &str,
    kind: &str,
    chart: Cow<'t, Tree>,
) -> Cow<'t, Tree> {
    if !has_unordered_sets(group, kind) || chart.get("subsets").is_none() {
        return chart;
    }
    let json = chart.to_json();
    Cow::Owned(Tree::from(in_one_order(group, kind, &json).as_ref()))
}

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

/// One value Helm owns in a live object, with the chart's value and the live one (`kubectl
/// locker why`).
#[derive(Clone, Debug, PartialEq)]
pub struct OwnedValue {
    /// JSON pointer into the live object (`-` for a chart item the live object lacks).
    pub path: String,
    pub chart: Value,
    /// `None` when the live object lacks the field.
    pub live: Option<Value>,
    /// Whether the live value differs from the chart's: exactly the paths of
    /// [`drifted_fields`].
    pub differs: bool,
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

/// Items of a map-list that repeat a key or lack a key field, or of a set that repeat a value,
/// anywhere in `new` (where `old`, at the same place, had fewer). Server-side apply cannot read
/// such an object: the next `helm upgrade` fails ("duplicate entries for key", "element omits
/// key field"; both found by the randomized e2e test on a ServiceAccount's `secrets`, items the
/// chart never set).
pub(crate) fn duplicate_keys(
    schema: &Schema,
    root: TypeId,
    new: &Value,
    old: Option<&Value>,
) -> Vec<Change> {
    fn walk<'a>(
        schema: &'a Schema,
        ty: TypeId,
        new: &'a Value,
        old: Option<&'a Value>,
        path: &mut String,
        out: &mut Vec<Change>,
    ) {
        // Nothing keyed inside (an env var, a label map): nothing to check, a cheap return.
        if !schema.may_hold_keyed_lists(ty) {
            return;
        }
        match (schema.atom(ty), new) {
            (
                Atom::Struct { atomic: false, .. } | Atom::Map { atomic: false, .. },
                Value::Object(map),
            ) => {
                for (key, value) in map {
                    let len = path.len();
                    push_segment(path, key);
                    walk(
                        schema,
                        schema.field(ty, key),
                        value,
                        old.and_then(|o| o.get(key)),
                        path,
                        out,
                    );
                    path.truncate(len);
                }
            }
            (Atom::List { items, list_type }, Value::Array(list))
                if *list_type != ListType::Atomic =>
            {
                // Keyed items by their borrowed key, set values by their JSON text (sets are short).
                #[derive(PartialEq, Eq, Hash)]
                enum Key<'v> {
                    Item(ItemKey<'v>),
                    Text(String),
                }
                let key = |v: &'a Value| -> Option<Key<'a>> {
                    match list_type {
                        ListType::Map(keys) => {
                            pair_key(schema, *items, keys, Node::Json(v)).map(Key::Item)
                        }
                        _ => Some(Key::Text(normalize_number(v.clone()).to_string())),
                    }
                };
                let old_list = old
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let descend =
                    matches!(list_type, ListType::Map(_)) && schema.may_hold_keyed_lists(*items);
                // The common case: the same items as before, in the same order. Nothing can be
                // newly repeated or keyless; only what is inside the items may have changed.
                if old_list.len() == list.len()
                    && list.iter().zip(old_list).all(|(a, b)| key(a) == key(b))
                {
                    if descend {
                        for (i, (item, old_item)) in list.iter().zip(old_list).enumerate() {
                            let len = path.len();
                            push_index(path, i);
                            walk(schema, *items, item, Some(old_item), path, out);
                            path.truncate(len);
                        }
                    }
                    return;
                }
                // Per key in the old list: how many items, and the first one.
                let mut old_index: HashMap<Key<'_>, (usize, usize)> =
                    HashMap::with_capacity(old_list.len());
                let mut keyless_before = 0;
                for (j, item) in old_list.iter().enumerate() {
                    match key(item) {
                        Some(k) => old_index.entry(k).or_insert((0, j)).0 += 1,
                        None => keyless_before += 1,
                    }
                }
                let mut seen: HashMap<Key<'_>, usize> = HashMap::with_capacity(list.len());
                let mut keyless = 0;
                for (i, item) in list.iter().enumerate() {
                    let Some(k) = key(item) else {
                        // An item without its key fields (or not an object) is as unreadable.
                        keyless += 1;
                        if keyless > keyless_before {
                            let len = path.len();
                            push_index(path, i);
                            out.push(Change {
                                path: path.clone(),
                                chart: Value::Null,
                                requested: Some(item.clone()),
                            });
                            path.truncate(len);
                        }
                        continue;
                    };
                    let (before, first_old) = old_index.get(&k).copied().unwrap_or((0, usize::MAX));
                    let earlier = seen.get(&k).copied().unwrap_or(0);
                    if earlier > 0 && earlier >= before {
                        let len = path.len();
                        push_index(path, i);
                        out.push(Change {
                            path: path.clone(),
                            chart: Value::Null,
                            requested: Some(item.clone()),
                        });
                        path.truncate(len);
                    }
                    if descend {
                        let len = path.len();
                        push_index(path, i);
                        walk(schema, *items, item, old_list.get(first_old), path, out);
                        path.truncate(len);
                    }
                    *seen.entry(k).or_insert(0) += 1;
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut path = String::new();
    if let Value::Object(map) = new {
        for (key, value) in map {
            if matches!(key.as_str(), "status") {
                continue;
            }
            push_segment(&mut path, key);
            walk(
                schema,
                schema.field(root, key),
                value,
                old.and_then(|o| o.get(key)),
                &mut path,
                &mut out,
            );
            path.clear();
        }
    }
    out
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
        let path = format!("/{}", key.replace('~', "~0").replace('/', "~1"));
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
            let path = format!(
                "/metadata/annotations/{}",
                key.replace('~', "~0").replace('/', "~1")
            );
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
/// The changes name the chart's path.
#[allow(clippy::too_many_arguments)]
pub(crate) fn locked_changes_at(
    schema: &Schema,
    root: TypeId,
    chart: &Tree,
    chart_pointer: &str,
    request_pointer: &str,
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

struct Walk<'a> {
    schema: &'a Schema,
    ignore: &'a [&'a str],
    changes: Vec<Change>,
    path: String,
    /// A difference from the chart counts only when the value also changes from the old one
    /// (admission); off for drift, where there is no old value.
    against_old: bool,
    /// Record owned values equal to the chart's too ([`owned_values`]); `differs[i]` says
    /// which of `changes` differ.
    keep_equal: bool,
    differs: Vec<bool>,
}

impl<'a> Walk<'a> {
    /// A walk that compares plain strings only (no schema needed).
    fn new_unchecked(ignore: &'a [&'a str], against_old: bool) -> Self {
        static EMPTY: std::sync::OnceLock<Schema> = std::sync::OnceLock::new();
        Walk::new(EMPTY.get_or_init(Schema::empty), ignore, against_old)
    }

    fn helm_metadata(
        &mut self,
        chart: &Tree,
        release: (&str, &str),
        new: &Value,
        old: Option<&Value>,
    ) {
        let (name, namespace) = release;
        for (field, key, value) in [
            ("annotations", RELEASE_NAME_ANNOTATION, name),
            ("annotations", RELEASE_NAMESPACE_ANNOTATION, namespace),
            ("labels", MANAGED_BY_LABEL, "Helm"),
        ] {
            let in_chart = chart
                .get("metadata")
                .and_then(|m| m.get(field))
                .and_then(|f| f.get(key));
            if in_chart.is_some_and(|v| !matches!(v, Tree::Null)) {
                continue;
            }
            fn at<'v>(object: &'v Value, field: &str, key: &str) -> Option<&'v Value> {
                object.get("metadata")?.get(field)?.get(key)
            }
            let new_value = at(new, field, key);
            let old_value = old.and_then(|o| at(o, field, key));
            // Left as it was: no change of this write (what `leaf` finds, without a path).
            if self.against_old && !self.keep_equal && new_value == old_value {
                continue;
            }
            self.path.clear();
            push_segment(&mut self.path, "metadata");
            push_segment(&mut self.path, field);
            push_segment(&mut self.path, key);
            if is_ignored(&self.path, self.ignore) {
                continue;
            }
            let expected = Tree::Str(value.into());
            self.leaf(TypeId::UNTYPED, &expected, new_value, old_value);
        }
        self.path.clear();
    }

    fn new(schema: &'a Schema, ignore: &'a [&'a str], against_old: bool) -> Self {
        Walk {
            schema,
            ignore,
            changes: Vec::new(),
            path: String::new(),
            against_old,
            keep_equal: false,
            differs: Vec::new(),
        }
    }

    fn owned_values(self) -> Vec<OwnedValue> {
        self.changes
            .into_iter()
            .zip(self.differs)
            .map(|(change, differs)| OwnedValue {
                path: change.path,
                chart: change.chart,
                live: change.requested,
                differs,
            })
            .collect()
    }

    fn object(&mut self, root: TypeId, chart: &Tree, new: &Value, old: Option<&Value>) {
        let Tree::Map(entries) = chart else {
            return;
        };
        let Some(new_map) = new.as_object() else {
            // Not an object at all (the API server would reject it): every owned value changes.
            self.push(chart, Some(new));
            return;
        };
        let new_map = Some(new_map);
        let old_map = old.and_then(Value::as_object);
        for (key, chart_value) in entries.iter() {
            // The type is fixed by the lookup, and status is never the chart's to set.
            if matches!(&**key, "apiVersion" | "kind" | "status")
                || self.unwritten(key, new_map, old_map)
            {
                continue;
            }
            let ty = self.schema.field(root, key);
            self.child(key, ty, chart_value, new_map, old_map);
        }
    }

    /// Whether an UPDATE leaves `key` out of both the new and the old object: what it does not
    /// write cannot change (an UPDATE's sides hold only what differs, [`crate::prune`]), so
    /// neither the schema nor the chart's subtree is looked at.
    fn unwritten(
        &self,
        key: &str,
        new: Option<&Map<String, Value>>,
        old: Option<&Map<String, Value>>,
    ) -> bool {
        self.against_old
            && !self.keep_equal
            && old.is_some_and(|m| !m.contains_key(key))
            && new.is_none_or(|m| !m.contains_key(key))
    }

    fn child(
        &mut self,
        key: &str,
        ty: TypeId,
        chart: &Tree,
        new: Option<&Map<String, Value>>,
        old: Option<&Map<String, Value>>,
    ) {
        let len = self.path.len();
        push_segment(&mut self.path, key);
        self.visit(
            ty,
            chart,
            new.and_then(|m| m.get(key)),
            old.and_then(|m| m.get(key)),
        );
        self.path.truncate(len);
    }

    fn visit(&mut self, ty: TypeId, chart: &Tree, new: Option<&Value>, old: Option<&Value>) {
        if is_ignored(&self.path, self.ignore) {
            return;
        }
        if matches!(chart, Tree::Null) {
            // A null the API server attributes to Helm (a scalar, an atomic value) means
            // "absent", and is Helm's: setting it is a change. A null map or list owns nothing.
            if null_is_owned(self.schema.atom(ty)) {
                self.leaf(ty, chart, new, old);
            }
            return;
        }
        match (self.schema.atom(ty), chart) {
            (Atom::Struct { atomic: false, .. }, Tree::Map(entries)) if entries.is_empty() => {
                self.visit_empty_struct(chart, new, old)
            }
            (
                Atom::Struct { atomic: false, .. }
                | Atom::Map { atomic: false, .. }
                | Atom::Deduced,
                Tree::Map(entries),
            ) => self.visit_map(ty, entries, new, old),
            (
                Atom::List {
                    items,
                    list_type: ListType::Set,
                },
                Tree::List(chart_items),
            ) => self.visit_set(*items, chart_items, new, old),
            (
                Atom::List {
                    items,
                    list_type: ListType::Map(keys),
                },
                Tree::List(chart_items),
            ) => self.visit_map_list(*items, keys, chart_items, new, old),
            // Scalars, atomic lists, maps and structs, untyped values: one value.
            _ => self.leaf(ty, chart, new, old),
        }
    }

    /// `emptyDir: {}`: the struct's presence is the owned value.
    fn visit_empty_struct(&mut self, chart: &Tree, new: Option<&Value>, old: Option<&Value>) {
        let gone = |v: Option<&Value>| v.is_none_or(Value::is_null);
        if gone(new) && (!self.against_old || !gone(old)) {
            self.push(chart, new);
        } else if self.keep_equal && !gone(new) {
            self.push_equal(chart, new);
        }
    }

    /// A granular map or struct: each of the chart's keys on its own.
    fn visit_map(
        &mut self,
        ty: TypeId,
        entries: &[(Box<str>, Tree)],
        new: Option<&Value>,
        old: Option<&Value>,
    ) {
        let schema = self.schema;
        let new_map = new.and_then(Value::as_object);
        let old_map = old.and_then(Value::as_object);
        for (key, chart_value) in entries.iter() {
            if self.unwritten(key, new_map, old_map) {
                continue;
            }
            let field = schema.field(ty, key);
            if matches!(chart_value, Tree::Null) && !schema.is_declared_field(ty, key) {
                // A map entry is owned even when null (`annotations: {note: null}`).
                let len = self.path.len();
                push_segment(&mut self.path, key);
                if !is_ignored(&self.path, self.ignore) {
                    let n = new_map.and_then(|m| m.get(&**key));
                    let o = old_map.and_then(|m| m.get(&**key));
                    self.leaf(TypeId::UNTYPED, chart_value, n, o);
                }
                self.path.truncate(len);
                continue;
            }
            self.child(key, field, chart_value, new_map, old_map);
        }
    }

    /// A set (`finalizers`): each of the chart's items present, wherever it is.
    fn visit_set(
        &mut self,
        items: TypeId,
        chart_items: &[Tree],
        new: Option<&Value>,
        old: Option<&Value>,
    ) {
        let schema = self.schema;
        for item in chart_items.iter().filter(|i| !matches!(i, Tree::Null)) {
            let present = |list: Option<&Value>| {
                list.and_then(Value::as_array).is_some_and(|l| {
                    l.iter()
                        .any(|v| equal(schema, items, Node::Tree(item), Some(Node::Json(v))))
                })
            };
            if !present(new) && (!self.against_old || present(old)) {
                let len = self.path.len();
                self.path.push_str("/-");
                self.push(item, None);
                self.path.truncate(len);
            } else if self.keep_equal {
                let found = new.and_then(Value::as_array).and_then(|l| {
                    l.iter()
                        .enumerate()
                        .find(|(_, v)| equal(schema, items, Node::Tree(item), Some(Node::Json(v))))
                });
                if let Some((i, value)) = found {
                    let len = self.path.len();
                    push_index(&mut self.path, i);
                    self.push_equal(item, Some(value));
                    self.path.truncate(len);
                }
            }
        }
    }

    /// A list of maps by key (`containers` by `name`): items paired by their keys.
    fn visit_map_list(
        &mut self,
        items: TypeId,
        keys: &[Box<str>],
        chart_items: &[Tree],
        new: Option<&Value>,
        old: Option<&Value>,
    ) {
        let schema = self.schema;
        let new_items = new
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let old_items = old
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        // Keys are read once per item, borrowed: a container may list hundreds of env vars.
        let new_keys: Vec<Option<ItemKey<'_>>> = new_items
            .iter()
            .map(|v| pair_key(schema, items, keys, Node::Json(v)))
            .collect();
        let old_keys: Vec<Option<ItemKey<'_>>> = old_items
            .iter()
            .map(|v| pair_key(schema, items, keys, Node::Json(v)))
            .collect();
        let take = |list_keys: &[Option<ItemKey<'_>>], taken: &mut [bool], key: &ItemKey<'_>| {
            let i =
                (0..list_keys.len()).find(|&i| !taken[i] && list_keys[i].as_ref() == Some(key))?;
            taken[i] = true;
            Some(i)
        };
        // Items that share a key (env may repeat a name) pair up in order.
        let mut new_taken = vec![false; new_items.len()];
        let mut old_taken = vec![false; old_items.len()];
        let mut chart_keys = Vec::with_capacity(chart_items.len());
        for item in chart_items.iter() {
            let Some(key) = pair_key(schema, items, keys, Node::Tree(item)) else {
                continue;
            };
            let position = take(&new_keys, &mut new_taken, &key);
            let old_item = take(&old_keys, &mut old_taken, &key).map(|i| &old_items[i]);
            chart_keys.push(key);
            let len = self.path.len();
            match position {
                Some(i) => {
                    push_index(&mut self.path, i);
                    self.visit(items, item, Some(&new_items[i]), old_item);
                }
                None => {
                    self.path.push_str("/-");
                    if !self.against_old || old_item.is_some() {
                        self.push(item, None);
                    }
                }
            }
            self.path.truncate(len);
        }
        // A second item with the key of a chart item (an `env` name repeated after the
        // chart's: the last one wins in the container) shadows what the chart set, and
        // the next apply fails on the duplicate key.
        for (i, added) in new_items.iter().enumerate() {
            let Some(key) = new_keys[i].as_ref() else {
                continue;
            };
            if new_taken[i] || !chart_keys.iter().any(|k| k == key) {
                continue;
            }
            if take(&old_keys, &mut old_taken, key).is_some() && self.against_old {
                continue;
            }
            let len = self.path.len();
            push_index(&mut self.path, i);
            self.push(&Tree::Null, Some(added));
            self.path.truncate(len);
        }
    }

    fn leaf(&mut self, ty: TypeId, chart: &Tree, new: Option<&Value>, old: Option<&Value>) {
        let schema = self.schema;
        let new_node = new.map(Node::Json);
        if equal(schema, ty, Node::Tree(chart), new_node) {
            if self.keep_equal {
                self.push_equal(chart, new);
            }
            return;
        }
        if self.against_old && same_json(schema, ty, new, old) {
            return;
        }
        self.push(chart, new);
    }

    fn push(&mut self, chart: &Tree, new: Option<&Value>) {
        self.changes.push(Change {
            path: self.path.clone(),
            chart: chart.to_json(),
            requested: new.filter(|v| !v.is_null()).cloned(),
        });
        if self.keep_equal {
            self.differs.push(true);
        }
    }

    /// An owned value equal to the chart's ([`owned_values`] only).
    fn push_equal(&mut self, chart: &Tree, new: Option<&Value>) {
        self.changes.push(Change {
            path: self.path.clone(),
            chart: chart.to_json(),
            requested: new.filter(|v| !v.is_null()).cloned(),
        });
        self.differs.push(false);
    }
}

/// Whether server-side apply attributes a null of this type to its applier (structured-merge-
/// diff: a scalar, or an atomic list, map or untyped value; not a granular map or struct, a
/// set, a map-list, or a deduced value).
pub(crate) fn null_is_owned(atom: &Atom) -> bool {
    matches!(
        atom,
        Atom::Scalar(_)
            | Atom::Untyped
            | Atom::List {
                list_type: ListType::Atomic,
                ..
            }
            | Atom::Struct { atomic: true, .. }
            | Atom::Map { atomic: true, .. }
    )
}

/// Whether `new` and `old` are the same value (absent and null alike).
fn same_json(schema: &Schema, ty: TypeId, new: Option<&Value>, old: Option<&Value>) -> bool {
    let new = new.filter(|v| !v.is_null());
    let old = old.filter(|v| !v.is_null());
    match (new, old) {
        (None, None) => true,
        (Some(n), o) => equal(schema, ty, Node::Json(n), o.map(Node::Json)),
        (None, Some(_)) => false,
    }
}

/// A value from the chart or from a request, read alike.
#[derive(Clone, Copy)]
pub(crate) enum Node<'a> {
    Tree(&'a Tree),
    Json(&'a Value),
}

enum ScalarView<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a str),
    Composite,
}

impl<'a> Node<'a> {
    fn scalar(self) -> ScalarView<'a> {
        match self {
            Node::Tree(Tree::Null) | Node::Json(Value::Null) => ScalarView::Null,
            Node::Tree(Tree::Bool(b)) => ScalarView::Bool(*b),
            Node::Json(Value::Bool(b)) => ScalarView::Bool(*b),
            Node::Tree(Tree::Int(i)) => ScalarView::Int(*i),
            Node::Tree(Tree::Float(f)) => ScalarView::Float(*f),
            Node::Json(Value::Number(n)) => match n.as_i64() {
                Some(i) => ScalarView::Int(i),
                None => ScalarView::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Node::Tree(Tree::Str(s)) => ScalarView::Str(s),
            Node::Json(Value::String(s)) => ScalarView::Str(s),
            _ => ScalarView::Composite,
        }
    }

    fn is_empty(self) -> bool {
        match self {
            Node::Tree(t) => t.is_empty_value(),
            Node::Json(Value::Null) => true,
            Node::Json(Value::Array(a)) => a.is_empty(),
            Node::Json(Value::Object(m)) => m.is_empty(),
            Node::Json(_) => false,
        }
    }

    fn get(self, key: &str) -> Option<Node<'a>> {
        match self {
            Node::Tree(t) => t.get(key).map(Node::Tree),
            Node::Json(v) => v.get(key).map(Node::Json),
        }
    }

    /// Entries of a map whose value is not null.
    fn entries(self) -> Option<Vec<(&'a str, Node<'a>)>> {
        match self {
            Node::Tree(Tree::Map(e)) => Some(
                e.iter()
                    .filter(|(_, v)| !matches!(v, Tree::Null))
                    .map(|(k, v)| (&**k, Node::Tree(v)))
                    .collect(),
            ),
            Node::Json(Value::Object(m)) => Some(
                m.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.as_str(), Node::Json(v)))
                    .collect(),
            ),
            _ => None,
        }
    }

    fn items(self) -> Option<Vec<Node<'a>>> {
        match self {
            Node::Tree(Tree::List(l)) => Some(l.iter().map(Node::Tree).collect()),
            Node::Json(Value::Array(a)) => Some(a.iter().map(Node::Json).collect()),
            _ => None,
        }
    }

    fn to_json(self) -> Value {
        match self {
            Node::Tree(t) => t.to_json(),
            Node::Json(v) => v.clone(),
        }
    }
}

/// Whether two values are the same as the API server stores them: quantities canonically,
/// numbers by value, maps by their non-null entries; an empty list or map is no value at all
/// (Kubernetes' `omitempty`).
fn equal(schema: &Schema, ty: TypeId, a: Node<'_>, b: Option<Node<'_>>) -> bool {
    let Some(b) = b else {
        return stands_for_absent(schema, ty, a);
    };
    if a.is_empty() || b.is_empty() {
        if !a.is_empty() || !b.is_empty() {
            return false;
        }
        // `{}` of a struct (a LabelSelector that selects everything, a NetworkPolicy peer) is
        // a value: equal only to another `{}`.
        let struct_value = |n: Node<'_>| is_object(n) && !stands_for_absent(schema, ty, n);
        if struct_value(a) || struct_value(b) {
            return is_object(a) && is_object(b);
        }
        return same_shape_when_empty(a, b);
    }
    match (a.entries(), b.entries()) {
        (Some(x), Some(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| equal(schema, schema.field(ty, k), *v, b.get(k)))
        }
        (None, None) => match (a.items(), b.items()) {
            (Some(x), Some(y)) => {
                let item_ty = match schema.atom(ty) {
                    Atom::List { items, .. } => *items,
                    _ => TypeId::UNTYPED,
                };
                x.len() == y.len()
                    && x.iter()
                        .zip(&y)
                        .all(|(p, q)| equal(schema, item_ty, *p, Some(*q)))
            }
            (None, None) => {
                scalar_equal(a, b)
                    || (matches!(schema.atom(ty), Atom::Scalar(Scalar::Quantity)) && {
                        let q = |n: Node<'_>| match n.scalar() {
                            ScalarView::Str(s) => Quantity::parse(s),
                            ScalarView::Int(i) => Quantity::parse(&i.to_string()),
                            ScalarView::Float(f) => Quantity::parse(&f.to_string()),
                            _ => None,
                        };
                        q(a).is_some() && q(a) == q(b)
                    })
            }
            _ => false,
        },
        _ => false,
    }
}

/// Whether `n` stands for an absent value where a `ty` is stored: null, an empty list or an
/// empty map (Go's encoder leaves them out). An empty struct does not: Go writes `{}` for a
/// struct, and `podSelector: {}` selects every pod where an absent one selects none.
fn stands_for_absent(schema: &Schema, ty: TypeId, n: Node<'_>) -> bool {
    n.is_empty() && !(is_object(n) && matches!(schema.atom(ty), Atom::Struct { .. }))
}

fn is_object(n: Node<'_>) -> bool {
    matches!(n, Node::Tree(Tree::Map(_)) | Node::Json(Value::Object(_)))
}

/// `{}` and `[]` are both "nothing", but a struct's `{}` is not a list's `[]`.
fn same_shape_when_empty(a: Node<'_>, b: Node<'_>) -> bool {
    let kind = |n: Node<'_>| match n {
        Node::Tree(Tree::Map(_)) | Node::Json(Value::Object(_)) => 1,
        Node::Tree(Tree::List(_)) | Node::Json(Value::Array(_)) => 2,
        _ => 0,
    };
    kind(a) == 0 || kind(b) == 0 || kind(a) == kind(b)
}

fn scalar_equal(a: Node<'_>, b: Node<'_>) -> bool {
    match (a.scalar(), b.scalar()) {
        (ScalarView::Null, ScalarView::Null) => true,
        (ScalarView::Bool(x), ScalarView::Bool(y)) => x == y,
        (ScalarView::Str(x), ScalarView::Str(y)) => x == y,
        (ScalarView::Int(x), ScalarView::Int(y)) => x == y,
        (ScalarView::Int(x), ScalarView::Float(y)) | (ScalarView::Float(y), ScalarView::Int(x)) => {
            x as f64 == y
        }
        (ScalarView::Float(x), ScalarView::Float(y)) => x == y,
        _ => false,
    }
}

/// One key field's value, borrowed from the item (or the schema's default).
#[derive(Clone, Copy, Debug, PartialEq)]
enum KeyPart<'a> {
    Str(&'a str),
    Int(i64),
    Float(f64),
    Bool(bool),
    Other(&'a Value),
    Unused,
}

impl Eq for KeyPart<'_> {}

impl std::hash::Hash for KeyPart<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            KeyPart::Str(s) => s.hash(state),
            KeyPart::Int(i) => i.hash(state),
            KeyPart::Float(f) => f.to_bits().hash(state),
            KeyPart::Bool(b) => b.hash(state),
            // Rare (a non-scalar schema default): equal values hash alike, collisions are fine.
            KeyPart::Other(_) | KeyPart::Unused => {}
        }
    }
}

/// A map-list item's identity for pairing chart, new and old items, without allocating. Up to
/// four key fields take part (Kubernetes' lists have one or two).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ItemKey<'a>([KeyPart<'a>; 4]);

fn pair_key<'a>(
    schema: &'a Schema,
    item_ty: TypeId,
    keys: &[Box<str>],
    item: Node<'a>,
) -> Option<ItemKey<'a>> {
    if !matches!(
        item,
        Node::Tree(Tree::Map(_)) | Node::Json(Value::Object(_))
    ) {
        return None;
    }
    let mut parts = [KeyPart::Unused; 4];
    for (part, key) in parts.iter_mut().zip(keys) {
        let value = item
            .get(key)
            .filter(|v| !matches!(v.scalar(), ScalarView::Null));
        *part = match value {
            Some(v) => match v.scalar() {
                ScalarView::Str(s) => KeyPart::Str(s),
                ScalarView::Int(i) => KeyPart::Int(i),
                ScalarView::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => {
                    KeyPart::Int(f as i64)
                }
                ScalarView::Float(f) => KeyPart::Float(f),
                ScalarView::Bool(b) => KeyPart::Bool(b),
                ScalarView::Null | ScalarView::Composite => return None,
            },
            None => match schema.field_default(item_ty, key) {
                Some(Value::String(s)) => KeyPart::Str(s),
                Some(Value::Number(n)) if n.as_i64().is_some() => KeyPart::Int(n.as_i64()?),
                Some(Value::Bool(b)) => KeyPart::Bool(*b),
                Some(other) => KeyPart::Other(other),
                None => KeyPart::Str(known_key_default(key)?),
            },
        };
    }
    Some(ItemKey(parts))
}

/// The key of a map-list item: its key fields (a missing one takes the schema's default), as
/// canonical JSON; `None` when the item is not an object or lacks a key without a default.
pub(crate) fn item_key(
    schema: &Schema,
    item_ty: TypeId,
    keys: &[Box<str>],
    item: Node<'_>,
) -> Option<String> {
    item.entries()?;
    let mut fields = BTreeMap::new();
    for key in keys {
        let value = match item
            .get(key)
            .filter(|v| !matches!(v.scalar(), ScalarView::Null))
        {
            Some(v) => v.to_json(),
            None => schema
                .field_default(item_ty, key)
                .cloned()
                .or_else(|| known_key_default(key).map(Value::from))?,
        };
        fields.insert(key.to_string(), normalize_number(value));
    }
    serde_json::to_string(&fields).ok()
}

/// Key defaults the API server applies before server-side apply sees the item, where the
/// 1.20 OpenAPI document does not carry them (`protocol` of ports).
fn known_key_default(key: &str) -> Option<&'static str> {
    (key == "protocol").then_some("TCP")
}

/// `80.0` and `80` are one key.
pub(crate) fn normalize_number(value: Value) -> Value {
    match &value {
        Value::Number(n) if n.as_i64().is_none() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            _ => value,
        },
        _ => value,
    }
}

/// Appends `/key` to a JSON pointer, `~` and `/` escaped (RFC 6901), without allocating.
fn push_segment(path: &mut String, key: &str) {
    path.push('/');
    let mut rest = key;
    while let Some(at) = rest.find(['~', '/']) {
        path.push_str(&rest[..at]);
        path.push_str(if rest.as_bytes()[at] == b'~' {
            "~0"
        } else {
            "~1"
        });
        rest = &rest[at + 1..];
    }
    path.push_str(rest);
}

/// Appends `/i` (a list index) to a JSON pointer.
fn push_index(path: &mut String, i: usize) {
    use std::fmt::Write;
    let _ = write!(path, "/{i}");
}

/// Whether `path` lies under one of the ignored pointers.
pub(crate) fn is_ignored(path: &str, ignore: &[&str]) -> bool {
    ignore.iter().any(|pattern| {
        let mut path_segments = path.split('/').skip(1);
        pattern
            .split('/')
            .skip(1)
            .all(|p| path_segments.next().is_some_and(|s| p == "*" || p == s))
    })
}

/// A JSON patch that puts every changed field back to the chart's value.
pub(crate) fn repair_patch(changes: &[Change]) -> json_patch::Patch {
    use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
    let ops = changes
        .iter()
        .filter_map(|change| {
            let path = json_patch::jsonptr::PointerBuf::parse(change.path.clone()).ok()?;
            let value = change.chart.clone();
            Some(match change.requested {
                Some(_) if value.is_null() => PatchOperation::Remove(RemoveOperation { path }),
                Some(_) => PatchOperation::Replace(ReplaceOperation { path, value }),
                None => PatchOperation::Add(AddOperation { path, value }),
            })
        })
        .collect();
    json_patch::Patch(ops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn schema() -> Arc<Schema> {
        Schema::builtin()
    }

    #[test]
    fn pointer_segments_are_escaped_as_rfc_6901_says() {
        for key in [
            "",
            "plain",
            "a/b",
            "~",
            "a~1b",
            "/~/",
            "meta.helm.sh/release-name",
        ] {
            let mut path = String::from("/metadata");
            push_segment(&mut path, key);
            let escaped = key.replace('~', "~0").replace('/', "~1");
            assert_eq!(path, format!("/metadata/{escaped}"));
            let value = json!({"metadata": {key: 1}});
            assert_eq!(value.pointer(&path), Some(&json!(1)), "{key:?}");
        }
        let mut path = String::from("/spec/containers");
        push_index(&mut path, 12);
        assert_eq!(path, "/spec/containers/12");
    }

    fn paths(
        api_version: &str,
        kind: &str,
        chart: Value,
        new: Value,
        old: Option<Value>,
    ) -> Vec<String> {
        let schema = schema();
        let root = schema.root_or_deduced(api_version, kind);
        locked_changes(&schema, root, &Tree::from(&chart), &new, old.as_ref(), &[])
            .into_iter()
            .map(|c| c.path)
            .collect()
    }

    fn deployment(containers: Value) -> Value {
        json!({"spec": {"replicas": 2, "template": {"spec": {"containers": containers}}}})
    }

    /// `{}` of a struct inside an atomic value is a value: a NetworkPolicy peer
    /// `{podSelector: {}}` (every pod of the namespace) replaced by `{namespaceSelector: {}}`
    /// (every namespace) opens the database to the cluster.
    #[test]
    fn endpoints_sets_are_put_in_one_order_and_other_kinds_are_left_alone() {
        let ep = |subsets: Value| json!({"subsets": subsets});
        let a = ep(json!([
            {"addresses": [{"ip": "10.0.0.9"}, {"ip": "10.0.0.1"}], "notReadyAddresses": [{"ip": "b"}, {"ip": "a"}],
             "ports": [{"name": "b", "port": 90}, {"name": "a", "port": 80}]},
            {"addresses": [{"ip": "10.1.0.1"}], "ports": [{"name": "a", "port": 81}]}
        ]));
        let b = ep(json!([
            {"addresses": [{"ip": "10.1.0.1"}], "ports": [{"name": "a", "port": 81}]},
            {"ports": [{"port": 80, "name": "a"}, {"name": "b", "port": 90}], "notReadyAddresses": [{"ip": "a"}, {"ip": "b"}],
             "addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.9"}]}
        ]));
        assert_ne!(a, b);
        assert_eq!(
            in_one_order("", "Endpoints", &a),
            in_one_order("", "Endpoints", &b)
        );
        let fewer =
            ep(json!([{"addresses": [{"ip": "10.1.0.1"}], "ports": [{"name": "a", "port": 81}]}]));
        assert_ne!(
            in_one_order("", "Endpoints", &a),
            in_one_order("", "Endpoints", &fewer)
        );
        assert!(matches!(
            in_one_order("", "ConfigMap", &a),
            Cow::Borrowed(_)
        ));
        let chart = chart_in_one_order("", "Endpoints", Cow::Owned(Tree::from(&a)));
        assert_eq!(chart.to_json(), *in_one_order("", "Endpoints", &b));
    }

    #[test]
    fn an_empty_struct_inside_an_atomic_value_is_a_value() {
        let policy = |peer: Value| {
            json!({"spec": {"podSelector": {"matchLabels": {"app": "db"}},
            "ingress": [{"from": [peer]}]}})
        };
        let chart = policy(json!({"podSelector": {}}));
        let opened = paths(
            "networking.k8s.io/v1",
            "NetworkPolicy",
            chart.clone(),
            policy(json!({"namespaceSelector": {}})),
            Some(chart.clone()),
        );
        assert_eq!(opened, ["/spec/ingress"]);
        let same = paths(
            "networking.k8s.io/v1",
            "NetworkPolicy",
            chart.clone(),
            chart.clone(),
            Some(chart.clone()),
        );
        assert!(same.is_empty());
    }

    #[test]
    fn an_atomic_list_is_one_value_adding_a_subject_is_a_change() {
        let chart =
            json!({"subjects": [{"kind": "ServiceAccount", "name": "web", "namespace": "shop"}]});
        let mut new = chart.clone();
        new["subjects"]
            .as_array_mut()
            .unwrap()
            .push(json!({"kind": "User", "name": "mallory"}));
        let changes = paths(
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            chart.clone(),
            new,
            Some(chart.clone()),
        );
        assert_eq!(changes, ["/subjects"]);
        // Same subject, more fields the API server does not add: still a different list.
        let rules =
            json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]});
        let mut more = rules.clone();
        more["rules"][0]["verbs"] = json!(["get", "list"]);
        assert_eq!(
            paths(
                "rbac.authorization.k8s.io/v1",
                "ClusterRole",
                rules.clone(),
                more,
                Some(rules)
            ),
            ["/rules"]
        );
    }

    #[test]
    fn map_lists_own_their_items_by_key_and_what_the_chart_sets_inside() {
        let chart = deployment(
            json!([{"name": "web", "image": "nginx:1.25", "args": ["a"], "env": [{"name": "A", "value": "1"}]}]),
        );
        let live = deployment(json!([
            {"name": "debug", "image": "busybox"},
            {"name": "web", "image": "nginx:1.25", "args": ["a"], "imagePullPolicy": "Always",
             "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]}
        ]));
        assert!(paths("apps/v1", "Deployment", chart.clone(), live.clone(), None).is_empty());
        let mut new = live.clone();
        new["spec"]["template"]["spec"]["containers"][1]["image"] = json!("nginx:1.27");
        new["spec"]["template"]["spec"]["containers"][1]["args"] = json!(["a", "--debug"]);
        new["spec"]["template"]["spec"]["containers"][1]["env"][1]["value"] = json!("9");
        assert_eq!(
            paths(
                "apps/v1",
                "Deployment",
                chart.clone(),
                new,
                Some(live.clone())
            ),
            [
                "/spec/template/spec/containers/1/args",
                "/spec/template/spec/containers/1/env/1/value",
                "/spec/template/spec/containers/1/image"
            ]
        );
        // Removing the chart's container is a change; removing the injected one is not.
        let mut removed = live.clone();
        removed["spec"]["template"]["spec"]["containers"] =
            json!([live["spec"]["template"]["spec"]["containers"][0]]);
        assert_eq!(
            paths(
                "apps/v1",
                "Deployment",
                chart.clone(),
                removed,
                Some(live.clone())
            ),
            ["/spec/template/spec/containers/-"]
        );
        let mut without_debug = live.clone();
        without_debug["spec"]["template"]["spec"]["containers"] =
            json!([live["spec"]["template"]["spec"]["containers"][1]]);
        assert!(paths("apps/v1", "Deployment", chart, without_debug, Some(live)).is_empty());
    }

    #[test]
    fn repeating_a_chart_items_key_shadows_it_and_is_a_change() {
        let chart =
            deployment(json!([{"name": "web", "env": [{"name": "MODE", "value": "safe"}]}]));
        let live = chart.clone();
        let mut shadowed = live.clone();
        shadowed["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "MODE", "value": "debug"}));
        assert_eq!(
            paths(
                "apps/v1",
                "Deployment",
                chart.clone(),
                shadowed.clone(),
                Some(live.clone())
            ),
            ["/spec/template/spec/containers/0/env/1"]
        );
        // Repair removes the shadowing item.
        let schema = schema();
        let root = schema.root_or_deduced("apps/v1", "Deployment");
        let changes = locked_changes(
            &schema,
            root,
            &Tree::from(&chart),
            &shadowed,
            Some(&live),
            &[],
        );
        let mut repaired = shadowed.clone();
        json_patch::patch(&mut repaired, &repair_patch(&changes)).unwrap();
        assert_eq!(repaired, live);
        // Already there before the write: not this write's doing.
        assert!(paths(
            "apps/v1",
            "Deployment",
            chart,
            shadowed.clone(),
            Some(shadowed)
        )
        .is_empty());
    }

    #[test]
    fn through_another_version_every_change_outside_metadata_counts() {
        let schema = schema();
        // The chart writes autoscaling/v2beta2 `metrics`; kubectl edits autoscaling/v1.
        let chart = Tree::from(
            &json!({"metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"minReplicas": 2, "metrics": [{"type": "Resource"}]}}),
        );
        let root = schema.root_or_deduced("autoscaling/v1", "HorizontalPodAutoscaler");
        let old = json!({"metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"minReplicas": 2, "targetCPUUtilizationPercentage": 80}});
        let mut new = old.clone();
        new["spec"]["targetCPUUtilizationPercentage"] = json!(50);
        let changes = cross_version_changes(&schema, root, &chart, &new, Some(&old), &[]);
        assert_eq!(
            changes.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(),
            ["/spec"]
        );
        // Labels are the same in every version: a new one is free, the chart's is locked.
        let mut labelled = old.clone();
        labelled["metadata"]["labels"]["team"] = json!("a");
        assert!(
            cross_version_changes(&schema, root, &chart, &labelled, Some(&old), &[]).is_empty()
        );
        labelled["metadata"]["labels"]["app"] = json!("x");
        let changes = cross_version_changes(&schema, root, &chart, &labelled, Some(&old), &[]);
        assert_eq!(changes[0].path, "/metadata/labels/app");
    }

    #[test]
    fn a_repeated_key_anywhere_is_found_where_the_old_object_had_none() {
        let schema = schema();
        let root = schema.root_or_deduced("v1", "ServiceAccount");
        let old = json!({"metadata": {"name": "sa"}, "secrets": [{"name": "sa-token-1"}]});
        let mut new = old.clone();
        new["secrets"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "sa-token-1"}));
        let found = duplicate_keys(&schema, root, &new, Some(&old));
        assert_eq!(
            found.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(),
            ["/secrets/1"]
        );
        // Already repeated before: not this write's doing. A new distinct item: fine.
        assert!(duplicate_keys(&schema, root, &new, Some(&new)).is_empty());
        let mut other = old.clone();
        other["secrets"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "sa-token-2"}));
        assert!(duplicate_keys(&schema, root, &other, Some(&old)).is_empty());
        // Nested: a repeated env name in a container, and a repeated finalizer (a set).
        let root = schema.root_or_deduced("apps/v1", "Deployment");
        let old = deployment(json!([{"name": "web", "env": [{"name": "A", "value": "1"}]}]));
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "A", "value": "2"}));
        new["metadata"] = json!({"finalizers": ["x", "x"]});
        let found = duplicate_keys(&schema, root, &new, Some(&old));
        assert_eq!(
            found.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(),
            [
                "/metadata/finalizers/1",
                "/spec/template/spec/containers/0/env/1"
            ]
        );
    }

    #[test]
    fn an_empty_struct_is_an_owned_value_but_what_goes_inside_is_free() {
        let chart =
            json!({"spec": {"template": {"spec": {"volumes": [{"name": "tmp", "emptyDir": {}}]}}}});
        let live = chart.clone();
        let mut host = live.clone();
        host["spec"]["template"]["spec"]["volumes"][0] =
            json!({"name": "tmp", "hostPath": {"path": "/"}});
        assert_eq!(
            paths(
                "apps/v1",
                "Deployment",
                chart.clone(),
                host,
                Some(live.clone())
            ),
            ["/spec/template/spec/volumes/0/emptyDir"]
        );
        let mut memory = live.clone();
        memory["spec"]["template"]["spec"]["volumes"][0]["emptyDir"] = json!({"medium": "Memory"});
        assert!(paths("apps/v1", "Deployment", chart, memory, Some(live)).is_empty());
    }

    #[test]
    fn a_null_owns_nothing_and_annotations_stay_free_under_it() {
        let chart = json!({"metadata": {"name": "x", "annotations": null}, "data": {"a": "1"}});
        let new =
            json!({"metadata": {"name": "x", "annotations": {"team": "a"}}, "data": {"a": "1"}});
        assert!(paths("v1", "ConfigMap", chart.clone(), new.clone(), Some(chart)).is_empty());
    }

    #[test]
    fn sets_own_each_item_adding_is_free_removing_is_a_change() {
        let chart = json!({"metadata": {"finalizers": ["example.com/keep"]}});
        let live = json!({"metadata": {"finalizers": ["kubernetes", "example.com/keep"]}});
        assert!(paths(
            "v1",
            "ConfigMap",
            chart.clone(),
            live.clone(),
            Some(json!({"metadata": {"finalizers": ["example.com/keep"]}}))
        )
        .is_empty());
        let removed = json!({"metadata": {"finalizers": ["kubernetes"]}});
        assert_eq!(
            paths("v1", "ConfigMap", chart, removed, Some(live)),
            ["/metadata/finalizers/-"]
        );
    }

    #[test]
    fn atomic_structs_are_one_value() {
        let chart = json!({"spec": {"selector": {"matchLabels": {"app": "web"}}}});
        let mut widened = chart.clone();
        widened["spec"]["selector"]["matchExpressions"] =
            json!([{"key": "tier", "operator": "Exists"}]);
        assert_eq!(
            paths(
                "apps/v1",
                "Deployment",
                chart.clone(),
                widened,
                Some(chart.clone())
            ),
            ["/spec/selector"]
        );
        let policy = json!({"spec": {"podSelector": {"matchLabels": {"app": "db"}}, "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}]}]}});
        let mut opened = policy.clone();
        opened["spec"]["ingress"] = json!([{}]);
        assert_eq!(
            paths(
                "networking.k8s.io/v1",
                "NetworkPolicy",
                policy.clone(),
                opened,
                Some(policy)
            ),
            ["/spec/ingress"]
        );
    }

    #[test]
    fn quantities_compare_canonically_only_where_the_schema_says_quantity() {
        let chart = deployment(
            json!([{"name": "web", "resources": {"limits": {"cpu": "0.5", "memory": "1Gi"}, "requests": {"cpu": 1}}}]),
        );
        let live = deployment(
            json!([{"name": "web", "resources": {"limits": {"cpu": "500m", "memory": "1073741824"}, "requests": {"cpu": "1"}}}]),
        );
        assert!(paths("apps/v1", "Deployment", chart.clone(), live.clone(), None).is_empty());
        let mut changed = live.clone();
        changed["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] =
            json!("600m");
        assert_eq!(
            paths("apps/v1", "Deployment", chart, changed, Some(live)),
            ["/spec/template/spec/containers/0/resources/limits/cpu"]
        );
        // In a ConfigMap "0.5" and "500m" are different strings.
        assert_eq!(
            paths(
                "v1",
                "ConfigMap",
                json!({"data": {"x": "0.5"}}),
                json!({"data": {"x": "500m"}}),
                None
            ),
            ["/data/x"]
        );
    }

    #[test]
    fn string_data_locks_data_and_helm_metadata_is_owned() {
        let schema = schema();
        let chart = Tree::from(
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"password": "hunter2"}}),
        );
        let stored = stored_form(&chart, "", "Secret");
        let root = schema.root_or_deduced("v1", "Secret");
        let helm = ("shop", "prod");
        let locked_changes = |schema: &Schema,
                              root,
                              chart: &Tree,
                              new: &Value,
                              old: Option<&Value>,
                              ignore: &[&str]| {
            let mut changes = super::locked_changes(schema, root, chart, new, old, ignore);
            changes.extend(helm_metadata_changes(chart, helm, new, old, ignore));
            changes
        };
        let applied = stored.into_owned();
        let live = json!({"metadata": {"name": "s", "labels": {MANAGED_BY_LABEL: "Helm"},
            "annotations": {RELEASE_NAME_ANNOTATION: "shop", RELEASE_NAMESPACE_ANNOTATION: "prod"}},
            "data": {"password": "aHVudGVyMg=="}, "type": "Opaque"});
        assert!(locked_changes(&schema, root, &applied, &live, Some(&live), &[]).is_empty());
        let mut edited = live.clone();
        edited["data"]["password"] = json!("b3RoZXI=");
        edited["metadata"]["annotations"][RELEASE_NAME_ANNOTATION] = json!("other");
        let changed: Vec<_> = locked_changes(&schema, root, &applied, &edited, Some(&live), &[])
            .into_iter()
            .map(|c| c.path)
            .collect();
        assert_eq!(
            changed,
            [
                "/data/password",
                "/metadata/annotations/meta.helm.sh~1release-name"
            ]
        );
    }

    #[test]
    fn drift_moving_back_and_unrelated_writes() {
        let chart = json!({"spec": {"replicas": 3, "paused": false}});
        let old = json!({"spec": {"replicas": 5, "paused": false}});
        assert!(paths(
            "apps/v1",
            "Deployment",
            chart.clone(),
            json!({"spec": {"replicas": 5, "paused": false, "x": 1}}),
            Some(old.clone())
        )
        .is_empty());
        assert!(paths(
            "apps/v1",
            "Deployment",
            chart.clone(),
            json!({"spec": {"replicas": 3, "paused": false}}),
            Some(old.clone())
        )
        .is_empty());
        assert_eq!(
            paths(
                "apps/v1",
                "Deployment",
                chart.clone(),
                json!({"spec": {"replicas": 6, "paused": false}}),
                Some(old)
            ),
            ["/spec/replicas"]
        );
        let schema = schema();
        let root = schema.root_or_deduced("apps/v1", "Deployment");
        let drift = drifted_fields(
            &schema,
            root,
            &Tree::from(&chart),
            &json!({"spec": {"replicas": 5}}),
            &[],
        );
        assert_eq!(drift.len(), 2, "{drift:?}");
    }
}
