//! Server-side apply's field sets: what Helm's `managedFields` entry owns, read and computed.
//!
//! A field set is a set of `fieldsV1` paths ([`FieldSet`]). [`owned_fields`] computes the set
//! Helm's apply of the chart's object owns, by the same rules [`crate::ownership`] locks by;
//! [`parse_fields_v1`] reads the set the API server wrote for a manager, and [`helm_fields`]
//! finds Helm's entry on a live object. Comparing the two ([`attribution_of`]) checks
//! helm-locker's ownership against the API server's own; [`co_owned_paths`] finds which of
//! Helm's fields another manager's apply claimed.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::ownership::{
    applied_object, item_key, normalize_number, null_is_owned, Node, RELEASE_NAME_ANNOTATION,
};
use crate::schema::{Atom, ListType, Schema, TypeId};
use crate::tree::Tree;

/// A set of `fieldsV1` paths, each written as its path elements joined by `.` with keys and
/// values in canonical JSON: `f:spec.f:containers.k:{"name":"web"}.f:image`.
pub(crate) type FieldSet = BTreeSet<String>;

/// The fields Helm's server-side apply of `chart` owns, as the API server would list them in
/// Helm's `managedFields` entry (`applied` is the object as Helm applies it, see
/// [`applied_object`]).
pub fn owned_fields(schema: &Schema, root: TypeId, applied: &Tree) -> FieldSet {
    let mut set = FieldSet::new();
    if let Tree::Map(entries) = applied {
        for (key, value) in entries.iter() {
            if matches!(&**key, "apiVersion" | "kind" | "status") {
                continue;
            }
            let path = format!("f:{key}");
            owned_walk(schema, schema.field(root, key), value, &path, &mut set);
        }
    }
    // The API server keeps the object's identity out of every manager's set.
    for stripped in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "selfLink",
        "managedFields",
    ] {
        let path = format!("f:metadata.f:{stripped}");
        set.retain(|p| p != &path && !p.starts_with(&format!("{path}.")));
    }
    set
}

fn owned_walk(schema: &Schema, ty: TypeId, value: &Tree, path: &str, set: &mut FieldSet) {
    let atom = schema.atom(ty);
    if matches!(value, Tree::Null) {
        if null_is_owned(atom) {
            set.insert(path.to_string());
        }
        return;
    }
    match (atom, value) {
        (
            Atom::Struct { atomic: false, .. } | Atom::Map { atomic: false, .. } | Atom::Deduced,
            Tree::Map(entries),
        ) => {
            for (key, child) in entries.iter() {
                let child_path = format!("{path}.f:{key}");
                owned_walk(schema, schema.field(ty, key), child, &child_path, set);
                if !schema.is_declared_field(ty, key) {
                    set.insert(child_path);
                }
            }
        }
        (
            Atom::List {
                list_type: ListType::Set,
                ..
            },
            Tree::List(list),
        ) => {
            for item in list.iter().filter(|i| !matches!(i, Tree::Null)) {
                let json = normalize_number(item.to_json());
                set.insert(format!("{path}.v:{json}"));
            }
        }
        (
            Atom::List {
                items,
                list_type: ListType::Map(keys),
            },
            Tree::List(list),
        ) => {
            for item in list.iter() {
                if let Some(key) = item_key(schema, *items, keys, Node::Tree(item)) {
                    let item_path = format!("{path}.k:{key}");
                    owned_walk(schema, *items, item, &item_path, set);
                    set.insert(item_path);
                }
            }
        }
        _ => {
            set.insert(path.to_string());
        }
    }
}

/// Empty structs the chart sets (`emptyDir: {}`): helm-locker locks their presence (removing one
/// changes what the chart set, and the next apply may fail), while Kubernetes 1.20's server-side
/// apply lists them in no manager's set (later versions do). Comparisons with `managedFields`
/// leave these paths out on both sides.
pub(crate) fn presence_locks(schema: &Schema, root: TypeId, applied: &Tree) -> FieldSet {
    fn walk(schema: &Schema, ty: TypeId, value: &Tree, path: &str, set: &mut FieldSet) {
        match (schema.atom(ty), value) {
            (Atom::Struct { atomic: false, .. }, Tree::Map(entries)) if entries.is_empty() => {
                set.insert(path.to_string());
            }
            (
                Atom::Struct { atomic: false, .. }
                | Atom::Map { atomic: false, .. }
                | Atom::Deduced,
                Tree::Map(entries),
            ) => {
                for (key, child) in entries.iter() {
                    walk(
                        schema,
                        schema.field(ty, key),
                        child,
                        &format!("{path}.f:{key}"),
                        set,
                    );
                }
            }
            (
                Atom::List {
                    items,
                    list_type: ListType::Map(keys),
                },
                Tree::List(list),
            ) => {
                for item in list.iter() {
                    if let Some(key) = item_key(schema, *items, keys, Node::Tree(item)) {
                        walk(schema, *items, item, &format!("{path}.k:{key}"), set);
                    }
                }
            }
            _ => {}
        }
    }
    let mut set = FieldSet::new();
    if let Tree::Map(entries) = applied {
        for (key, value) in entries.iter() {
            walk(
                schema,
                schema.field(root, key),
                value,
                &format!("f:{key}"),
                &mut set,
            );
        }
    }
    set
}

