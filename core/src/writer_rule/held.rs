//! What the reverter leaves to a rule's writers: the drifted paths an active rule gives away on
//! an object, as the object's own index paths, while the writer holds them (a rule naming a
//! field manager: that manager's managedFields entry owns the path; naming none: whoever wrote
//! it). When the rule goes or expires, the paths are drift again.
//!
//! On a release Helm applies server-side, the reverter hands a held path's ownership back to
//! Helm's `Apply` entry (the value stays the writer's): otherwise the next `helm upgrade`
//! conflicts with the writer's manager (`conflict with "scaler" with subresource "scale":
//! .spec.replicas`, measured on kube-apiserver 1.36.2 with Helm 4) and fails. A path Helm's
//! entry owns is then still the writer's.

use serde_json::{Map, Value};

use super::{never_given, RuleObject, WriterRule};

/// The paths of `live` (the object as the API server has it) that active `rules` covering
/// `object` give to their writers and that those writers hold, as JSON Pointers with list
/// indexes: the reverter's ignored paths. `now` in Unix seconds. `helm_apply`: Helm's field
/// manager when it applies the release server-side, whose entry holds a path handed back.
pub fn rule_held_paths(
    rules: &[&WriterRule],
    object: &RuleObject<'_>,
    live: &Value,
    helm_apply: Option<&str>,
    now: i64,
) -> Vec<String> {
    rule_holders(rules, object, live, helm_apply, now)
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

/// [`rule_held_paths`], each with the id of the (first) rule that holds it: what the plugin's
/// `diff` and `why` name instead of drift, from the very function the reverter follows.
pub fn rule_holders(
    rules: &[&WriterRule],
    object: &RuleObject<'_>,
    live: &Value,
    helm_apply: Option<&str>,
    now: i64,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for rule in rules
        .iter()
        .filter(|r| r.is_active(now) && r.matches_object(object))
    {
        for path in &rule.paths {
            let segments: Vec<&str> = path.split('/').skip(1).collect();
            let mut concrete = Vec::new();
            resolve(live, &segments, String::new(), &mut concrete);
            for p in concrete {
                let held = match rule.writers.field_manager.as_deref() {
                    None => true,
                    Some(manager) => {
                        owned_by(live, manager, &p)
                            || helm_apply.is_some_and(|helm| owned_by(live, helm, &p))
                    }
                };
                if held && !never_given(&p) && !out.iter().any(|(have, _)| *have == p) {
                    out.push((p, rule.id.clone()));
                }
            }
        }
    }
    out
}

/// Every index path of `value` that `segments` (a rule path's) name: `*` any child, `[k=v]` the
/// list items with those keys. A field the object lacks is still named (drift may remove it).
fn resolve(value: &Value, segments: &[&str], at: String, out: &mut Vec<String>) {
    let Some((first, rest)) = segments.split_first() else {
        out.push(at);
        return;
    };
    if *first == "*" {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    let mut next = at.clone();
                    crate::ownership::push_segment(&mut next, k);
                    resolve(v, rest, next, out);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    resolve(v, rest, format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
        return;
    }
    if let Some(pairs) = item_pairs(first) {
        if let Value::Array(items) = value {
            for (i, item) in items.iter().enumerate() {
                if pairs
                    .iter()
                    .all(|(k, v)| item.get(k).is_some_and(|have| same(have, v)))
                {
                    resolve(item, rest, format!("{at}/{i}"), out);
                }
            }
        }
        return;
    }
    let key = first.replace("~1", "/").replace("~0", "~");
    let next = format!("{at}/{first}");
    match value {
        Value::Array(items) => match key.parse::<usize>().ok().and_then(|i| items.get(i)) {
            Some(v) => resolve(v, rest, next, out),
            None => resolve(&Value::Null, rest, next, out),
        },
        _ => resolve(value.get(&key).unwrap_or(&Value::Null), rest, next, out),
    }
}

fn item_pairs(segment: &str) -> Option<Vec<(String, String)>> {
    let inner = segment.strip_prefix('[')?.strip_suffix(']')?;
    inner
        .split(',')
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.to_string(), v.replace("~1", "/").replace("~0", "~")))
        })
        .collect()
}

/// A key field's value against a rule's text: a string as itself, anything else as JSON.
fn same(have: &Value, want: &str) -> bool {
    match have {
        Value::String(s) => s == want,
        other => serde_json::from_str::<Value>(want).is_ok_and(|w| &w == other),
    }
}

/// Whether `manager`'s managedFields entry in `live` owns index path `path` (or a value above
/// it whole).
fn owned_by(live: &Value, manager: &str, path: &str) -> bool {
    let Some(entries) = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return false;
    };
    entries
        .iter()
        .filter(|e| e.get("manager").and_then(Value::as_str) == Some(manager))
        .filter_map(|e| e.get("fieldsV1").and_then(Value::as_object))
        .any(|fields| owns(fields, live, &path.split('/').skip(1).collect::<Vec<_>>()))
}

fn owns(fields: &Map<String, Value>, value: &Value, segments: &[&str]) -> bool {
    let Some((first, rest)) = segments.split_first() else {
        return true;
    };
    if fields.is_empty() {
        // Owned whole: a leaf, or an atomic value.
        return true;
    }
    let key = first.replace("~1", "/").replace("~0", "~");
    match value {
        Value::Array(items) => {
            let Some(item) = key.parse::<usize>().ok().and_then(|i| items.get(i)) else {
                return false;
            };
            fields.iter().any(|(k, child)| {
                let matches = match k.split_at_checked(2) {
                    Some(("k:", json)) => serde_json::from_str::<Map<String, Value>>(json)
                        .is_ok_and(|keys| keys.iter().all(|(f, v)| item.get(f) == Some(v))),
                    Some(("v:", json)) => {
                        serde_json::from_str::<Value>(json).is_ok_and(|v| &v == item)
                    }
                    Some(("i:", i)) => i == key,
                    _ => false,
                };
                matches && child.as_object().is_some_and(|c| owns(c, item, rest))
            })
        }
        _ => fields
            .get(&format!("f:{key}"))
            .and_then(Value::as_object)
            .is_some_and(|c| owns(c, value.get(&key).unwrap_or(&Value::Null), rest)),
    }
}
