//! A change's path in keyed form: a map-list item named by its keys, as denial messages name it
//! (`/spec/template/spec/containers/[name=web]/image` for `/spec/template/spec/containers/0/image`),
//! so a rule's path says which item whatever its place in the list.

use serde_json::Value;

use crate::ownership::{item_key, push_segment, Node};
use crate::schema::{Atom, ListType, Schema, TypeId};

/// `path` (a JSON Pointer into `object`, with list indexes, as [`crate::Change::path`] is) with
/// each index into a map-list (by the schema's `x-kubernetes-list-map-keys`) replaced by the
/// item's keys as `[k=v]` (`[k1=v1,k2=v2]`, keys sorted by name; a key the item omits takes the
/// schema's default). An index the object or the schema cannot name stays an index.
pub fn keyed_path(schema: &Schema, root: TypeId, object: &Value, path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 16);
    let (mut ty, mut value) = (root, Some(object));
    for raw in path.split('/').skip(1) {
        let segment = raw.replace("~1", "/").replace("~0", "~");
        match schema.atom(ty) {
            Atom::List { items, list_type } => {
                let item = segment
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| value.and_then(|v| v.get(i)));
                let named = match list_type {
                    ListType::Map(keys) => item
                        .and_then(|item| item_key(schema, *items, keys, Node::Json(item)))
                        .and_then(|key| serde_json::from_str(&key).ok())
                        .map(|key: serde_json::Map<String, Value>| item_segment(&key)),
                    _ => None,
                };
                match named {
                    Some(named) => push_segment(&mut out, &named),
                    None => {
                        out.push('/');
                        out.push_str(raw);
                    }
                }
                ty = *items;
                value = item;
            }
            _ => {
                out.push('/');
                out.push_str(raw);
                ty = schema.field(ty, &segment);
                value = value.and_then(|v| v.get(&segment));
            }
        }
    }
    out
}

/// `[name=web]`, `[containerPort=80,protocol=TCP]`: as `fields_v1::describe_field_path` writes
/// a managedFields key.
fn item_segment(key: &serde_json::Map<String, Value>) -> String {
    let pairs: Vec<String> = key
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect();
    format!("[{}]", pairs.join(","))
}