/// Reads a `fieldsV1` value into a [`FieldSet`] (`.` marks a node that is itself a member).
pub(crate) fn parse_fields_v1(fields: &Value) -> FieldSet {
    fn walk(node: &Map<String, Value>, path: &str, set: &mut FieldSet) {
        for (element, child) in node {
            if element == "." {
                continue;
            }
            let element = canonical_element(element);
            let child_path = if path.is_empty() {
                element
            } else {
                format!("{path}.{element}")
            };
            let child = child.as_object();
            let member = child.is_none_or(|c| c.is_empty() || c.contains_key("."));
            if let Some(c) = child {
                walk(c, &child_path, set);
            }
            if member {
                set.insert(child_path);
            }
        }
    }
    let mut set = FieldSet::new();
    if let Some(node) = fields.as_object() {
        walk(node, "", &mut set);
    }
    set
}

/// `k:{"protocol":"TCP","containerPort":80}` with its keys sorted, numbers as integers.
fn canonical_element(element: &str) -> String {
    let Some((prefix, rest)) = element.split_once(':') else {
        return element.to_string();
    };
    match prefix {
        "k" | "v" => match serde_json::from_str::<Value>(rest) {
            Ok(Value::Object(map)) => {
                let sorted: BTreeMap<String, Value> = map
                    .into_iter()
                    .map(|(k, v)| (k, normalize_number(v)))
                    .collect();
                format!(
                    "{prefix}:{}",
                    serde_json::to_string(&sorted).unwrap_or_default()
                )
            }
            Ok(value) => format!("{prefix}:{}", normalize_number(value)),
            Err(_) => element.to_string(),
        },
        _ => element.to_string(),
    }
}

/// The `managedFields` entry Helm wrote on a live object: the `Apply` entry of `manager` if
/// given, else of the manager that owns Helm's release annotation. Helm applies the object
/// itself: an entry of a subresource (1.22+: `"subresource": "scale"` of `kubectl scale`, or
/// `status`) is never Helm's, whatever its manager is called.
pub fn helm_fields<'v>(live: &'v Value, manager: Option<&str>) -> Option<(&'v str, &'v Value)> {
    let entries = live.pointer("/metadata/managedFields")?.as_array()?;
    entries
        .iter()
        .filter(|e| e.get("operation").and_then(Value::as_str) == Some("Apply"))
        .filter(|e| is_main_resource(e))
        .filter_map(|e| Some((e.get("manager")?.as_str()?, e.get("fieldsV1")?)))
        .find(|(name, fields)| match manager {
            Some(m) => *name == m,
            None => fields
                .pointer("/f:metadata/f:annotations")
                .and_then(Value::as_object)
                .is_some_and(|a| a.contains_key(&format!("f:{RELEASE_NAME_ANNOTATION}"))),
        })
}

/// Whether a managedFields entry was written through the object itself, not a subresource.
pub(crate) fn is_main_resource(entry: &Value) -> bool {
    entry
        .get("subresource")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
}

/// How helm-locker's ownership of a live object differs from the `managedFields` entry the
/// API server wrote for Helm: fields Helm owns that are not locked (`missing`), and fields
/// locked beyond Helm's entry (`extra`). `None` when the object has no Apply entry of Helm.
#[derive(Debug, PartialEq)]
pub struct Attribution {
    pub manager: String,
    pub missing: Vec<String>,
    pub extra: Vec<String>,
    /// Fields Helm owns that the chart renders empty (`null`, `{}`, `[]`): 1.36 credits Helm's
    /// apply with them (`affinity.nodeAffinity: null`, `resources.requests: {}`), 1.20 does
    /// not. They hold no chart value to lock, so they are not a schema gap: listed apart and
    /// not counted in [`matches`](Self::matches).
    pub empty: Vec<String>,
}

