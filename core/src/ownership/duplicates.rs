//! Items a write repeats, or leaves without their key fields, in a list server-side apply reads
//! by key: the object could no longer be applied.

use std::collections::HashMap;

use serde_json::Value;

use super::change::Change;
use super::compare::Node;
use super::item_key::{normalize_number, pair_key, ItemKey};
use super::pointer::{push_index, push_segment};
use crate::schema::{Atom, ListType, Schema, TypeId};

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
