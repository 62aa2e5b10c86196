//! What the drift reverter writes, decided purely: which locked fields drifted, which field
//! manager Helm used for the object, and the request that puts the chart's values back while
//! leaving Helm the owner of its fields (so the next `helm upgrade` and `helm rollback` do not
//! meet a server-side apply conflict).
//!
//! - Helm 4 applies with server-side apply (`apply_method: ssa`): the revert is a forced apply
//!   of the chart's object **as Helm's own field manager**. Forcing moves the drifted fields
//!   back from whoever changed them to Helm, and Helm's set of fields stays exactly what Helm
//!   applies (the chart's object plus Helm's ownership labels and annotations).
//! - Helm 3 style releases (client-side, `csa` or no apply method) write with Update
//!   operations, which never conflict: the revert is a JSON patch of just the drifted fields,
//!   sent under Helm's manager name, guarded by the object's resourceVersion.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::index::LockedObject;
use crate::ownership::{
    applied_object, drifted_fields, helm_metadata_drift, is_ignored, repair_patch, stored_form,
    Change,
};
use crate::schema::Schema;
use crate::tree::Tree;

/// Helm's ownership metadata (Helm sets these on every object it creates or adopts).
const RELEASE_NAME: &str = "meta.helm.sh/release-name";
const RELEASE_NAMESPACE: &str = "meta.helm.sh/release-namespace";
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// How Helm writes this object, read from its `managedFields`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HelmWriter {
    /// Server-side apply under this field manager (Helm 4: `helm`, or the SDK program's name).
    Apply(String),
    /// Create/update/patch under this field manager (Helm 3 style: `helm`).
    Update(String),
}

impl HelmWriter {
    pub fn manager(&self) -> &str {
        match self {
            HelmWriter::Apply(m) | HelmWriter::Update(m) => m,
        }
    }
}

/// Finds Helm's field manager: the one that owns the `meta.helm.sh/release-name` annotation
/// (Helm writes it with every object), preferring an Apply entry for `ssa` releases. Without
/// managedFields (a deleted object, an old API server), the default names Helm uses.
pub fn helm_writer(live: Option<&Value>, apply_method: Option<&str>) -> HelmWriter {
    let ssa = apply_method == Some("ssa");
    let entries = live
        .and_then(|l| l.pointer("/metadata/managedFields"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let owns_release_annotation = |entry: &&Value| {
        entry
            .pointer("/fieldsV1/f:metadata/f:annotations")
            .and_then(Value::as_object)
            .is_some_and(|a| a.contains_key(&format!("f:{RELEASE_NAME}")))
    };
    let candidates: Vec<(&str, &str)> = entries
        .iter()
        .filter(|e| crate::fields_v1::is_main_resource(e))
        .filter(owns_release_annotation)
        .filter_map(|e| Some((e.get("manager")?.as_str()?, e.get("operation")?.as_str()?)))
        .collect();
    let wanted = if ssa { "Apply" } else { "Update" };
    let found = candidates
        .iter()
        .find(|(_, op)| *op == wanted)
        .or_else(|| candidates.first());
    match found {
        Some((manager, "Apply")) => HelmWriter::Apply(manager.to_string()),
        Some((manager, _)) => HelmWriter::Update(manager.to_string()),
        None if ssa => HelmWriter::Apply("helm".into()),
        None => HelmWriter::Update("helm".into()),
    }
}

/// [`helm_writer`], with Helm's writer as last seen (`known`, from the object's delete) for a
/// server-side release whose live object holds no `Apply` entry of Helm's: a restore by
/// another manager, whose entry would otherwise be taken for Helm's.
pub fn helm_writer_seen(
    live: Option<&Value>,
    apply_method: Option<&str>,
    known: Option<&HelmWriter>,
) -> HelmWriter {
    let applied_by_helm = live.is_some_and(|l| crate::fields_v1::helm_fields(l, None).is_some());
    match known {
        Some(known) if live.is_none() => known.clone(),
        Some(HelmWriter::Apply(m)) if apply_method == Some("ssa") && !applied_by_helm => {
            HelmWriter::Apply(m.clone())
        }
        _ => helm_writer(live, apply_method),
    }
}

/// The chart's object as stored and the live object, each with its unordered sets in one order
/// ([`crate::ownership::in_one_order`]): the reverter hands a writer's share of Helm's fields
/// back ([`ownership_return`]), so another order is never drift.
fn in_one_order<'a>(
    object: &LockedObject,
    content: &'a Tree,
    live: &'a Value,
) -> (std::borrow::Cow<'a, Tree>, std::borrow::Cow<'a, Value>) {
    let (group, kind) = (&*object.group, &*object.kind);
    let chart = stored_form(content, group, kind);
    (
        crate::ownership::chart_in_one_order(group, kind, chart),
        crate::ownership::in_one_order(group, kind, live),
    )
}

/// Locked fields of `live` that differ from the chart, ignoring `ignore` pointers.
pub fn drift(schema: &Schema, object: &LockedObject, live: &Value, ignore: &[&str]) -> Vec<Change> {
    let release = &object.release;
    // A document that does not read on first need locks nothing: nothing drifted.
    let Some(content) = object.readable_content() else {
        return Vec::new();
    };
    let (chart, live) = in_one_order(object, &content, live);
    let root = schema.root_or_deduced(&object.api_version(), &object.kind);
    let mut drift = drifted_fields(schema, root, &chart, &live, ignore);
    let helm = (release.name.as_str(), release.namespace.as_str());
    drift.extend(helm_metadata_drift(&chart, helm, &live, ignore));
    drift
}

/// Every locked value of `live` with the chart's value, equal or not (`kubectl locker why`);
/// those that differ are exactly [`drift`].
pub fn locked_values(
    schema: &Schema,
    object: &LockedObject,
    live: &Value,
    ignore: &[&str],
) -> Vec<crate::ownership::OwnedValue> {
    let release = &object.release;
    let content = object.content();
    let (chart, live) = in_one_order(object, &content, live);
    let root = schema.root_or_deduced(&object.api_version(), &object.kind);
    let mut values = crate::ownership::owned_values(schema, root, &chart, &live, ignore);
    let helm = (release.name.as_str(), release.namespace.as_str());
    values.extend(crate::ownership::helm_metadata_values(
        &chart, helm, &live, ignore,
    ));
    values
}

/// Whether what helm-locker locks in `live` is what the API server attributed to Helm.
///
/// Only a difference between the schema and the API server counts. Drift is not one: an
/// Update that got past the webhook (`kubectl edit`, an HPA through `scale`) takes the fields
/// it changed from Helm's entry, and a field someone removed is no one's. So a locked field
/// missing from Helm's entry is left out of `extra` when another manager owns it (or an atomic
/// value above it), or when the live object lacks it; the reverter's forced apply gives it
/// back to Helm, and the next comparison sees it there. Fields in Helm's entry that are not
/// locked (`missing`) cannot come from drift, and always count.
pub fn attribution(
    schema: &Schema,
    object: &LockedObject,
    live: &Value,
) -> Option<crate::fields_v1::Attribution> {
    let release = &object.release;
    let applied = applied_object(&object.content(), (&release.name, &release.namespace));
    let root = schema.root_or_deduced(&object.api_version(), &object.kind);
    let mut attribution = crate::fields_v1::compare_attribution(schema, root, &applied, live)?;
    if !attribution.extra.is_empty() {
        let others = others_fields(live, &attribution.manager);
        attribution
            .extra
            .retain(|path| !owned_by(&others, path) && field_present(live, path));
    }
    Some(attribution)
}

/// What the managedFields entries but Helm's `Apply` entry (of `helm`) own: every field, and
/// the leaves among them (a scalar, or an atomic value with all inside it).
struct OthersFields {
    all: crate::fields_v1::FieldSet,
    leaves: crate::fields_v1::FieldSet,
}

fn others_fields(live: &Value, helm: &str) -> OthersFields {
    let entries = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut others = OthersFields {
        all: Default::default(),
        leaves: Default::default(),
    };
    for entry in entries {
        let manager = entry.get("manager").and_then(Value::as_str);
        let operation = entry.get("operation").and_then(Value::as_str);
        if manager == Some(helm) && operation == Some("Apply") {
            continue;
        }
        let Some(fields) = entry.get("fieldsV1") else {
            continue;
        };
        let set = crate::fields_v1::parse_fields_v1(fields);
        for path in &set {
            let below = format!("{path}.");
            let parent = set
                .range(below.clone()..)
                .next()
                .is_some_and(|next| next.starts_with(&below));
            if !parent {
                others.leaves.insert(path.clone());
            }
        }
        others.all.extend(set);
    }
    others
}

/// Whether another manager owns `path`, or a leaf above it (an atomic value holding it). A map
/// or an item another manager created (`.`) does not make what Helm put inside it theirs.
fn owned_by(others: &OthersFields, path: &str) -> bool {
    if others.all.contains(path) {
        return true;
    }
    let mut end = 0;
    crate::fields_v1::field_path_elements(path)
        .iter()
        .any(|element| {
            end += element.len() + usize::from(end > 0);
            end < path.len() && others.leaves.contains(&path[..end])
        })
}

/// Whether the live object holds the field at `path`. Unsure (an element it cannot read) is
/// present: a field is discounted only when it is surely gone.
fn field_present(live: &Value, path: &str) -> bool {
    let mut node = live;
    for element in crate::fields_v1::field_path_elements(path) {
        let Some((kind, rest)) = element.split_once(':') else {
            return true;
        };
        let next = match (kind, node) {
            ("f", Value::Object(map)) => map.get(rest),
            ("i", Value::Array(items)) => match rest.parse::<usize>() {
                Ok(i) => items.get(i),
                Err(_) => return true,
            },
            ("v", Value::Array(items)) => match serde_json::from_str::<Value>(rest) {
                Ok(wanted) => items.iter().find(|v| same_value(v, &wanted)),
                Err(_) => return true,
            },
            ("k", Value::Array(items)) => match serde_json::from_str::<Map<String, Value>>(rest) {
                Ok(key) => items.iter().find(|item| {
                    key.iter().all(|(field, wanted)| match item.get(field) {
                        Some(v) => same_value(v, wanted),
                        // Defaulted before server-side apply sees the item.
                        None => field == "protocol" && wanted == "TCP",
                    })
                }),
                Err(_) => return true,
            },
            ("f" | "i" | "v" | "k", _) => None,
            _ => return true,
        };
        match next {
            Some(next) => node = next,
            None => return false,
        }
    }
    true
}

/// JSON equality with `80` and `80.0` one number.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// Whether reverting `drift` would change anything the API server stores, judged by the same
/// write made as a dry run: `after` is the drift left in the API server's answer. Drift the
/// write does not remove is what the API server does not store as the chart writes it and the
/// comparison does not know of (a default it fills in, a zero value of a kind without a
/// schema): reverting it would write the same object after every backoff, forever.
pub fn write_would_fix(drift: &[Change], after: &[Change]) -> bool {
    drift.iter().any(|c| !after.contains(c))
}

/// The drift the write puts back: what differed and the dry run's answer no longer has. The
/// rest (what the API server does not store as the chart writes it) differs before and after
/// every write, and a revert that names it names a path nobody touched.
pub fn fixed_by_write<'c>(drift: &'c [Change], after: &[Change]) -> Vec<&'c Change> {
    drift.iter().filter(|c| !after.contains(c)).collect()
}

