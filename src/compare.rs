//! Field comparison between the chart's view of an object and what a request writes.
//!
//! A path is *locked* when the chart sets it. A change is a locked path whose requested value
//! differs from the chart's AND from the current (old) value: fields the chart does not set stay
//! free, drift that already happened does not block unrelated writes, and a write that moves a
//! field back toward the chart is allowed. Values are compared the way the API server stores
//! them: quantities canonically (`"0.5"` == `500m`), int-or-string (`80` == `"80"`), absent ==
//! `null` == `{}` == `[]`, lists of objects matched by their merge key (containers by `name`,
//! container ports by `containerPort`+`protocol`, ...).

use serde_json::{Map, Value};

use crate::quantity::Quantity;
use crate::tree::Tree;

/// A locked path the request changes away from the chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// JSON pointer into the request's object (`-` for a list item the request removed).
    pub path: String,
    /// The chart's value.
    pub chart: Value,
    /// The requested value; `None` when the request removes the field.
    pub requested: Option<Value>,
}

/// Finds the changes a request makes to locked fields. `ignore` holds JSON pointers (a `*`
/// segment matches any key or index) whose subtrees are free.
pub fn locked_changes(
    chart: &Tree,
    new: &Value,
    old: Option<&Value>,
    ignore: &[&str],
) -> Vec<Change> {
    let mut walk = Walk {
        ignore,
        changes: Vec::new(),
        path: String::new(),
        against_old: true,
    };
    walk.object(chart, new, old);
    walk.changes
}

/// Locked paths whose live value differs from the chart's (drift to revert): like
/// [`locked_changes`] without an old value, so every difference counts, including a locked
/// field that was removed.
pub fn drifted_fields(chart: &Tree, live: &Value, ignore: &[&str]) -> Vec<Change> {
    let mut walk = Walk {
        ignore,
        changes: Vec::new(),
        path: String::new(),
        against_old: false,
    };
    walk.object(chart, live, None);
    walk.changes
}

impl Walk<'_> {
    fn object(&mut self, chart: &Tree, new: &Value, old: Option<&Value>) {
        if let (Tree::Map(entries), Value::Object(new_map)) = (chart, new) {
            let old_map = old.and_then(Value::as_object);
            for (key, chart_value) in entries.iter() {
                // The type is fixed by the lookup, and status is never the chart's to set.
                if matches!(&**key, "apiVersion" | "kind" | "status") {
                    continue;
                }
                self.child(key, chart_value, new_map, old_map, false);
            }
        } else {
            self.visit(chart, Some(new), old, false);
        }
    }
}

/// Changes to one locked path (used for the `scale` subresource: the parent's `/spec/replicas`).
pub fn locked_changes_at(
    chart: &Tree,
    pointer: &str,
    new: &Value,
    old: Option<&Value>,
    ignore: &[&str],
) -> Vec<Change> {
    let Some(chart_value) = chart.pointer(pointer) else {
        return Vec::new();
    };
    let mut walk = Walk {
        ignore,
        changes: Vec::new(),
        path: pointer.to_string(),
        against_old: true,
    };
    walk.visit(
        chart_value,
        new.pointer(pointer),
        old.and_then(|o| o.pointer(pointer)),
        false,
    );
    walk.changes
}

struct Walk<'a> {
    ignore: &'a [&'a str],
    changes: Vec<Change>,
    path: String,
    /// A difference from the chart counts only when the value also changes from the old one
    /// (admission); off for drift, where there is no old value.
    against_old: bool,
}