impl Attribution {
    pub fn matches(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty()
    }
}

pub(crate) fn compare_attribution(
    schema: &Schema,
    root: TypeId,
    applied: &Tree,
    live: &Value,
) -> Option<Attribution> {
    let (manager, fields) = helm_fields(live, None)?;
    Some(attribution_of(schema, root, applied, manager, fields))
}

/// Compares the set Helm owns by `fields` (its `fieldsV1`) with what helm-locker locks.
pub fn attribution_of(
    schema: &Schema,
    root: TypeId,
    applied: &Tree,
    manager: &str,
    fields: &Value,
) -> Attribution {
    let ours = owned_fields(schema, root, applied);
    let helms = parse_fields_v1(fields);
    let presence = presence_locks(schema, root, applied);
    let (empty, missing): (Vec<String>, Vec<String>) = helms
        .difference(&ours)
        .filter(|p| !presence.contains(*p))
        .cloned()
        .partition(|p| renders_empty(applied, p));
    Attribution {
        manager: manager.to_string(),
        missing,
        extra: ours.difference(&helms).cloned().collect(),
        empty,
    }
}

/// Whether the chart renders the field at `path` (a [`FieldSet`] path) as `null`, `{}` or `[]`,
/// or inside such a value.
fn renders_empty(applied: &Tree, path: &str) -> bool {
    let mut node = applied;
    for element in field_path_elements(path) {
        if node.is_empty_value() {
            return true;
        }
        let next = match element.split_at_checked(2) {
            Some(("f:", name)) => node.get(name),
            Some(("k:", key)) => {
                let Ok(key) = serde_json::from_str::<Map<String, Value>>(key) else {
                    return false;
                };
                match node {
                    Tree::List(items) => items.iter().find(|item| {
                        key.iter()
                            .all(|(k, v)| item.get(k).map(Tree::to_json).as_ref() == Some(v))
                    }),
                    _ => None,
                }
            }
            _ => return false,
        };
        match next {
            Some(next) => node = next,
            None => return false,
        }
    }
    node.is_empty_value()
}

/// Of the fields an `Apply` entry `claimed` (less what it `before` claimed), those Helm owns,
/// and those it claims whole above fields Helm owns: a member with nothing below it in the
/// claimer's set owns the whole value, and the next `helm upgrade` conflicts with it. A map
/// applied as `null` (a Secret's `stringData: null`) is such a member on 1.36; 1.20 lists
/// nothing for it (measured, `tests/e2e/test_ownership.py` test_3b).
pub(crate) fn co_owned_paths(
    schema: &Schema,
    root: TypeId,
    chart: &Tree,
    release: (&str, &str),
    claimed: &FieldSet,
    before: &FieldSet,
) -> Vec<String> {
    let owned = owned_fields(schema, root, &applied_object(chart, release));
    claimed
        .iter()
        .filter(|p| owned.contains(*p) || (!has_below(claimed, p) && has_below(&owned, p)))
        .filter(|p| !before.contains(*p))
        .cloned()
        .collect()
}

/// Whether `set` holds a path below `path` (element by element: a field name may hold dots).
fn has_below(set: &FieldSet, path: &str) -> bool {
    let prefix = format!("{path}.");
    let elements = field_path_elements(path);
    set.range(prefix.clone()..)
        .take_while(|p| p.starts_with(&prefix))
        .any(|p| {
            let below = field_path_elements(p);
            below.len() > elements.len() && below[..elements.len()] == elements[..]
        })
}

/// The elements of a [`FieldSet`] path (`f:spec.f:containers.k:{"name":"web"}`):
/// separated by `.`, though keys and values are JSON that may hold dots, and so may field names
/// (`f:receipt.html`).
pub(crate) fn field_path_elements(path: &str) -> Vec<&str> {
    let mut elements = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        let end = match rest.get(..2) {
            Some("k:") | Some("v:") => {
                let (mut depth, mut in_string, mut escaped) = (0i32, false, false);
                let mut end = rest.len();
                for (i, c) in rest.char_indices().skip(2) {
                    match c {
                        _ if escaped => escaped = false,
                        '\\' if in_string => escaped = true,
                        '"' => in_string = !in_string,
                        '{' | '[' if !in_string => depth += 1,
                        '}' | ']' if !in_string => depth -= 1,
                        '.' if !in_string && depth == 0 => {
                            end = i;
                            break;
                        }
                        _ => {}
                    }
                }
                end
            }
            _ => (1..rest.len())
                .find(|&i| {
                    rest.as_bytes()[i] == b'.'
                        && matches!(rest.get(i + 1..i + 3), Some("f:" | "k:" | "v:" | "i:"))
                })
                .unwrap_or(rest.len()),
        };
        elements.push(&rest[..end]);
        rest = rest.get(end + 1..).unwrap_or_default();
    }
    elements
}