/// The paths to hold at what is live for a revision whose author is not known, from the drift
/// seen when the reverter first saw the object under it ([`crate::author::unknown_author_scope`]):
/// each drifted path, cut before its first list index (a list is held whole: its items may be
/// in another order live than in the chart), without repeats. Used as ignore rules, they keep
/// every write to values that were live.
pub fn held_paths(drift: &[Change]) -> Vec<String> {
    let mut held: Vec<String> = Vec::new();
    for change in drift {
        let mut path = String::new();
        for segment in change.path.split('/').skip(1) {
            if segment == "-" || segment.parse::<usize>().is_ok() {
                break;
            }
            path.push('/');
            path.push_str(segment);
        }
        if path.is_empty() {
            // The whole object differs: nothing of it is written.
            return vec!["/*".into()];
        }
        if !held.contains(&path) {
            held.push(path);
        }
    }
    held
}

/// What is held for a revision whose author is not known, from the object as it is live when
/// the reverter first sees it under that revision: [`held_paths`] of the drift with nothing
/// ignored. LockExceptions and ignore rules decide what is reverted, not what was live: a path
/// under an exception open at first sight is held too, so the revision's value is not written
/// once the exception ends.
pub fn held_at_first_sight(schema: &Schema, object: &LockedObject, live: &Value) -> Vec<String> {
    held_paths(&drift(schema, object, live, &[]))
}

/// The field manager of the dry-run creates that ask how a chart's object is stored
/// ([`stored_form_body`]); nothing is ever stored under it.
pub const STORED_FORM_MANAGER: &str = "helm-locker-stored-form";

/// The body of a dry-run create that asks the API server what `object` (the chart's) would be
/// stored as: the chart's object ([`desired_object`], nothing ignored) under a name the API
/// server generates from the object's (`metadata.generateName`), without what names one stored
/// object (resourceVersion, uid) or ties it to others (ownerReferences, finalizers), which a
/// create of another object must not carry.
pub fn stored_form_body(object: &LockedObject) -> Value {
    let mut body = desired_object(object, None, &[]);
    if let Some(metadata) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "name",
            "resourceVersion",
            "uid",
            "ownerReferences",
            "finalizers",
            "managedFields",
            "creationTimestamp",
            "generation",
        ] {
            metadata.remove(field);
        }
        // The API server adds 5 characters; a name stays within 63 for kinds that need it.
        let prefix: String = object.name.chars().take(52).collect();
        metadata.insert("generateName".into(), json!(format!("{prefix}-")));
    }
    body
}

/// The paths (JSON pointers: [`held_paths`], or a [`Change`]'s) where `stored`, what the API
/// server answered the chart's object would be stored as ([`stored_form_body`]), differs from
/// `live`: the others differ only in what the API server fills in or leaves out, and are no
/// drift. Absent and null are alike; `/*` (the whole object) is always kept.
pub fn differing_from_stored(paths: Vec<String>, stored: &Value, live: &Value) -> Vec<String> {
    paths
        .into_iter()
        .filter(|path| {
            if path == "/*" || path.is_empty() || path.starts_with("/metadata/name") {
                return true;
            }
            let at = |v: &Value| v.pointer(path).filter(|v| !v.is_null()).cloned();
            at(stored) != at(live)
        })
        .collect()
}

/// The apply body for a revision whose author is not known ([`held_paths`]): the revision's
/// object ([`desired_object`]) built from the paths that agreed with what was live only. A held
/// path carries the live value, or is left out of the body where nothing is live there (a
/// field the revision sets and the object never had), so a forced server-side apply can write
/// no held value: whatever is written agreed with what was live. `None` when the whole object
/// is held (`/*`): nothing of it is written. `ignore`: the paths left as they are otherwise
/// (LockExceptions, ignore rules), which keep their live value as [`desired_object`] gives it.
pub fn held_object(
    object: &LockedObject,
    live: &Value,
    ignore: &[&str],
    held: &[String],
) -> Option<Value> {
    let held: Vec<&str> = held.iter().map(String::as_str).collect();
    if held.contains(&"/*") || held.contains(&"") {
        return None;
    }
    let mut body = desired_object(object, Some(live), ignore);
    if !held.is_empty() {
        keep_held_live(&mut body, live, &held, &mut String::new());
    }
    Some(body)
}

/// [`held_object`]'s pruning, below `path`: `false` when `node` is to be left out of its parent.
fn keep_held_live(node: &mut Value, live: &Value, held: &[&str], path: &mut String) -> bool {
    if !path.is_empty() && is_ignored(path, held) {
        return match live.pointer(path) {
            Some(value) => {
                *node = value.clone();
                true
            }
            None => false,
        };
    }
    let len = path.len();
    match node {
        Value::Object(map) => {
            map.retain(|key, child| {
                crate::ownership::push_segment(path, key);
                let keep = keep_held_live(child, live, held, path);
                path.truncate(len);
                keep
            });
        }
        Value::Array(items) => {
            let mut whole = true;
            for (i, child) in items.iter_mut().enumerate() {
                path.push('/');
                path.push_str(&i.to_string());
                whole &= keep_held_live(child, live, held, path);
                path.truncate(len);
            }
            if !whole {
                // An item held and not live (held paths stop before list indexes, so only a
                // pattern gets here): the list is what is live, or is left out.
                match live.pointer(path) {
                    Some(value) => *node = value.clone(),
                    None => return false,
                }
            }
        }
        _ => {}
    }
    true
}

/// For a revision whose author is not known: the paths where the API server's answer to the
/// reverter's dry-run write (`after`) differs from the object as it is (`live`) outside what
/// the write puts back (`changes`). Empty when the write changes nothing but the drift, as the
/// rule demands; anything else (a held field written, a field the revision leaves out that a
/// server-side apply would drop, a default the write brings) refuses the write. What the API
/// server keeps for itself (`managedFields`, `resourceVersion`, `generation`, a DaemonSet's
/// `deprecated.daemonset.template.generation`, which it counts up with every change of the pod
/// template, `status`) is not compared.
pub fn written_beyond_drift(live: &Value, after: &Value, changes: &[Change]) -> Vec<String> {
    let mut differ = Vec::new();
    changed_paths(live, after, &mut String::new(), &mut differ);
    const SERVERS: [&str; 5] = [
        "/metadata/managedFields",
        "/metadata/resourceVersion",
        "/metadata/generation",
        "/metadata/annotations/deprecated.daemonset.template.generation",
        "/status",
    ];
    differ.retain(|path| {
        !SERVERS.iter().any(|s| within(path, s))
            && !changes
                .iter()
                .any(|c| within(path, &c.path) || within(&c.path, path))
    });
    differ
}

/// For a revision whose author is not known: `body` (the apply body, [`held_object`]) given
/// back what is live wherever the dry run of its write changed more than the drift
/// ([`written_beyond_drift`]): each such path, cut before its first list index (the list is
/// taken whole), carries the live value, or is left out of the body where nothing is live. A
/// server-side apply drops a field its manager applied before and the body leaves out: the
/// revision's omissions are held this way too.
pub fn hold_beyond_drift(body: &mut Value, live: &Value, beyond: &[String]) {
    for path in held_paths(
        &beyond
            .iter()
            .map(|p| Change {
                path: p.clone(),
                chart: Value::Null,
                requested: None,
            })
            .collect::<Vec<_>>(),
    ) {
        match live.pointer(&path) {
            Some(value) => set_pointer(body, &path, value.clone()),
            None => remove_pointer(body, &path),
        }
    }
}

fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

/// Sets `path` (of object members only) in `node` to `value`, making the objects above it.
fn set_pointer(node: &mut Value, path: &str, value: Value) {
    let mut node = node;
    let segments: Vec<String> = path.split('/').skip(1).map(unescape).collect();
    let Some((last, parents)) = segments.split_last() else {
        return;
    };
    for segment in parents {
        if !node.is_object() {
            *node = Value::Object(Map::new());
        }
        node = node
            .as_object_mut()
            .expect("an object")
            .entry(segment.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !node.is_object() {
        *node = Value::Object(Map::new());
    }
    node.as_object_mut()
        .expect("an object")
        .insert(last.clone(), value);
}

/// Removes `path` (of object members only) from `node`, if it is there.
fn remove_pointer(node: &mut Value, path: &str) {
    let Some((parent, last)) = path.rsplit_once('/') else {
        return;
    };
    if let Some(Value::Object(map)) = node.pointer_mut(parent) {
        map.remove(&unescape(last));
    }
}

/// Whether pointer `path` is `prefix` or below it.
fn within(path: &str, prefix: &str) -> bool {
    path == prefix || (path.starts_with(prefix) && path.as_bytes().get(prefix.len()) == Some(&b'/'))
}

/// The pointers where `a` and `b` differ: the deepest object member, a list whose length
/// differs (or each differing item of lists of one length), a scalar.
fn changed_paths(a: &Value, b: &Value, path: &mut String, out: &mut Vec<String>) {
    let len = path.len();
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                crate::ownership::push_segment(path, key);
                match (x.get(key), y.get(key)) {
                    (Some(l), Some(r)) => changed_paths(l, r, path, out),
                    _ => out.push(path.clone()),
                }
                path.truncate(len);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (l, r)) in x.iter().zip(y).enumerate() {
                path.push('/');
                path.push_str(&i.to_string());
                changed_paths(l, r, path, out);
                path.truncate(len);
            }
        }
        _ if a == b => {}
        _ => out.push(path.clone()),
    }
}

/// Whether a deleted object is created again. Not when the chart gives it owners
/// (`metadata.ownerReferences`): the garbage collector deletes it with its owner, and an
/// object created again under a missing owner would only be collected again.
pub fn recreate_when_deleted(object: &LockedObject) -> bool {
    object
        .content()
        .pointer("/metadata/ownerReferences")
        .is_none_or(Tree::is_empty_value)
}

/// The object as Helm would send it: the chart's content with its identity and Helm's
/// ownership metadata. Ignored fields carry the live value, so reverting never moves them.
pub fn desired_object(object: &LockedObject, live: Option<&Value>, ignore: &[&str]) -> Value {
    let mut body = object.content().to_json();
    if !body.is_object() {
        body = Value::Object(Map::new());
    }
    let map = body.as_object_mut().expect("an object");
    map.insert("apiVersion".into(), json!(object.api_version()));
    map.insert("kind".into(), json!(object.kind));
    map.remove("status");
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    let metadata = metadata.as_object_mut().expect("an object");
    metadata.insert("name".into(), json!(object.name));
    match &object.namespace {
        Some(ns) => {
            metadata.insert("namespace".into(), json!(ns));
        }
        None => {
            metadata.remove("namespace");
        }
    }
    for (field, key, value) in [
        ("annotations", RELEASE_NAME, object.release.name.as_str()),
        (
            "annotations",
            RELEASE_NAMESPACE,
            object.release.namespace.as_str(),
        ),
        ("labels", MANAGED_BY, "Helm"),
    ] {
        let entry = metadata
            .entry(field)
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        entry
            .as_object_mut()
            .expect("an object")
            .entry(key)
            .or_insert_with(|| json!(value));
    }
    if !ignore.is_empty() {
        if let Some(live) = live {
            keep_live_values(&mut body, live, ignore, &mut String::new());
        }
    }
    body
}

fn keep_live_values(node: &mut Value, live: &Value, ignore: &[&str], path: &mut String) {
    if !path.is_empty() && is_ignored(path, ignore) {
        if let Some(value) = live.pointer(path) {
            *node = value.clone();
        }
        return;
    }
    let len = path.len();
    match node {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                crate::ownership::push_segment(path, key);
                keep_live_values(child, live, ignore, path);
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter_mut().enumerate() {
                path.push('/');
                path.push_str(&i.to_string());
                keep_live_values(child, live, ignore, path);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// The JSON patch that puts drifted fields back (client-side releases), failing if the object
/// changed since it was read.
pub fn revert_patch(changes: &[Change], resource_version: Option<&str>) -> json_patch::Patch {
    let mut ops = Vec::new();
    if let Some(rv) = resource_version {
        ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}));
    }
    let repair = serde_json::to_value(repair_patch(changes)).unwrap_or_else(|_| json!([]));
    ops.extend(repair.as_array().cloned().unwrap_or_default());
    serde_json::from_value(Value::Array(ops)).unwrap_or_else(|_| json_patch::Patch(vec![]))
}

/// `/spec/replicas, /data/greeting` (at most 10, then a count).
pub fn describe_paths<'c>(changes: impl IntoIterator<Item = &'c Change>) -> String {
    const MAX: usize = 10;
    let paths: Vec<&str> = changes.into_iter().map(|c| c.path.as_str()).collect();
    let mut text = paths
        .iter()
        .take(MAX)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > MAX {
        text.push_str(&format!(" and {} more", paths.len() - MAX));
    }
    text
}

/// Per-object backoff: the first revert is immediate; an object that drifts again soon after
/// waits 1 s, 2 s, 4 s... up to `max`, so a fight with another controller costs little. An
/// object quiet for `reset` starts over.
#[derive(Debug)]
pub struct Backoff<K> {
    entries: HashMap<K, (u32, Instant)>,
    pub base: Duration,
    pub max: Duration,
    pub reset: Duration,
}

impl<K: Hash + Eq + Clone> Backoff<K> {
    pub fn new(base: Duration, max: Duration, reset: Duration) -> Self {
        Backoff {
            entries: HashMap::new(),
            base,
            max,
            reset,
        }
    }

    /// How long to wait before reverting `key` now; records the attempt.
    pub fn next_delay(&mut self, key: &K, now: Instant) -> Duration {
        let entry = self.entries.entry(key.clone()).or_insert((0, now));
        if now.saturating_duration_since(entry.1) > self.reset {
            entry.0 = 0;
        }
        let attempts = entry.0;
        entry.0 = attempts.saturating_add(1);
        entry.1 = now;
        if attempts == 0 {
            return Duration::ZERO;
        }
        self.base
            .saturating_mul(1u32 << (attempts - 1).min(20))
            .min(self.max)
    }

