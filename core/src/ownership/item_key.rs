//! A map-list item's identity: its key fields (or their defaults), to pair the chart's items
//! with a request's and the stored object's.

use std::collections::BTreeMap;

use serde_json::Value;

use super::compare::{Node, ScalarView};
use crate::schema::{Schema, TypeId};
use crate::tree::Tree;

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
pub(super) struct ItemKey<'a>([KeyPart<'a>; 4]);

pub(super) fn pair_key<'a>(
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