impl Walk<'_> {
    fn child(
        &mut self,
        key: &str,
        chart: &Tree,
        new: &Map<String, Value>,
        old: Option<&Map<String, Value>>,
        quantity_parent: bool,
    ) {
        let len = self.path.len();
        push_segment(&mut self.path, key);
        let quantity = quantity_parent || key == "sizeLimit";
        self.visit(chart, new.get(key), old.and_then(|m| m.get(key)), quantity);
        self.path.truncate(len);
    }

    fn visit(&mut self, chart: &Tree, new: Option<&Value>, old: Option<&Value>, quantity: bool) {
        if is_ignored(&self.path, self.ignore) {
            return;
        }
        match (chart, new) {
            (Tree::Map(entries), Some(Value::Object(new_map))) => {
                let old_map = old.and_then(Value::as_object);
                let holds_quantities = holds_quantities(last_segment(&self.path));
                for (key, chart_value) in entries.iter() {
                    self.child(key, chart_value, new_map, old_map, holds_quantities);
                }
            }
            // An empty list the API server merges by key (`env: []`) sets no item: like the
            // chart's `{}`, it locks nothing below it, and items others add are theirs.
            (Tree::List(items), Some(Value::Array(_)))
                if items.is_empty() && KEYED_LISTS.contains(&last_segment(&self.path)) => {}
            (Tree::List(items), Some(Value::Array(new_items))) => {
                let old_items = old
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                if let Some(key) = merge_key(last_segment(&self.path), items) {
                    // Items that share a key (env may repeat a name) pair up in order: the k-th
                    // chart item with a key meets the k-th live item with it.
                    let mut new_taken = vec![false; new_items.len()];
                    let mut old_taken = vec![false; old_items.len()];
                    for item in items.iter() {
                        let position = take_match(&key, item, new_items, &mut new_taken);
                        let old_item = take_match(&key, item, old_items, &mut old_taken)
                            .map(|i| &old_items[i]);
                        let len = self.path.len();
                        match position {
                            Some(i) => push_segment(&mut self.path, &i.to_string()),
                            None => push_segment(&mut self.path, "-"),
                        }
                        self.visit(item, position.map(|i| &new_items[i]), old_item, quantity);
                        self.path.truncate(len);
                    }
                } else if items.len() == new_items.len()
                    && items
                        .iter()
                        .any(|i| matches!(i, Tree::Map(_) | Tree::List(_)))
                {
                    for (i, item) in items.iter().enumerate() {
                        let len = self.path.len();
                        push_segment(&mut self.path, &i.to_string());
                        self.visit(item, new_items.get(i), old_items.get(i), quantity);
                        self.path.truncate(len);
                    }
                } else {
                    self.leaf(chart, new, old, quantity);
                }
            }
            _ => self.leaf(chart, new, old, quantity),
        }
    }

    fn leaf(&mut self, chart: &Tree, new: Option<&Value>, old: Option<&Value>, quantity: bool) {
        if !chart_eq(chart, new, quantity) && (!self.against_old || !json_eq(new, old, quantity)) {
            self.changes.push(Change {
                path: self.path.clone(),
                chart: chart.to_json(),
                requested: new.filter(|v| !is_empty_json(v)).cloned(),
            });
        }
    }
}

fn push_segment(path: &mut String, key: &str) {
    path.push('/');
    if key.contains(['~', '/']) {
        path.push_str(&key.replace('~', "~0").replace('/', "~1"));
    } else {
        path.push_str(key);
    }
}

fn last_segment(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or_default()
}

/// Whether `path` lies under one of the ignored pointers.
pub fn is_ignored(path: &str, ignore: &[&str]) -> bool {
    ignore.iter().any(|pattern| {
        let mut path_segments = path.split('/').skip(1);
        pattern
            .split('/')
            .skip(1)
            .all(|p| path_segments.next().is_some_and(|s| p == "*" || p == s))
    })
}

/// Maps whose values are resource quantities.
fn holds_quantities(field: &str) -> bool {
    matches!(
        field,
        "limits"
            | "requests"
            | "hard"
            | "capacity"
            | "allocatable"
            | "overhead"
            | "default"
            | "defaultRequest"
            | "max"
            | "min"
            | "maxLimitRequestRatio"
    )
}

/// How items of a list of objects are matched (Kubernetes' `patchMergeKey`s).
struct MergeKey {
    fields: &'static [(&'static str, Option<&'static str>)],
}

impl MergeKey {
    fn matches(&self, chart_item: &Tree, live_item: &Value) -> bool {
        self.fields.iter().all(|(field, default)| {
            let chart_value = chart_item.get(field).filter(|v| !matches!(v, Tree::Null));
            let live_value = live_item.get(field).filter(|v| !v.is_null());
            match (chart_value, live_value) {
                (Some(c), Some(l)) => scalar_eq(c, l, false),
                (None, Some(l)) => default.is_some_and(|d| l.as_str() == Some(d)),
                (Some(c), None) => default.is_some_and(|d| c.as_str() == Some(d)),
                (None, None) => true,
            }
        })
    }
}