    /// Forgets objects quiet for longer than `reset`.
    pub fn prune(&mut self, now: Instant) {
        let reset = self.reset;
        self.entries
            .retain(|_, (_, last)| now.saturating_duration_since(*last) <= reset);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Fields of the chart that another field manager co-owns with Helm, holding the chart's
/// values: a restore by `kubectl apply` of what Helm wrote, or an exempt user's write of the
/// same value. Server-side apply shares a field whose value two managers agree on, and Helm's
/// next upgrade that changes it then fails with a conflict; forcing an apply of the same
/// values does not take it back. The API server keeps a request's `managedFields` as sent, so
/// the reverter hands them back by writing the entries themselves ([`OwnershipReturn::patch`]),
/// as `kubectl`'s client-side-to-server-side upgrade does.
#[derive(Debug, PartialEq)]
pub struct OwnershipReturn {
    /// Each other manager, with the fields (described as JSON pointers) handed back to Helm.
    pub taken: Vec<(String, Vec<String>)>,
    /// The object's `managedFields` after the return.
    pub managed_fields: Value,
}

impl OwnershipReturn {
    /// A JSON patch that writes the returned `managedFields`, guarded by `resource_version`.
    pub fn patch(&self, resource_version: Option<&str>) -> json_patch::Patch {
        let mut ops = Vec::new();
        if let Some(rv) = resource_version {
            ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}));
        }
        ops.push(json!({"op": "replace", "path": "/metadata/managedFields", "value": self.managed_fields}));
        serde_json::from_value(Value::Array(ops)).unwrap_or_else(|_| json_patch::Patch(vec![]))
    }

    /// `kubectl-client-side-apply (/data/greeting, /spec/replicas)`, for logs and Events.
    pub fn describe(&self) -> String {
        self.taken
            .iter()
            .map(|(manager, paths)| format!("{manager} ({})", paths.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// What to hand back to Helm's `Apply` entry of `helm` on `live`, which has no drift: every
/// field of the chart (less `ignore`) that another entry of the object itself claims (an entry
/// of Helm's is made when there is none). `None` when nothing is co-owned.
pub fn ownership_return(
    schema: &Schema,
    object: &LockedObject,
    live: &Value,
    helm: &str,
    ignore: &[&str],
) -> Option<OwnershipReturn> {
    let mut entries = live.pointer("/metadata/managedFields")?.as_array()?.clone();
    let helm_entry = entries.iter().position(|e| {
        e.get("manager").and_then(Value::as_str) == Some(helm)
            && e.get("operation").and_then(Value::as_str) == Some("Apply")
            && crate::fields_v1::is_main_resource(e)
    });
    // A restore made by another manager alone has no entry of Helm's yet.
    let helm_entry = helm_entry.unwrap_or_else(|| {
        entries.push(json!({"manager": helm, "operation": "Apply",
            "apiVersion": object.api_version(), "fieldsType": "FieldsV1", "fieldsV1": {}}));
        entries.len() - 1
    });
    let content = object.content();
    let chart = stored_form(&content, &object.group, &object.kind);
    let root = schema.root_or_deduced(&object.api_version(), &object.kind);
    let release = (
        object.release.name.as_str(),
        object.release.namespace.as_str(),
    );
    let mut taken = Vec::new();
    let mut returned = crate::fields_v1::FieldSet::new();
    for (i, entry) in entries.iter_mut().enumerate() {
        // A `scale` entry (1.22 on) holds the replicas in the object's own paths, and Helm's
        // apply conflicts with it as with any other (`conflict with "scaler" with subresource
        // "scale": .spec.replicas`, measured on 1.36.2): handed back like the others.
        let scale = entry.get("subresource").and_then(Value::as_str) == Some("scale");
        if i == helm_entry || !(crate::fields_v1::is_main_resource(entry) || scale) {
            continue;
        }
        let Some(fields) = entry.get_mut("fieldsV1") else {
            continue;
        };
        let claimed = crate::fields_v1::parse_fields_v1(fields);
        let shared: crate::fields_v1::FieldSet = crate::fields_v1::co_owned_paths(
            schema,
            root,
            &chart,
            release,
            &claimed,
            &Default::default(),
        )
        .into_iter()
        .filter(|p| !is_ignored(&crate::fields_v1::describe_field_path(p), ignore))
        .collect();
        if shared.is_empty() || !crate::fields_v1::remove_paths(fields, &shared) {
            continue;
        }
        let manager = entry.get("manager").and_then(Value::as_str).unwrap_or("");
        taken.push((
            manager.to_string(),
            shared
                .iter()
                .map(|p| crate::fields_v1::describe_field_path(p))
                .collect(),
        ));
        returned.extend(shared);
    }
    if taken.is_empty() {
        return None;
    }
    if let Some(fields) = entries[helm_entry].get_mut("fieldsV1") {
        crate::fields_v1::insert_paths(fields, &returned);
    }
    // An entry left owning nothing is dropped (the API server drops empty entries itself).
    entries.retain(|e| {
        e.get("fieldsV1")
            .and_then(Value::as_object)
            .is_none_or(|f| !f.is_empty())
    });
    Some(OwnershipReturn {
        taken,
        managed_fields: Value::Array(entries),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_paths_keep_lists_whole_and_name_each_place_once() {
        let change = |path: &str| Change {
            path: path.into(),
            chart: json!(1),
            requested: Some(json!(2)),
        };
        let drift = [
            change("/data/setting"),
            change("/spec/template/spec/containers/0/image"),
            change("/spec/template/spec/containers/1/env/0/value"),
            change("/subjects/-"),
            change("/metadata/labels/tier"),
        ];
        assert_eq!(
            held_paths(&drift),
            [
                "/data/setting",
                "/spec/template/spec/containers",
                "/subjects",
                "/metadata/labels/tier"
            ]
        );
        assert!(held_paths(&[]).is_empty());
        assert_eq!(held_paths(&[change("/0")]), ["/*"]);
    }
    use crate::index::{Index, ReleaseKey};
    use crate::release::Status;

    use std::sync::Arc;

    const CHART: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {app: web}\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n        resources: {limits: {cpu: \"0.5\"}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {greeting: hello, mode: prod}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: reader}\nrules:\n- apiGroups: [\"\"]\n  resources: [pods]\n  verbs: [get]\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dependent\n  ownerReferences:\n  - {apiVersion: v1, kind: ConfigMap, name: anchor, uid: 1234}\ndata: {note: owned}\n";

    fn objects() -> Vec<Arc<LockedObject>> {
        let mut secret =
            crate::test_util::release_secret("shop", "shop", 1, Status::Deployed, CHART);
        secret.release.apply_method = Some("ssa".into());
        let index = Index::from_secrets([secret]);
        let state = index.release(&ReleaseKey::new("shop", "shop")).unwrap();
        state.objects.clone().unwrap()
    }

    fn live_deployment(replicas: i64, image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "42",
                "labels": {"app": "web", "app.kubernetes.io/managed-by": "Helm"},
                "annotations": {"meta.helm.sh/release-name": "shop", "meta.helm.sh/release-namespace": "shop", "deployment.kubernetes.io/revision": "2"},
                "managedFields": [
                    {"manager": "python", "operation": "Apply", "apiVersion": "apps/v1",
                     "fieldsV1": {"f:metadata": {"f:annotations": {"f:meta.helm.sh/release-name": {}, "f:meta.helm.sh/release-namespace": {}}}, "f:spec": {"f:replicas": {}}}},
                    {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1", "subresource": "status",
                     "fieldsV1": {"f:status": {"f:replicas": {}}}},
                    {"manager": "kubectl-patch", "operation": "Update", "apiVersion": "apps/v1",
                     "fieldsV1": {"f:spec": {"f:replicas": {}}}}
                ]},
            "spec": {"replicas": replicas, "strategy": {"type": "RollingUpdate"},
                "template": {"spec": {"containers": [{"name": "web", "image": image, "resources": {"limits": {"cpu": "500m"}}, "terminationMessagePath": "/dev/termination-log"}]}}},
            "status": {"replicas": 0}})
    }

    /// A `kubectl apply` restore of what Helm wrote: the restorer co-owns the chart's fields, and
    /// they go back to Helm's entry; what is only the restorer's stays, an entry of a
    /// subresource is not touched, and an ignored path stays shared.
    #[test]
    fn co_owned_chart_fields_are_handed_back_to_helms_entry() {
        let objects = objects();
        let cfg = &objects[1];
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": "shop", "resourceVersion": "7",
                "labels": {"app.kubernetes.io/managed-by": "Helm"},
                "annotations": {"meta.helm.sh/release-name": "shop", "meta.helm.sh/release-namespace": "shop",
                                "kubectl.kubernetes.io/last-applied-configuration": "{}"},
                "managedFields": [
                    {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
                     "fieldsV1": {"f:data": {".": {}, "f:greeting": {}, "f:mode": {}},
                                  "f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {},
                                                                   "f:meta.helm.sh/release-name": {}, "f:meta.helm.sh/release-namespace": {}},
                                                 "f:labels": {".": {}, "f:app.kubernetes.io/managed-by": {}}}}},
                    {"manager": "helm", "operation": "Apply", "apiVersion": "v1",
                     "fieldsV1": {"f:data": {"f:greeting": {}}}},
                    {"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "subresource": "status",
                     "fieldsV1": {"f:data": {"f:mode": {}}}}
                ]},
            "data": {"greeting": "hello", "mode": "prod"}});
        assert!(drift(&Schema::builtin(), cfg, &live, &[]).is_empty());
        let back =
            ownership_return(&Schema::builtin(), cfg, &live, "helm", &["/data/mode"]).unwrap();
        assert_eq!(back.taken.len(), 1);
        let (manager, paths) = &back.taken[0];
        assert_eq!(manager, "kubectl-client-side-apply");
        assert!(paths.contains(&"/data/greeting".to_string()), "{paths:?}");
        assert!(
            paths.contains(&"/metadata/annotations/meta.helm.sh~1release-name".to_string()),
            "{paths:?}"
        );
        assert!(
            !paths
                .iter()
                .any(|p| p.contains("mode") || p.contains("last-applied")),
            "{paths:?}"
        );
        let entries = back.managed_fields.as_array().unwrap();
        let fields = |i: usize| crate::fields_v1::parse_fields_v1(&entries[i]["fieldsV1"]);
        let restorer = fields(0);
        assert!(restorer.contains("f:data.f:mode"));
        assert!(restorer.contains(
            "f:metadata.f:annotations.f:kubectl.kubernetes.io/last-applied-configuration"
        ));
        assert!(!restorer.contains("f:data.f:greeting"));
        let helm = fields(1);
        assert!(helm.contains("f:data.f:greeting"));
        assert!(helm.contains("f:metadata.f:labels.f:app.kubernetes.io/managed-by"));
        assert_eq!(
            entries[2], live["metadata"]["managedFields"][2],
            "a subresource's entry changed"
        );
        // The patch writes exactly those entries, if the object is still the one read.
        let patch = serde_json::to_value(back.patch(Some("7"))).unwrap();
        assert_eq!(
            patch[0],
            json!({"op": "test", "path": "/metadata/resourceVersion", "value": "7"})
        );
        assert_eq!(patch[1]["value"], back.managed_fields);
        // Handed back, nothing is left to hand back; without Helm's Apply entry, nowhere to.
        let mut after = live.clone();
        after["metadata"]["managedFields"] = back.managed_fields.clone();
        assert_eq!(
            ownership_return(&Schema::builtin(), cfg, &after, "helm", &["/data/mode"]),
            None
        );
        // A restore by another manager alone: Helm's entry is made.
        let back = ownership_return(&Schema::builtin(), cfg, &live, "python", &[]).unwrap();
        let python = back.managed_fields.as_array().unwrap().last().unwrap();
        assert_eq!(
            (
                &python["manager"],
                &python["operation"],
                &python["apiVersion"]
            ),
            (&json!("python"), &json!("Apply"), &json!("v1"))
        );
        assert!(
            crate::fields_v1::parse_fields_v1(&python["fieldsV1"]).contains("f:data.f:greeting")
        );
        // Helm's writer of such a restore is the one last seen, not the restorer.
        let restored =
            json!({"metadata": {"managedFields": [live["metadata"]["managedFields"][0].clone()]}});
        let seen = HelmWriter::Apply("python".into());
        assert_eq!(
            helm_writer_seen(Some(&restored), Some("ssa"), Some(&seen)),
            seen
        );
        assert_eq!(
            helm_writer_seen(Some(&after), Some("ssa"), Some(&seen)),
            HelmWriter::Apply("helm".into())
        );
        assert_eq!(helm_writer_seen(None, Some("ssa"), Some(&seen)), seen);
        assert_eq!(
            helm_writer_seen(Some(&restored), None, Some(&seen)),
            HelmWriter::Update("kubectl-client-side-apply".into())
        );
        // A restorer that owns only chart fields has no entry left.
        let mut only_chart = live.clone();
        only_chart["metadata"]["managedFields"][0]["fieldsV1"] =
            json!({"f:data": {"f:greeting": {}}});
        let back = ownership_return(&Schema::builtin(), cfg, &only_chart, "helm", &[]).unwrap();
        assert_eq!(back.managed_fields.as_array().unwrap().len(), 2);
        assert_eq!(back.managed_fields[0]["manager"], "helm");
    }

    /// A writer rule's scaler wrote the replicas through `/scale`: its entry (of the `scale`
    /// subresource) is handed back like another manager's, or Helm's next apply conflicts with
    /// it; ignored (an autoscaler's), it stays the scaler's.
    #[test]
    fn replicas_a_scale_entry_holds_are_handed_back_unless_ignored() {
        let objects = objects();
        let deploy = &objects[0];
        let mut live = live_deployment(7, "nginx:1.25");
        live["metadata"]["managedFields"] = json!([
            {"manager": "helm", "operation": "Apply", "apiVersion": "apps/v1",
             "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {"f:image": {}}}}}}}},
            {"manager": "scaler", "operation": "Update", "apiVersion": "apps/v1", "subresource": "scale",
             "fieldsV1": {"f:spec": {"f:replicas": {}}}}
        ]);
        let back = ownership_return(&Schema::builtin(), deploy, &live, "helm", &[]).unwrap();
        assert_eq!(
            back.taken,
            [("scaler".to_string(), vec!["/spec/replicas".to_string()])]
        );
        let entries = back.managed_fields.as_array().unwrap();
        assert!(crate::fields_v1::parse_fields_v1(&entries[0]["fieldsV1"])
            .contains("f:spec.f:replicas"));
        assert_eq!(
            entries.len(),
            1,
            "the scaler's emptied entry is left: {entries:?}"
        );
        assert_eq!(
            ownership_return(
                &Schema::builtin(),
                deploy,
                &live,
                "helm",
                &["/spec/replicas"]
            ),
            None
        );
    }

    #[test]
    fn locked_values_are_every_locked_value_and_those_that_differ_are_the_drift() {
        let objects = objects();
        let deploy = &objects[0];
        let live = live_deployment(7, "nginx:1.25");
        let values = locked_values(&Schema::builtin(), deploy, &live, &[]);
        let differing: Vec<_> = values
            .iter()
            .filter(|v| v.differs)
            .map(|v| &v.path)
            .collect();
        let drifted: Vec<_> = drift(&Schema::builtin(), deploy, &live, &[])
            .into_iter()
            .map(|c| c.path)
            .collect();
        assert_eq!(differing, drifted.iter().collect::<Vec<_>>());
        let at = |path: &str| values.iter().find(|v| v.path == path).unwrap();
        assert_eq!(at("/spec/replicas").chart, json!(3));
        assert_eq!(at("/spec/replicas").live, Some(json!(7)));
        // Equal as the API server stores it: "0.5" in the chart is 500m live.
        let cpu = at("/spec/template/spec/containers/0/resources/limits/cpu");
        assert_eq!((cpu.chart.clone(), cpu.differs), (json!("0.5"), false));
        assert_eq!(cpu.live, Some(json!("500m")));
        assert!(!at("/metadata/annotations/meta.helm.sh~1release-name").differs);
        // A set's items are found where they are in the live list.
        let role = &objects[2];
        let live_role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
        let values = locked_values(&Schema::builtin(), role, &live_role, &[]);
        let rules: Vec<_> = values
            .iter()
            .filter(|v| v.path.starts_with("/rules"))
            .collect();
        assert!(
            !rules.is_empty() && rules.iter().all(|v| !v.differs),
            "{rules:?}"
        );
        // Helm's release annotations are missing from this live object: locked, and differing.
        assert!(values
            .iter()
            .any(|v| v.path == "/metadata/annotations/meta.helm.sh~1release-name" && v.differs));
    }

    #[test]
    fn drift_is_every_locked_difference_and_server_defaults_are_not_drift() {
        let objects = objects();
        let deploy = &objects[0];
        assert!(drift(
            &Schema::builtin(),
            deploy,
            &live_deployment(3, "nginx:1.25"),
            &[]
        )
        .is_empty());
        let changes = drift(
            &Schema::builtin(),
            deploy,
            &live_deployment(7, "nginx:1.27"),
            &[],
        );
        let paths: Vec<_> = changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(
            paths,
            ["/spec/replicas", "/spec/template/spec/containers/0/image"]
        );
        assert_eq!(
            describe_paths(&changes),
            "/spec/replicas, /spec/template/spec/containers/0/image"
        );
        // A removed locked field is drift too (admission would not see it as a change
        // without an old value).
        let cm = &objects[1];
        let removed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "shop"}, "data": {"greeting": "hello"}});
        assert_eq!(
            drift(&Schema::builtin(), cm, &removed, &[])[0].path,
            "/data/mode"
        );
        // Ignored paths are left alone.
        assert!(drift(
            &Schema::builtin(),
            deploy,
            &live_deployment(7, "nginx:1.25"),
            &["/spec/replicas"]
        )
        .is_empty());
    }

    #[test]
    fn helm_writer_is_the_manager_of_the_release_annotation() {
        let live = live_deployment(7, "nginx:1.25");
        assert_eq!(
            helm_writer(Some(&live), Some("ssa")),
            HelmWriter::Apply("python".into())
        );
        let csa = json!({"metadata": {"managedFields": [
            {"manager": "kubectl-edit", "operation": "Update", "fieldsV1": {"f:spec": {}}},
            {"manager": "helm", "operation": "Update", "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, "f:meta.helm.sh/release-name": {}}}}}
        ]}});
        assert_eq!(
            helm_writer(Some(&csa), None),
            HelmWriter::Update("helm".into())
        );
        assert_eq!(
            helm_writer(None, Some("ssa")),
            HelmWriter::Apply("helm".into())
        );
        assert_eq!(
            helm_writer(None, Some("csa")),
            HelmWriter::Update("helm".into())
        );
    }

    #[test]
    fn drift_a_write_leaves_in_place_is_not_worth_writing() {
        let deploy = &objects()[0];
        let mut live = live_deployment(3, "nginx:1.25");
        assert!(drift(&Schema::builtin(), deploy, &live, &[]).is_empty());
        // The chart says `hostNetwork: false`; the API server stores no false (omitempty), and
        // the comparison knows it.
        let chart_with_zero = {
            let mut content = deploy.content().to_json();
            content["spec"]["template"]["spec"]["hostNetwork"] = json!(false);
            // (Canonical already: compared schema-less below.)
            content["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] =
                json!("500m");
            Tree::from(&content)
        };
        let schema = Schema::builtin();
        let root = schema.root_or_deduced("apps/v1", "Deployment");
        let drifted = |schema: &Schema, root, live: &Value| {
            crate::ownership::drifted_fields(schema, root, &chart_with_zero, live, &[])
        };
        assert!(drifted(&schema, root, &live).is_empty());
        // Where it does not (no schema for the kind), the dry run of the revert answers the
        // same object: nothing to fix.
        let unknown = Schema::empty();
        let unknown_root = unknown.root_or_deduced("apps/v1", "Deployment");
        // (Its lists are atomic: without the default the API server filled in.)
        live["spec"]["template"]["spec"]["containers"][0]
            .as_object_mut()
            .unwrap()
            .remove("terminationMessagePath");
        let zero = drifted(&unknown, unknown_root, &live);
        assert_eq!(zero.len(), 1);
        assert!(!write_would_fix(&zero, &zero));
        // Real drift next to it: the write fixes that.
        live["spec"]["replicas"] = json!(7);
        let both = drifted(&unknown, unknown_root, &live);
        assert_eq!(both.len(), 2);
        assert!(write_would_fix(&both, &zero));
        // And a user setting the field to true is drift the write fixes, under either schema.
        live["spec"]["replicas"] = json!(3);
        live["spec"]["template"]["spec"]["hostNetwork"] = json!(true);
        assert!(write_would_fix(
            &drifted(&unknown, unknown_root, &live),
            &zero
        ));
        assert_eq!(
            describe_paths(&drifted(&schema, root, &live)),
            "/spec/template/spec/hostNetwork"
        );
    }

    #[test]
    fn objects_with_owners_are_left_to_the_garbage_collector() {
        let objects = objects();
        let named = |name: &str| objects.iter().find(|o| &*o.name == name).unwrap();
        assert!(recreate_when_deleted(named("web")));
        assert!(recreate_when_deleted(named("reader")));
        assert!(!recreate_when_deleted(named("dependent")));
    }

    /// An unknown author's Deployment: the revision sets `hostNetwork`, a privileged
    /// container and 3 replicas; what is live has none of the first two.
    const HELD_CHART: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n  template:\n    spec:\n      hostNetwork: true\n      containers:\n      - name: web\n        image: nginx:1.25\n        securityContext: {privileged: true}\n";

    fn held_deployment() -> Arc<LockedObject> {
        let secret =
            crate::test_util::release_secret("shop", "shop", 2, Status::Deployed, HELD_CHART);
        let index = Index::from_secrets([secret]);
        let state = index.release(&ReleaseKey::new("shop", "shop")).unwrap();
        state.objects.clone().unwrap()[0].clone()
    }

    fn live_web(replicas: i64, privileged: Option<bool>) -> Value {
        let mut container = json!({"name": "web", "image": "nginx:1.25"});
        if let Some(p) = privileged {
            container["securityContext"] = json!({"privileged": p});
        }
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "9",
                "labels": {"app.kubernetes.io/managed-by": "Helm"},
                "annotations": {"meta.helm.sh/release-name": "shop", "meta.helm.sh/release-namespace": "shop"}},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [container]}}}})
    }

    /// Every held path of `body` carries what `first_sight` had there, or is absent.
    fn writes_only_what_was_live(body: &Value, first_sight: &Value, held: &[String]) {
        for path in held {
            if let Some(written) = body.pointer(path) {
                assert_eq!(Some(written), first_sight.pointer(path), "{path}");
            }
        }
    }

    #[test]
    fn a_field_the_revision_sets_and_live_never_had_is_left_out_of_the_apply_body() {
        let object = held_deployment();
        let first_sight = live_web(3, None);
        let held = held_at_first_sight(&Schema::builtin(), &object, &first_sight);
        assert!(
            held.contains(&"/spec/template/spec/hostNetwork".to_string()),
            "{held:?}"
        );
        // Control: the revision's own body writes it.
        let whole = desired_object(&object, Some(&first_sight), &[]);
        assert_eq!(whole["spec"]["template"]["spec"]["hostNetwork"], true);
        // Then drift of a field that agreed: it is put back, nothing held is written.
        let drifted = live_web(7, None);
        let body = held_object(&object, &drifted, &[], &held).unwrap();
        assert!(body["spec"]["template"]["spec"]
            .get("hostNetwork")
            .is_none());
        assert_eq!(body["spec"]["replicas"], 3);
        assert_eq!(body["metadata"]["annotations"][RELEASE_NAME], "shop");
        writes_only_what_was_live(&body, &first_sight, &held);
    }

    /// A node-exporter DaemonSet of an unknown author, live as the API server stored it right
    /// after its install: its `hostIPC: false`, probe `initialDelaySeconds: 0` and env
    /// `value: ""` are not stored, and are not held; a later change of a container's memory
    /// limit is drift, and reverted.
    #[test]
    fn an_unknown_authors_object_as_the_api_server_stored_it_holds_nothing() {
        const CHART: &str = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: ne}\nspec:\n  selector: {matchLabels: {app: ne}}\n  template:\n    metadata: {labels: {app: ne}}\n    spec:\n      hostIPC: false\n      hostNetwork: true\n      containers:\n      - name: node-exporter\n        image: node-exporter:v1.8.2\n        args: [--path.procfs=/host/proc]\n        env: [{name: EMPTY, value: \"\"}]\n        ports: [{name: metrics, containerPort: 9100}]\n        livenessProbe: {httpGet: {path: /, port: 9100}, initialDelaySeconds: 0}\n        resources: {limits: {memory: 64Mi}}\n";
        let secret = crate::test_util::release_secret("mon", "ne", 1, Status::Deployed, CHART);
        let index = Index::from_secrets([secret]);
        let object = index
            .release(&ReleaseKey::new("mon", "ne"))
            .unwrap()
            .objects
            .clone()
            .unwrap()[0]
            .clone();
        // As kube-apiserver 1.36.2 stores it (dry run of the chart's object).
        let mut live = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "ne", "namespace": "mon",
                "labels": {"app.kubernetes.io/managed-by": "Helm"},
                "annotations": {"meta.helm.sh/release-name": "ne", "meta.helm.sh/release-namespace": "mon"}},
            "spec": {"revisionHistoryLimit": 10, "selector": {"matchLabels": {"app": "ne"}},
                "template": {"metadata": {"labels": {"app": "ne"}}, "spec": {
                    "containers": [{"args": ["--path.procfs=/host/proc"], "env": [{"name": "EMPTY"}],
                        "image": "node-exporter:v1.8.2", "imagePullPolicy": "IfNotPresent",
                        "livenessProbe": {"failureThreshold": 3, "httpGet": {"path": "/", "port": 9100, "scheme": "HTTP"},
                            "periodSeconds": 10, "successThreshold": 1, "timeoutSeconds": 1},
                        "name": "node-exporter",
                        "ports": [{"containerPort": 9100, "hostPort": 9100, "name": "metrics", "protocol": "TCP"}],
                        "resources": {"limits": {"memory": "64Mi"}},
                        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
                    "dnsPolicy": "ClusterFirst", "hostNetwork": true, "restartPolicy": "Always",
                    "schedulerName": "default-scheduler", "securityContext": {},
                    "terminationGracePeriodSeconds": 30}},
                "updateStrategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}, "type": "RollingUpdate"}}});
        let schema = Schema::builtin();
        let held = held_at_first_sight(&schema, &object, &live);
        assert!(held.is_empty(), "{held:?}");
        live["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] =
            json!("1Gi");
        let drifted = drift(&schema, &object, &live, &[]);
        assert_eq!(
            describe_paths(&drifted),
            "/spec/template/spec/containers/0/resources/limits/memory"
        );
        let body = held_object(&object, &live, &[], &held).unwrap();
        assert_eq!(
            body["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"],
            "64Mi"
        );
    }

    #[test]
    fn a_held_path_inside_a_list_item_holds_the_whole_list_at_what_is_live() {
        let object = held_deployment();
        let first_sight = live_web(3, Some(false));
        let held = held_at_first_sight(&Schema::builtin(), &object, &first_sight);
        assert!(
            held.contains(&"/spec/template/spec/containers".to_string()),
            "{held:?}"
        );
        let body = held_object(&object, &first_sight, &[], &held).unwrap();
        assert_eq!(
            body["spec"]["template"]["spec"]["containers"],
            first_sight["spec"]["template"]["spec"]["containers"]
        );
        assert_eq!(
            body["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"],
            false
        );
        writes_only_what_was_live(&body, &first_sight, &held);
        // The list gone live: it is left out, not written from the revision.
        let mut gone = first_sight.clone();
        gone["spec"]["template"]["spec"]
            .as_object_mut()
            .unwrap()
            .remove("containers");
        let body = held_object(&object, &gone, &[], &held).unwrap();
        assert!(body["spec"]["template"]["spec"].get("containers").is_none());
    }

    #[test]
    fn a_path_under_an_exception_open_at_first_sight_stays_held_once_it_closes() {
        let object = held_deployment();
        let first_sight = live_web(3, None);
        let exception = ["/spec/template/spec/hostNetwork"];
        // Control: held from the drift with the exception applied (as it was), the path is
        // not held and the revision's value is written once the exception closes.
        let held_with_exception = held_paths(&drift(
            &Schema::builtin(),
            &object,
            &first_sight,
            &exception,
        ));
        assert!(!held_with_exception
            .iter()
            .any(|p| p.ends_with("hostNetwork")));
        let leaked = held_object(&object, &first_sight, &[], &held_with_exception).unwrap();
        assert_eq!(leaked["spec"]["template"]["spec"]["hostNetwork"], true);
        // The rule: held without exceptions or ignore rules.
        let held = held_at_first_sight(&Schema::builtin(), &object, &first_sight);
        for ignore in [&exception[..], &[], &["/spec/replicas"]] {
            let body = held_object(&object, &live_web(5, None), ignore, &held).unwrap();
            assert!(body["spec"]["template"]["spec"]
                .get("hostNetwork")
                .is_none());
            writes_only_what_was_live(&body, &first_sight, &held);
        }
    }

    #[test]
    fn an_unknown_authors_write_changes_nothing_but_the_drift_it_puts_back() {
        let live = live_web(7, Some(false));
        let replicas = Change {
            path: "/spec/replicas".into(),
            chart: json!(3),
            requested: Some(json!(7)),
        };
        let mut after = live.clone();
        after["spec"]["replicas"] = json!(3);
        after["metadata"]["resourceVersion"] = json!("10");
        after["metadata"]["generation"] = json!(2);
        // (A DaemonSet's: counted up by the API server with every change of its pod template.)
        after["metadata"]["annotations"]["deprecated.daemonset.template.generation"] = json!("2");
        after["metadata"]["managedFields"] =
            json!([{"manager": "python", "time": "2026-11-28T10:05:54Z"}]);
        after["status"] = json!({"observedGeneration": 2});
        assert!(written_beyond_drift(&live, &after, std::slice::from_ref(&replicas)).is_empty());
        // A held field written, a field dropped (a server-side apply of a body without it), an
        // item changed in a list: each refuses the write.
        let mut leaked = after.clone();
        leaked["spec"]["template"]["spec"]["hostNetwork"] = json!(true);
        leaked["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("app.kubernetes.io/managed-by");
        leaked["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] =
            json!(true);
        assert_eq!(
            written_beyond_drift(&live, &leaked, std::slice::from_ref(&replicas)),
            [
                "/metadata/labels/app.kubernetes.io~1managed-by",
                "/spec/template/spec/containers/0/securityContext/privileged",
                "/spec/template/spec/hostNetwork"
            ]
        );
        // Without the drift to put back, the replicas themselves are beyond it.
        assert_eq!(written_beyond_drift(&live, &after, &[]), ["/spec/replicas"]);
        // A list put back whole: what changes in it is the drift.
        let containers = Change {
            path: "/spec/template/spec/containers/0/securityContext/privileged".into(),
            chart: json!(true),
            requested: Some(json!(false)),
        };
        let mut grown = live.clone();
        grown["spec"]["template"]["spec"]["containers"] = json!([{"name": "web"}, {"name": "b"}]);
        assert!(written_beyond_drift(&live, &grown, &[containers]).is_empty());
    }

    #[test]
    fn what_a_write_would_change_beyond_the_drift_is_given_back_what_is_live() {
        let object = held_deployment();
        let mut first_sight = live_web(3, None);
        first_sight["spec"]["template"]["spec"]["serviceAccountName"] = json!("agent");
        first_sight["metadata"]["labels"]["tier"] = json!("web");
        let held = held_at_first_sight(&Schema::builtin(), &object, &first_sight);
        let mut live = first_sight.clone();
        live["spec"]["replicas"] = json!(5);
        let mut body = held_object(&object, &live, &[], &held).unwrap();
        // The revision leaves serviceAccountName out, and a dry run of a forced apply dropped
        // it; it also showed a label it would remove and a list item it would change.
        assert!(body["spec"]["template"]["spec"]
            .get("serviceAccountName")
            .is_none());
        body["spec"]["template"]["spec"]["dnsPolicy"] = json!("None");
        hold_beyond_drift(
            &mut body,
            &live,
            &[
                "/spec/template/spec/serviceAccountName".into(),
                "/metadata/labels/tier".into(),
                "/spec/template/spec/containers/0/image".into(),
                "/spec/template/spec/dnsPolicy".into(),
            ],
        );
        assert_eq!(
            body["spec"]["template"]["spec"]["serviceAccountName"],
            "agent"
        );
        assert_eq!(body["metadata"]["labels"]["tier"], "web");
        assert_eq!(
            body["spec"]["template"]["spec"]["containers"],
            live["spec"]["template"]["spec"]["containers"]
        );
        assert!(body["spec"]["template"]["spec"].get("dnsPolicy").is_none());
        // The drift is still put back.
        assert_eq!(body["spec"]["replicas"], 3);
        // Paths through objects the body lacks are made.
        let mut empty = json!({});
        hold_beyond_drift(&mut empty, &live, &["/metadata/labels/tier".into()]);
        assert_eq!(empty, json!({"metadata": {"labels": {"tier": "web"}}}));
    }

    /// A StatefulSet of an unknown author whose volumeClaimTemplates item lacks apiVersion,
    /// kind and volumeMode: the API server stores them (and `status.phase: Pending`), which the
    /// local comparison of an atomic list's items does not know, so it differs there; the API
    /// server's answer for the chart's object agrees with live, and nothing is held, while a
    /// value changed before the locker came is.
    #[test]
    fn what_the_api_server_fills_in_is_no_difference_and_a_change_still_is() {
        const CHART: &str = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db, ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: x, uid: u}]}\nspec:\n  serviceName: db\n  selector: {matchLabels: {app: db}}\n  template:\n    metadata: {labels: {app: db}}\n    spec:\n      containers: [{name: db, image: postgres:16}]\n  volumeClaimTemplates:\n  - metadata: {name: data}\n    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n";
        let secret = crate::test_util::release_secret("shop", "db", 1, Status::Deployed, CHART);
        let index = Index::from_secrets([secret]);
        let object = index
            .release(&ReleaseKey::new("shop", "db"))
            .unwrap()
            .objects
            .clone()
            .unwrap()[0]
            .clone();
        let body = stored_form_body(&object);
        assert!(body["metadata"].get("name").is_none());
        assert!(body["metadata"].get("ownerReferences").is_none());
        assert_eq!(body["metadata"]["generateName"], "db-");
        assert_eq!(body["metadata"]["namespace"], "shop");
        // As the API server stores it.
        let mut stored = body.clone();
        stored["spec"]["volumeClaimTemplates"][0] = json!({"apiVersion": "v1",
            "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                "volumeMode": "Filesystem"},
            "status": {"phase": "Pending"}});
        let mut live = desired_object(&object, None, &[]);
        live["spec"]["volumeClaimTemplates"] = stored["spec"]["volumeClaimTemplates"].clone();
        let held = held_at_first_sight(&Schema::builtin(), &object, &live);
        assert_eq!(held, vec!["/spec/volumeClaimTemplates".to_string()]);
        assert!(differing_from_stored(held, &stored, &live).is_empty());
        // Control: a size changed live before the locker came is still held.
        live["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] =
            json!("2Gi");
        let held = held_at_first_sight(&Schema::builtin(), &object, &live);
        assert_eq!(
            differing_from_stored(held, &stored, &live),
            vec!["/spec/volumeClaimTemplates".to_string()]
        );
        // The whole object is always held.
        assert_eq!(
            differing_from_stored(vec!["/*".into()], &live, &live),
            vec!["/*".to_string()]
        );
    }

    #[test]
    fn nothing_held_is_the_revision_as_it_is_and_the_whole_object_held_is_no_body() {
        let object = held_deployment();
        let live = live_web(3, None);
        assert_eq!(
            held_object(&object, &live, &[], &[]).unwrap(),
            desired_object(&object, Some(&live), &[])
        );
        assert!(held_object(&object, &live, &[], &["/*".into()]).is_none());
        // A live object that agrees everywhere holds nothing.
        let mut agreeing = live_web(3, Some(true));
        agreeing["spec"]["template"]["spec"]["hostNetwork"] = json!(true);
        assert!(held_at_first_sight(&Schema::builtin(), &object, &agreeing).is_empty());
    }

    #[test]
    fn desired_object_is_the_chart_with_identity_and_helm_ownership() {
        let objects = objects();
        let body = desired_object(&objects[0], None, &[]);
        assert_eq!(body["apiVersion"], "apps/v1");
        assert_eq!(body["metadata"]["namespace"], "shop");
        assert_eq!(body["metadata"]["annotations"][RELEASE_NAME], "shop");
        assert_eq!(body["metadata"]["annotations"][RELEASE_NAMESPACE], "shop");
        assert_eq!(body["metadata"]["labels"][MANAGED_BY], "Helm");
        assert_eq!(body["metadata"]["labels"]["app"], "web");
        assert_eq!(body["spec"]["replicas"], 3);
        let role = desired_object(&objects[2], None, &[]);
        assert!(role["metadata"].get("namespace").is_none());
        // Ignored fields keep the live value, so the forced apply does not move them.
        let live = live_deployment(5, "nginx:1.27");
        let body = desired_object(&objects[0], Some(&live), &["/spec/replicas"]);
        assert_eq!(body["spec"]["replicas"], 5);
        assert_eq!(
            body["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:1.25"
        );
    }

    #[test]
    fn revert_patch_puts_chart_values_back_guarded_by_resource_version() {
        let objects = objects();
        let mut live = live_deployment(7, "nginx:1.27");
        let changes = drift(&Schema::builtin(), &objects[0], &live, &[]);
        let patch = revert_patch(&changes, Some("42"));
        json_patch::patch(&mut live, &patch).unwrap();
        assert!(drift(&Schema::builtin(), &objects[0], &live, &[]).is_empty());
        let mut moved = live_deployment(7, "nginx:1.27");
        moved["metadata"]["resourceVersion"] = json!("43");
        assert!(json_patch::patch(&mut moved, &patch).is_err());
    }

    /// A `fieldsV1` value holding `paths` (as the API server writes it: `.` on a member with
    /// members inside).
    fn fields_v1<'p>(paths: impl IntoIterator<Item = &'p String>) -> Value {
        let paths: Vec<&String> = paths.into_iter().collect();
        let mut root = json!({});
        for path in &paths {
            let mut node = &mut root;
            for element in crate::fields_v1::field_path_elements(path) {
                node = node
                    .as_object_mut()
                    .unwrap()
                    .entry(element)
                    .or_insert_with(|| json!({}));
            }
        }
        for path in &paths {
            let mut node = &mut root;
            for element in crate::fields_v1::field_path_elements(path) {
                node = node.get_mut(element).unwrap();
            }
            if !node.as_object().unwrap().is_empty() {
                node["."] = json!({});
            }
        }
        root
    }

    /// The web Deployment as the API server stores it after Helm's apply (`python`, the SDK's
    /// manager), with Helm's entry exactly what the schema says Helm owns, and the entries
    /// `others` (manager, fieldsV1).
    fn applied_deployment(helm: &crate::fields_v1::FieldSet, others: &[(&str, Value)]) -> Value {
        let deploy = &objects()[0];
        let mut live = desired_object(deploy, None, &[]);
        live["metadata"]["resourceVersion"] = json!("42");
        let mut managed = vec![json!({"manager": "python", "operation": "Apply",
            "apiVersion": "apps/v1", "fieldsType": "FieldsV1", "fieldsV1": fields_v1(helm)})];
        for (manager, fields) in others {
            managed.push(json!({"manager": manager, "operation": "Update",
                "apiVersion": "apps/v1", "fieldsType": "FieldsV1", "fieldsV1": fields}));
        }
        live["metadata"]["managedFields"] = json!(managed);
        live
    }

    fn helm_owns() -> crate::fields_v1::FieldSet {
        let deploy = &objects()[0];
        let schema = Schema::builtin();
        let applied = applied_object(&deploy.content(), ("shop", "shop"));
        crate::fields_v1::owned_fields(
            &schema,
            schema.root_or_deduced("apps/v1", "Deployment"),
            &applied,
        )
    }

    #[test]
    fn attribution_counts_a_schema_gap_and_not_drift() {
        let schema = Schema::builtin();
        let deploy = &objects()[0];
        let owned = helm_owns();
        let replicas = "f:spec.f:replicas".to_string();
        let image = r#"f:spec.f:template.f:spec.f:containers.k:{"name":"web"}.f:image"#.to_string();
        let label = "f:metadata.f:labels.f:app".to_string();
        assert!(owned.contains(&replicas) && owned.contains(&image) && owned.contains(&label));
        let check = |live: &Value| attribution(&schema, deploy, live).unwrap();

        // As Helm applied it: the same.
        let live = applied_deployment(&owned, &[]);
        assert!(check(&live).matches(), "{:?}", check(&live));

        // `kubectl edit` of the replicas and the image (exempt, or while the webhook was down):
        // the Update takes both from Helm's entry. Drift, not a gap.
        let mut helm = owned.clone();
        helm.remove(&replicas);
        helm.remove(&image);
        let edit = fields_v1([&replicas, &image]);
        let mut live = applied_deployment(&helm, &[("kubectl-edit", edit.clone())]);
        live["spec"]["replicas"] = json!(7);
        live["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.27");
        assert!(check(&live).matches(), "{:?}", check(&live));
        // The comparison without the other managers' entries is what used to be counted.
        let bare = crate::fields_v1::attribution_of(
            &schema,
            schema.root_or_deduced("apps/v1", "Deployment"),
            &applied_object(&deploy.content(), ("shop", "shop")),
            "python",
            &fields_v1(&helm),
        );
        assert_eq!(bare.extra.len(), 2, "{bare:?}");

        // A label someone removed is no one's: drift too.
        let mut helm = owned.clone();
        helm.remove(&label);
        let mut live = applied_deployment(&helm, &[]);
        live["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("app");
        assert!(check(&live).matches(), "{:?}", check(&live));

        // A locked field the live object has, that Helm's entry lacks and no one else owns: the
        // schema and the API server disagree. Counted, even though another manager created the
        // labels map around it.
        let labels_map = fields_v1([&"f:metadata.f:labels.f:team".to_string()]);
        let mut live = applied_deployment(&helm, &[("kubectl-label", labels_map)]);
        live["metadata"]["labels"]["team"] = json!("a");
        let found = check(&live);
        assert_eq!(found.extra, [label], "{found:?}");
        assert!(found.missing.is_empty());

        // A field in Helm's entry that is not locked is a gap whatever the live object holds.
        let mut helm = owned.clone();
        helm.insert("f:spec.f:paused".to_string());
        let found = check(&applied_deployment(&helm, &[]));
        assert_eq!(found.missing, ["f:spec.f:paused"]);
        assert!(found.extra.is_empty());
    }

    #[test]
    fn an_atomic_value_above_a_field_makes_it_the_other_managers() {
        let mut all = crate::fields_v1::FieldSet::new();
        all.insert("f:spec.f:selector".to_string());
        all.insert("f:metadata.f:labels".to_string());
        all.insert("f:metadata.f:labels.f:team".to_string());
        let others = OthersFields {
            leaves: [
                "f:spec.f:selector".to_string(),
                "f:metadata.f:labels.f:team".to_string(),
            ]
            .into(),
            all,
        };
        assert!(owned_by(&others, "f:spec.f:selector.f:matchLabels.f:app"));
        assert!(owned_by(&others, "f:metadata.f:labels.f:team"));
        assert!(!owned_by(&others, "f:metadata.f:labels.f:app"));
        assert!(!owned_by(&others, "f:spec.f:selectorx"));
    }

    #[test]
    fn field_paths_are_found_in_the_live_object() {
        let live = json!({"metadata": {"annotations": {"receipt.html": "x"}},
            "spec": {"ports": [{"port": 80, "protocol": "TCP", "name": "http"}],
                "template": {"spec": {"containers": [{"name": "web", "args": ["a.b", "c"]}]}}},
            "rules": [{"verbs": ["get"]}]});
        assert_eq!(
            crate::fields_v1::field_path_elements(
                r#"f:spec.f:ports.k:{"port":80,"protocol":"TCP"}.f:name"#
            ),
            [
                "f:spec",
                "f:ports",
                r#"k:{"port":80,"protocol":"TCP"}"#,
                "f:name"
            ]
        );
        assert_eq!(
            crate::fields_v1::field_path_elements("f:metadata.f:annotations.f:receipt.html"),
            ["f:metadata", "f:annotations", "f:receipt.html"]
        );
        for (path, present) in [
            ("f:metadata.f:annotations.f:receipt.html", true),
            ("f:metadata.f:annotations.f:gone", false),
            (
                r#"f:spec.f:ports.k:{"port":80,"protocol":"TCP"}.f:name"#,
                true,
            ),
            (r#"f:spec.f:ports.k:{"port":80.0,"protocol":"TCP"}"#, true),
            (r#"f:spec.f:ports.k:{"port":81,"protocol":"TCP"}"#, false),
            (
                r#"f:spec.f:template.f:spec.f:containers.k:{"name":"web"}.f:args"#,
                true,
            ),
            (
                r#"f:spec.f:template.f:spec.f:containers.k:{"name":"web"}.f:image"#,
                false,
            ),
            (
                r#"f:spec.f:template.f:spec.f:containers.k:{"name":"api"}"#,
                false,
            ),
            (r#"f:rules.i:0.f:verbs.v:"get""#, true),
            (r#"f:rules.i:0.f:verbs.v:"list""#, false),
            ("f:rules.i:3", false),
            ("f:spec.f:ports.f:port", false),
        ] {
            assert_eq!(field_present(&live, path), present, "{path}");
        }
    }

    #[test]
    fn a_revert_names_only_the_paths_it_puts_back() {
        let deploy = &objects()[0];
        // A kind without a schema: the comparison cannot know what the API server leaves out.
        let schema = Schema::empty();
        let root = schema.root_or_deduced("apps/v1", "Deployment");
        let mut chart = deploy.content().to_json();
        chart["spec"]["template"]["spec"]["hostNetwork"] = json!(false);
        chart["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] =
            json!("500m");
        let chart = Tree::from(&chart);
        let mut live = live_deployment(3, "nginx:1.25");
        // (Its lists are atomic: without the default the API server filled in.)
        live["spec"]["template"]["spec"]["containers"][0]
            .as_object_mut()
            .unwrap()
            .remove("terminationMessagePath");
        // `hostNetwork: false` differs forever: the API server does not store it.
        let before = crate::ownership::drifted_fields(&schema, root, &chart, &live, &[]);
        live["spec"]["replicas"] = json!(7);
        let drift = crate::ownership::drifted_fields(&schema, root, &chart, &live, &[]);
        assert_eq!(drift.len(), 2, "{drift:?}");
        // The dry run's answer still lacks hostNetwork, and has the chart's replicas.
        let fixed = fixed_by_write(&drift, &before);
        assert_eq!(describe_paths(fixed), "/spec/replicas");
        assert_eq!(
            describe_paths(&drift),
            "/spec/replicas, /spec/template/spec/hostNetwork"
        );
        assert!(fixed_by_write(&before, &before).is_empty());
    }

    #[test]
    fn backoff_is_immediate_then_doubles_then_resets() {
        let mut b = Backoff::new(
            Duration::from_secs(1),
            Duration::from_secs(8),
            Duration::from_secs(60),
        );
        let t0 = Instant::now();
        let delays: Vec<_> = (0..6)
            .map(|i| b.next_delay(&"web", t0 + Duration::from_secs(i)).as_secs())
            .collect();
        assert_eq!(delays, [0, 1, 2, 4, 8, 8]);
        assert_eq!(b.next_delay(&"other", t0).as_secs(), 0);
        assert_eq!(
            b.next_delay(&"web", t0 + Duration::from_secs(200))
                .as_secs(),
            0
        );
        b.prune(t0 + Duration::from_secs(400));
        assert!(b.is_empty());
    }
}