/// `f:spec.f:containers.k:{"name":"web"}.f:image` as `/spec/containers/[name=web]/image`.
pub(crate) fn describe_field_path(path: &str) -> String {
    let mut out = String::new();
    for element in field_path_elements(path) {
        if let Some(("f:", name)) = element.split_at_checked(2) {
            crate::ownership::push_segment(&mut out, name);
            continue;
        }
        out.push('/');
        match element.split_at_checked(2) {
            Some(("i:", index)) => out.push_str(index),
            Some(("v:", value)) => out.push_str(&format!("[{value}]")),
            Some(("k:", key)) => {
                let fields: Vec<String> = serde_json::from_str::<Map<String, Value>>(key)
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| match v {
                                Value::String(s) => format!("{k}={s}"),
                                other => format!("{k}={other}"),
                            })
                            .collect()
                    })
                    .unwrap_or_else(|_| vec![key.to_string()]);
                out.push_str(&format!("[{}]", fields.join(",")));
            }
            _ => out.push_str(element),
        }
    }
    out
}

/// Takes `paths` ([`FieldSet`] paths) out of a `fieldsV1` value: a member with nothing below it
/// goes, one with fields below keeps them and loses its `.` mark, and a node left with nothing
/// below it by the removal goes too (empty, it would mean "owns this field"; holding only its
/// `.` mark, the API server hands it back what was below). Returns whether anything went.
pub(crate) fn remove_paths(fields: &mut Value, paths: &FieldSet) -> bool {
    fn walk(node: &mut Map<String, Value>, path: &str, paths: &FieldSet) -> bool {
        let mut removed = false;
        let keys: Vec<String> = node.keys().filter(|k| *k != ".").cloned().collect();
        for key in keys {
            let element = canonical_element(&key);
            let child_path = if path.is_empty() {
                element
            } else {
                format!("{path}.{element}")
            };
            let Some(child) = node.get_mut(&key) else {
                continue;
            };
            let had_children = child
                .as_object()
                .is_some_and(|c| c.keys().any(|k| k != "."));
            if let Some(c) = child.as_object_mut() {
                removed |= walk(c, &child_path, paths);
            }
            if paths.contains(&child_path) {
                match child.as_object_mut() {
                    Some(c) if c.keys().any(|k| k != ".") => {
                        removed |= c.remove(".").is_some();
                    }
                    _ => {
                        node.remove(&key);
                        removed = true;
                        continue;
                    }
                }
            }
            // A map left holding only its own mark (`f:data: {".": {}}`) goes as well: kube-apiserver
            // (1.20, measured) gives such an entry back the fields below the mark on the next
            // write, so the map's existence goes with its fields.
            let emptied = had_children
                && child
                    .as_object()
                    .is_some_and(|c| c.keys().all(|k| k == "."));
            if emptied {
                node.remove(&key);
                removed = true;
            }
        }
        removed
    }
    match fields.as_object_mut() {
        Some(node) => walk(node, "", paths),
        None => false,
    }
}