/// The first live item not yet paired that matches `chart_item` by key; marks it paired.
fn take_match(
    key: &MergeKey,
    chart_item: &Tree,
    live: &[Value],
    taken: &mut [bool],
) -> Option<usize> {
    let i = (0..live.len()).find(|&i| !taken[i] && key.matches(chart_item, &live[i]))?;
    taken[i] = true;
    Some(i)
}

/// Lists the API server merges item by item (patchStrategy "merge" in the Kubernetes API), by
/// their field name. Others (`args`, `command`, `tolerations`...) are replaced whole.
const KEYED_LISTS: &[&str] = &[
    "containers",
    "initContainers",
    "ephemeralContainers",
    "env",
    "volumes",
    "volumeMounts",
    "volumeDevices",
    "ports",
    "imagePullSecrets",
    "hostAliases",
    "topologySpreadConstraints",
];

fn merge_key(field: &str, items: &[Tree]) -> Option<MergeKey> {
    let all_have = |key: &str| !items.is_empty() && items.iter().all(|i| i.get(key).is_some());
    let fields: &'static [(&'static str, Option<&'static str>)] = match field {
        "ports" if all_have("containerPort") => {
            &[("containerPort", None), ("protocol", Some("TCP"))]
        }
        "ports" if all_have("port") => &[("port", None), ("protocol", Some("TCP"))],
        "volumeMounts" if all_have("mountPath") => &[("mountPath", None)],
        "volumeDevices" if all_have("devicePath") => &[("devicePath", None)],
        "hostAliases" if all_have("ip") => &[("ip", None)],
        "topologySpreadConstraints" if all_have("topologyKey") => {
            &[("topologyKey", None), ("whenUnsatisfiable", None)]
        }
        "conditions" if all_have("type") => &[("type", None)],
        _ if all_have("name")
            && items
                .iter()
                .all(|i| i.get("name").and_then(Tree::as_str).is_some()) =>
        {
            &[("name", None)]
        }
        _ => return None,
    };
    Some(MergeKey { fields })
}

fn is_empty_json(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

/// Whether the live value carries everything the chart sets, as the API server would store it.
/// Maps compare as subsets (the server adds defaults); lists compare position by position.
pub fn chart_eq(chart: &Tree, live: Option<&Value>, quantity: bool) -> bool {
    let Some(live) = live.filter(|v| !v.is_null()) else {
        return chart.is_empty_value();
    };
    match (chart, live) {
        (Tree::Null, v) => is_empty_json(v),
        (Tree::Map(entries), Value::Object(map)) => entries.iter().all(|(k, c)| {
            chart_eq(
                c,
                map.get(&**k),
                quantity || holds_quantities(k) || &**k == "sizeLimit",
            )
        }),
        (Tree::List(items), Value::Array(live_items)) => {
            items.len() == live_items.len()
                && items
                    .iter()
                    .zip(live_items)
                    .all(|(c, l)| chart_eq(c, Some(l), quantity))
        }
        (Tree::Map(_) | Tree::List(_), v) => chart.is_empty_value() && is_empty_json(v),
        (scalar, v) => scalar_eq(scalar, v, quantity),
    }
}

fn scalar_eq(chart: &Tree, live: &Value, quantity: bool) -> bool {
    let same = match (chart, live) {
        (Tree::Bool(a), Value::Bool(b)) => a == b,
        (Tree::Str(a), Value::String(b)) => **a == **b,
        (Tree::Int(a), Value::Number(b)) => b.as_i64() == Some(*a) || b.as_f64() == Some(*a as f64),
        (Tree::Float(a), Value::Number(b)) => b.as_f64() == Some(*a),
        // int-or-string: a chart's `80` and the server's `"80"` (or the reverse) are one port.
        (Tree::Str(a), Value::Number(b)) => a.parse::<f64>().ok() == b.as_f64(),
        (Tree::Int(a), Value::String(b)) => b.parse::<i64>().ok() == Some(*a),
        (Tree::Float(a), Value::String(b)) => b.parse::<f64>().ok() == Some(*a),
        _ => false,
    };
    same || (quantity && {
        let chart_quantity = match chart {
            Tree::Str(s) => Quantity::parse(s),
            Tree::Int(i) => Quantity::parse(&i.to_string()),
            Tree::Float(f) => Quantity::parse(&f.to_string()),
            _ => None,
        };
        chart_quantity.is_some() && chart_quantity == Quantity::from_json(live)
    })
}

/// Equality of two live values with the same normalization (used for "did the request change
/// this field at all").
pub fn json_eq(a: Option<&Value>, b: Option<&Value>, quantity: bool) -> bool {
    let a = a.filter(|v| !is_empty_json(v));
    let b = b.filter(|v| !is_empty_json(v));
    match (a, b) {
        (None, None) => true,
        (None, Some(_)) | (Some(_), None) => false,
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            x.iter()
                .all(|(k, v)| json_eq(Some(v), y.get(k), quantity || holds_quantities(k)))
                && y.iter().all(|(k, v)| x.contains_key(k) || is_empty_json(v))
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(p, q)| json_eq(Some(p), Some(q), quantity))
        }
        (Some(x), Some(y)) => {
            x == y
                || match (x, y) {
                    (Value::String(s), Value::Number(n)) | (Value::Number(n), Value::String(s)) => {
                        s.parse::<f64>().ok() == n.as_f64()
                    }
                    _ => false,
                }
                || (quantity
                    && Quantity::from_json(x).is_some()
                    && Quantity::from_json(x) == Quantity::from_json(y))
        }
    }
}

/// A JSON patch that puts every changed field back to the chart's value.
pub fn repair_patch(changes: &[Change]) -> json_patch::Patch {
    use json_patch::{AddOperation, PatchOperation, ReplaceOperation};
    let ops = changes
        .iter()
        .filter_map(|change| {
            let path = json_patch::jsonptr::PointerBuf::parse(change.path.clone()).ok()?;
            let value = change.chart.clone();
            Some(match change.requested {
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

    fn tree(v: Value) -> Tree {
        Tree::from(&v)
    }

    fn paths(chart: Value, new: Value, old: Option<Value>) -> Vec<String> {
        locked_changes(&tree(chart), &new, old.as_ref(), &[])
            .into_iter()
            .map(|c| c.path)
            .collect()
    }

    #[test]
    fn a_changed_chart_field_is_a_change_and_an_unset_field_is_free() {
        let chart = json!({"spec": {"replicas": 3}});
        assert_eq!(
            paths(
                chart.clone(),
                json!({"spec": {"replicas": 7, "paused": true}}),
                Some(json!({"spec": {"replicas": 3}}))
            ),
            ["/spec/replicas"]
        );
        assert!(paths(
            chart,
            json!({"spec": {"replicas": 3, "paused": true}, "status": {"x": 1}}),
            Some(json!({"spec": {"replicas": 3}}))
        )
        .is_empty());
    }

    #[test]
    fn drift_that_already_happened_does_not_block_other_writes_and_going_back_is_allowed() {
        let chart = json!({"spec": {"replicas": 3, "image": "a"}});
        let old = json!({"spec": {"replicas": 5, "image": "a"}});
        assert!(paths(
            chart.clone(),
            json!({"spec": {"replicas": 5, "image": "a", "x": 1}}),
            Some(old.clone())
        )
        .is_empty());
        assert!(paths(
            chart.clone(),
            json!({"spec": {"replicas": 3, "image": "a"}}),
            Some(old.clone())
        )
        .is_empty());
        assert_eq!(
            paths(
                chart,
                json!({"spec": {"replicas": 6, "image": "a"}}),
                Some(old)
            ),
            ["/spec/replicas"]
        );
    }

    #[test]
    fn create_without_old_object_must_match_the_chart() {
        let chart = json!({"data": {"a": "1"}});
        assert!(paths(chart.clone(), json!({"data": {"a": "1", "b": "2"}}), None).is_empty());
        assert_eq!(paths(chart, json!({"data": {"a": "2"}}), None), ["/data/a"]);
    }

    #[test]
    fn quantities_compare_canonically_only_where_quantities_live() {
        let chart = json!({"resources": {"limits": {"cpu": "0.5", "memory": "1Gi"}, "requests": {"cpu": 1}}});
        let live = json!({"resources": {"limits": {"cpu": "500m", "memory": "1073741824"}, "requests": {"cpu": "1000m"}}});
        assert!(paths(chart.clone(), live.clone(), None).is_empty());
        let changed = json!({"resources": {"limits": {"cpu": "600m", "memory": "1Gi"}, "requests": {"cpu": "1"}}});
        assert_eq!(paths(chart, changed, Some(live)), ["/resources/limits/cpu"]);
        // In a ConfigMap "0.5" and "500m" are different strings.
        assert_eq!(
            paths(
                json!({"data": {"x": "0.5"}}),
                json!({"data": {"x": "500m"}}),
                None
            ),
            ["/data/x"]
        );
    }

    #[test]
    fn int_or_string_and_empty_values() {
        assert!(paths(
            json!({"spec": {"targetPort": 80}}),
            json!({"spec": {"targetPort": "80"}}),
            None
        )
        .is_empty());
        assert!(paths(
            json!({"spec": {"a": null, "b": {}, "c": []}}),
            json!({"spec": {}}),
            None
        )
        .is_empty());
        assert!(paths(
            json!({"metadata": {"labels": {}}}),
            json!({"metadata": {}}),
            None
        )
        .is_empty());
    }

    #[test]
    fn removing_a_chart_field_is_a_change_and_repair_adds_it_back() {
        let chart = json!({"metadata": {"labels": {"team": "a"}}, "data": {"k": "v"}});
        let old = json!({"metadata": {"labels": {"team": "a"}}, "data": {"k": "v"}});
        let new = json!({"metadata": {}, "data": {"k": "v"}});
        let changes = locked_changes(&tree(chart), &new, Some(&old), &[]);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].path, "/metadata/labels");
        assert_eq!(changes[0].requested, None);
        let mut repaired = new.clone();
        json_patch::patch(&mut repaired, &repair_patch(&changes)).unwrap();
        assert_eq!(repaired, old);
    }

    #[test]
    fn an_empty_keyed_list_locks_no_item_but_an_empty_plain_list_locks_the_list() {
        let chart = json!({"env": [], "args": []});
        let old = json!({"env": [], "args": []});
        // A sidecar injector or an operator adds an env var: not the chart's.
        let with_env = json!({"env": [{"name": "INJECTED", "value": "1"}], "args": []});
        assert!(paths(chart.clone(), with_env.clone(), Some(old.clone())).is_empty());
        assert!(drifted_fields(&tree(chart.clone()), &with_env, &[]).is_empty());
        // `args` is replaced whole: adding one changes what the chart set.
        let with_arg = json!({"env": [], "args": ["--debug"]});
        assert_eq!(paths(chart.clone(), with_arg.clone(), Some(old)), ["/args"]);
        assert_eq!(drifted_fields(&tree(chart), &with_arg, &[]).len(), 1);
    }

    #[test]
    fn containers_env_and_ports_match_by_merge_key_not_position() {
        let chart = json!({"containers": [
            {"name": "web", "image": "nginx:1.25", "env": [{"name": "A", "value": "1"}], "ports": [{"containerPort": 80}]},
            {"name": "side", "image": "busybox"}
        ]});
        // The server reordered nothing, but a user inserted a container first and defaults appeared.
        let live = json!({"containers": [
            {"name": "debug", "image": "x"},
            {"name": "side", "image": "busybox", "imagePullPolicy": "Always"},
            {"name": "web", "image": "nginx:1.25", "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}], "ports": [{"containerPort": 80, "protocol": "TCP"}]}
        ]});
        assert!(paths(chart.clone(), live.clone(), None).is_empty());
        let mut new = live.clone();
        new["containers"][2]["image"] = json!("nginx:1.27");
        new["containers"][2]["env"][1]["value"] = json!("9");
        assert_eq!(
            paths(chart.clone(), new.clone(), Some(live.clone())),
            ["/containers/2/env/1/value", "/containers/2/image"]
        );
        let mut repaired = new;
        let changes = locked_changes(&tree(chart.clone()), &repaired, Some(&live), &[]);
        json_patch::patch(&mut repaired, &repair_patch(&changes)).unwrap();
        assert_eq!(repaired, live);
        // Removing a chart container is a change at the list's append position.
        let removed =
            json!({"containers": [live["containers"][0].clone(), live["containers"][2].clone()]});
        assert_eq!(paths(chart, removed, Some(live)), ["/containers/-"]);
    }

    #[test]
    fn items_sharing_a_merge_key_pair_up_in_order() {
        // Found by the property tests (tests/properties.rs): env may repeat a name (the API
        // server only warns), and every chart item used to meet the first live item with its
        // name, so the second one was always reported as drift.
        let chart = json!({"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]});
        let live = chart.clone();
        assert!(paths(chart.clone(), live.clone(), None).is_empty());
        assert!(drifted_fields(&tree(chart.clone()), &live, &[]).is_empty());
        let mut changed = live.clone();
        changed["env"][1]["value"] = json!("3");
        assert_eq!(
            paths(chart.clone(), changed.clone(), Some(live)),
            ["/env/1/value"]
        );
        let drift: Vec<_> = drifted_fields(&tree(chart), &changed, &[])
            .into_iter()
            .map(|c| c.path)
            .collect();
        assert_eq!(drift, ["/env/1/value"]);
    }

    #[test]
    fn unkeyed_lists_compare_by_position_and_length() {
        let chart = json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]});
        let old = chart.clone();
        let mut new = chart.clone();
        new["rules"][0]["verbs"] = json!(["get", "list", "watch"]);
        assert_eq!(
            paths(chart.clone(), new, Some(old.clone())),
            ["/rules/0/verbs"]
        );
        let added_rule = json!({"rules": [chart["rules"][0].clone(), {"verbs": ["*"]}]});
        assert_eq!(paths(chart, added_rule, Some(old)), ["/rules"]);
    }

    #[test]
    fn ignored_pointers_and_wildcards_free_their_subtrees() {
        let chart = tree(
            json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}}),
        );
        let new = json!({"spec": {"replicas": 9, "template": {"spec": {"containers": [{"name": "a", "image": "y"}]}}}});
        assert_eq!(
            locked_changes(&chart, &new, None, &["/spec/replicas"]).len(),
            1
        );
        assert!(locked_changes(
            &chart,
            &new,
            None,
            &["/spec/replicas", "/spec/template/spec/containers/*/image"]
        )
        .is_empty());
        assert!(locked_changes(&chart, &new, None, &["/spec"]).is_empty());
        assert!(!is_ignored("/spec/replicasX", &["/spec/replicas"]));
    }

    #[test]
    fn scale_compares_only_the_replicas_path() {
        let chart = tree(json!({"spec": {"replicas": 3, "template": {}}}));
        let scale_new = json!({"kind": "Scale", "spec": {"replicas": 5}});
        let scale_old = json!({"kind": "Scale", "spec": {"replicas": 3}});
        let changes =
            locked_changes_at(&chart, "/spec/replicas", &scale_new, Some(&scale_old), &[]);
        assert_eq!(
            changes,
            [Change {
                path: "/spec/replicas".into(),
                chart: json!(3),
                requested: Some(json!(5))
            }]
        );
        let no_replicas = tree(json!({"spec": {}}));
        assert!(locked_changes_at(
            &no_replicas,
            "/spec/replicas",
            &scale_new,
            Some(&scale_old),
            &[]
        )
        .is_empty());
    }

    #[test]
    fn keys_with_slashes_are_escaped_in_pointers() {
        let chart = json!({"metadata": {"labels": {"app.kubernetes.io/name": "shop"}}});
        let new = json!({"metadata": {"labels": {"app.kubernetes.io/name": "other"}}});
        let changes = locked_changes(&tree(chart), &new, None, &[]);
        assert_eq!(changes[0].path, "/metadata/labels/app.kubernetes.io~1name");
        let mut repaired = new;
        json_patch::patch(&mut repaired, &repair_patch(&changes)).unwrap();
        assert_eq!(
            repaired["metadata"]["labels"]["app.kubernetes.io/name"],
            "shop"
        );
    }
}