/// Adds `paths` ([`FieldSet`] paths) to a `fieldsV1` value, as members: the inverse of
/// [`remove_paths`]. An element already there under another spelling of the same key
/// (`k:{"port":80,"protocol":"TCP"}` in another key order) is found, not doubled.
pub(crate) fn insert_paths(fields: &mut Value, paths: &FieldSet) {
    if !fields.is_object() {
        *fields = Value::Object(Map::new());
    }
    for path in paths {
        let mut node = fields.as_object_mut().expect("an object");
        let elements = field_path_elements(path);
        for (i, element) in elements.iter().enumerate() {
            let last = i + 1 == elements.len();
            let key = node
                .keys()
                .find(|k| canonical_element(k) == *element)
                .cloned()
                .unwrap_or_else(|| element.to_string());
            let was_leaf = node
                .get(&key)
                .is_some_and(|c| c.as_object().is_some_and(Map::is_empty));
            let child = node.entry(key).or_insert_with(|| Value::Object(Map::new()));
            if !child.is_object() {
                *child = Value::Object(Map::new());
            }
            let child = child.as_object_mut().expect("an object");
            if last {
                if !child.is_empty() {
                    child.insert(".".into(), Value::Object(Map::new()));
                }
            } else if was_leaf {
                // It was a member with nothing below: it stays one with fields below.
                child.insert(".".into(), Value::Object(Map::new()));
            }
            node = child;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    #[test]
    fn paths_move_between_fields_v1_values_as_members() {
        let paths: FieldSet = [
            "f:data.f:greeting".to_string(),
            r#"f:spec.f:ports.k:{"port":80,"protocol":"TCP"}"#.to_string(),
            r#"f:spec.f:ports.k:{"port":80,"protocol":"TCP"}.f:port"#.to_string(),
        ]
        .into();
        let mut other = json!({
            "f:data": {"f:greeting": {}, "f:mine": {}},
            "f:spec": {"f:ports": {r#"k:{"protocol":"TCP","port":80}"#: {".": {}, "f:port": {}}}},
            "f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}}
        });
        assert!(remove_paths(&mut other, &paths));
        // What was only theirs stays theirs; a node emptied by the removal goes.
        assert_eq!(
            other,
            json!({"f:data": {"f:mine": {}}, "f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}}})
        );
        assert!(!remove_paths(&mut other, &paths), "nothing left to take");
        let mut helm = json!({"f:data": {"f:mode": {}}, "f:spec": {"f:ports": {r#"k:{"protocol":"TCP","port":80}"#: {".": {}, "f:name": {}}}}});
        insert_paths(&mut helm, &paths);
        assert_eq!(
            helm,
            json!({"f:data": {"f:mode": {}, "f:greeting": {}},
                   "f:spec": {"f:ports": {r#"k:{"protocol":"TCP","port":80}"#: {".": {}, "f:name": {}, "f:port": {}}}}})
        );
        assert_eq!(
            parse_fields_v1(&helm),
            [
                "f:data.f:greeting",
                "f:data.f:mode",
                r#"f:spec.f:ports.k:{"port":80,"protocol":"TCP"}"#,
                r#"f:spec.f:ports.k:{"port":80,"protocol":"TCP"}.f:name"#,
                r#"f:spec.f:ports.k:{"port":80,"protocol":"TCP"}.f:port"#,
            ]
            .map(String::from)
            .into()
        );
        // A member with fields below keeps them and loses its mark.
        let mut item = json!({"f:spec": {"f:ports": {r#"k:{"port":80,"protocol":"TCP"}"#: {".": {}, "f:name": {}}}}});
        let only_item: FieldSet =
            [r#"f:spec.f:ports.k:{"port":80,"protocol":"TCP"}"#.to_string()].into();
        assert!(remove_paths(&mut item, &only_item));
        assert_eq!(
            item,
            json!({"f:spec": {"f:ports": {r#"k:{"port":80,"protocol":"TCP"}"#: {"f:name": {}}}}})
        );
    }

    fn schema() -> Arc<Schema> {
        Schema::builtin()
    }

    /// 1.36 credits Helm with what the chart renders empty; that is not a schema gap.
    #[test]
    fn fields_the_chart_renders_empty_are_listed_apart_from_missing_ones() {
        let applied: Tree = serde_json::from_value(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"template": {"spec": {"affinity": {"nodeAffinity": null},
                "containers": [{"name": "web", "image": "nginx", "resources": {"requests": {}}}]}}}}))
        .unwrap();
        let helms = json!({"f:spec": {"f:template": {"f:spec": {
            "f:affinity": {"f:nodeAffinity": {}},
            "f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:name": {}, "f:image": {},
                "f:resources": {"f:requests": {}}}}}}}});
        let schema = schema();
        let root = schema.root_or_deduced("apps/v1", "Deployment");
        let found = attribution_of(&schema, root, &applied, "helm", &helms);
        assert!(found.matches(), "{found:?}");
        assert_eq!(found.empty.len(), 2, "{found:?}");
        // A field the chart sets with a value is still missing when not locked.
        let mut more = helms.clone();
        more["f:spec"]["f:paused"] = json!({});
        let found = attribution_of(&schema, root, &applied, "helm", &more);
        assert_eq!(found.missing, ["f:spec.f:paused"], "{found:?}");
    }

    /// 1.22+ records writes through a subresource in their own entries: an operator that
    /// applies `status` under the same field manager name as Helm's SDK program does not
    /// make that entry Helm's.
    #[test]
    fn an_entry_of_a_subresource_is_never_helms() {
        let live = json!({"metadata": {"managedFields": [
            {"manager": "python", "operation": "Apply", "subresource": "status",
             "fieldsV1": {"f:status": {"f:ready": {}}}},
            {"manager": "python", "operation": "Apply",
             "fieldsV1": {"f:metadata": {"f:annotations": {"f:meta.helm.sh/release-name": {}}}, "f:data": {"f:a": {}}}},
        ]}});
        let (manager, fields) = helm_fields(&live, Some("python")).unwrap();
        assert_eq!(manager, "python");
        assert!(fields.get("f:data").is_some(), "{fields}");
        let scaled = json!({"metadata": {"managedFields": [
            {"manager": "kubectl", "operation": "Apply", "subresource": "scale",
             "fieldsV1": {"f:metadata": {"f:annotations": {"f:meta.helm.sh/release-name": {}}}, "f:spec": {"f:replicas": {}}}},
        ]}});
        assert!(helm_fields(&scaled, None).is_none());
    }

    /// 1.36 lists a map another manager applies as `null` as a member of its set: it owns the
    /// whole map, above the fields Helm owns in it. A member with fields below it in the
    /// claimer's own set, or a label whose key holds a dot, claims nothing of Helm's.
    #[test]
    fn a_member_claimed_whole_above_helms_fields_is_co_owned() {
        let chart: Tree = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "creds", "labels": {"a.b": "x"}},
            "stringData": {"password": "s3cret"}}))
        .unwrap();
        let schema = schema();
        let root = schema.root_or_deduced("v1", "Secret");
        let shared = |fields: Value| {
            co_owned_paths(
                &schema,
                root,
                &chart,
                ("r", "ns"),
                &parse_fields_v1(&fields),
                &FieldSet::new(),
            )
        };
        assert_eq!(shared(json!({"f:stringData": {}})), ["f:stringData"]);
        assert!(shared(json!({"f:stringData": {".": {}, "f:other": {}}})).is_empty());
        assert!(shared(json!({"f:metadata": {"f:labels": {"f:a": {}}}})).is_empty());
        assert_eq!(
            shared(json!({"f:stringData": {"f:password": {}}})),
            ["f:stringData.f:password"]
        );
    }

    #[test]
    fn field_paths_are_described_as_json_pointers_with_keyed_items() {
        assert_eq!(
            describe_field_path("f:spec.f:containers.k:{\"name\":\"web.1\"}.f:ports.k:{\"containerPort\":80,\"protocol\":\"TCP\"}.f:protocol"),
            "/spec/containers/[name=web.1]/ports/[containerPort=80,protocol=TCP]/protocol"
        );
        assert_eq!(describe_field_path("f:data.f:greeting"), "/data/greeting");
        // Names with dots and slashes (a ConfigMap key, an annotation): one segment each.
        assert_eq!(
            describe_field_path("f:data.f:receipt.html"),
            "/data/receipt.html"
        );
        assert_eq!(
            describe_field_path("f:metadata.f:annotations.f:meta.helm.sh/release-name"),
            "/metadata/annotations/meta.helm.sh~1release-name"
        );
    }

    #[test]
    fn owned_fields_read_as_fields_v1() {
        let schema = schema();
        let chart = Tree::from(&json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"spec": {
                "containers": [{"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]}],
                "volumes": [{"name": "tmp", "emptyDir": {}}]}}}}));
        let owned = owned_fields(
            &schema,
            schema.root_or_deduced("apps/v1", "Deployment"),
            &chart,
        );
        let helm = parse_fields_v1(&json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:selector": {}, "f:template": {"f:spec": {
                "f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {},
                    "f:ports": {"k:{\"protocol\":\"TCP\",\"containerPort\":80}": {".": {}, "f:containerPort": {}}}}},
                "f:volumes": {"k:{\"name\":\"tmp\"}": {".": {}, "f:name": {}}}}}}}));
        assert_eq!(owned, helm);
        // Kubernetes 1.20 lists no empty struct; helm-locker still locks its presence.
        let presence = presence_locks(
            &schema,
            schema.root_or_deduced("apps/v1", "Deployment"),
            &chart,
        );
        assert_eq!(
            presence.into_iter().collect::<Vec<_>>(),
            ["f:spec.f:template.f:spec.f:volumes.k:{\"name\":\"tmp\"}.f:emptyDir"]
        );
    }
}
