//! A compact, immutable JSON-like tree for chart content.
//!
//! The index holds the chart's view of every locked object for as long as the release is
//! deployed, so its representation matters: `serde_json::Value` spends a B-tree node on every
//! map. A `Tree` map is one sorted boxed slice (binary-searched), strings are boxed `str`s, and
//! nothing is mutable after parsing. Duplicate keys keep the last value, as the API server does.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Serialize, Serializer};
use serde_json::Value;

#[derive(Clone, Debug, PartialEq)]
pub enum Tree {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Box<str>),
    List(Box<[Tree]>),
    /// Entries sorted by key, keys unique.
    Map(Box<[(Box<str>, Tree)]>),
}

impl Tree {
    pub fn get(&self, key: &str) -> Option<&Tree> {
        match self {
            Tree::Map(entries) => entries
                .binary_search_by(|(k, _)| (**k).cmp(key))
                .ok()
                .map(|i| &entries[i].1),
            _ => None,
        }
    }

    /// Follows a JSON pointer made of map keys only (e.g. `/spec/replicas`).
    pub fn pointer(&self, pointer: &str) -> Option<&Tree> {
        pointer
            .split('/')
            .skip(1)
            .try_fold(self, |node, key| node.get(key))
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Tree::Str(s) => Some(s),
            _ => None,
        }
    }

    /// `null`, `{}` and `[]` mean "nothing" to the API server.
    pub(crate) fn is_empty_value(&self) -> bool {
        match self {
            Tree::Null => true,
            Tree::List(items) => items.is_empty(),
            Tree::Map(entries) => entries.is_empty(),
            _ => false,
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            Tree::Null => Value::Null,
            Tree::Bool(b) => Value::Bool(*b),
            Tree::Int(i) => Value::from(*i),
            Tree::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Tree::Str(s) => Value::String(s.to_string()),
            Tree::List(items) => Value::Array(items.iter().map(Tree::to_json).collect()),
            Tree::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_json()))
                    .collect(),
            ),
        }
    }

    /// Builds a map from entries in any order; a repeated key keeps its last value.
    pub(crate) fn map_from(mut entries: Vec<(Box<str>, Tree)>) -> Tree {
        // Stable sort keeps insertion order among equal keys; of a run of equal keys the first
        // stays in place and takes the value of the last.
        if !entries.is_sorted_by(|a, b| a.0 < b.0) {
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    std::mem::swap(&mut later.1, &mut kept.1);
                }
                same
            });
        }
        Tree::Map(entries.into_boxed_slice())
    }

    /// Approximate heap bytes held by this tree (for memory reports).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Tree::Str(s) => s.len(),
            Tree::List(items) => {
                items.len() * std::mem::size_of::<Tree>()
                    + items.iter().map(Tree::heap_bytes).sum::<usize>()
            }
            Tree::Map(entries) => {
                entries.len() * std::mem::size_of::<(Box<str>, Tree)>()
                    + entries
                        .iter()
                        .map(|(k, v)| k.len() + v.heap_bytes())
                        .sum::<usize>()
            }
            _ => 0,
        }
    }
}

impl From<&Value> for Tree {
    fn from(value: &Value) -> Self {
        match value {
            Value::Null => Tree::Null,
            Value::Bool(b) => Tree::Bool(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Tree::Int(i),
                None => Tree::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => Tree::Str(s.as_str().into()),
            Value::Array(items) => Tree::List(items.iter().map(Tree::from).collect()),
            Value::Object(map) => Tree::map_from(
                map.iter()
                    .map(|(k, v)| (k.as_str().into(), Tree::from(v)))
                    .collect(),
            ),
        }
    }
}

impl Serialize for Tree {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Tree::Null => serializer.serialize_unit(),
            Tree::Bool(b) => serializer.serialize_bool(*b),
            Tree::Int(i) => serializer.serialize_i64(*i),
            // JSON has no NaN or infinity; the API server would refuse them anyway.
            Tree::Float(f) if !f.is_finite() => serializer.serialize_unit(),
            Tree::Float(f) => serializer.serialize_f64(*f),
            Tree::Str(s) => serializer.serialize_str(s),
            Tree::List(items) => serializer.collect_seq(items.iter()),
            Tree::Map(entries) => serializer.collect_map(entries.iter().map(|(k, v)| (&**k, v))),
        }
    }
}

impl<'de> Deserialize<'de> for Tree {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TreeVisitor)
    }
}

struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Tree;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML or JSON value")
    }
    fn visit_unit<E>(self) -> Result<Tree, E> {
        Ok(Tree::Null)
    }
    fn visit_none<E>(self) -> Result<Tree, E> {
        Ok(Tree::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Tree, D::Error> {
        Tree::deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Tree, E> {
        Ok(Tree::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Tree, E> {
        Ok(Tree::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Tree, E> {
        Ok(i64::try_from(v).map_or(Tree::Float(v as f64), Tree::Int))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Tree, E> {
        Ok(Tree::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Tree, E> {
        Ok(Tree::Str(v.into()))
    }
    fn visit_string<E>(self, v: String) -> Result<Tree, E> {
        Ok(Tree::Str(v.into_boxed_str()))
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Tree, E> {
        Ok(Tree::Str(String::from_utf8_lossy(v).into()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tree, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element::<Tree>()? {
            items.push(item);
        }
        Ok(Tree::List(items.into_boxed_slice()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tree, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(key) = map.next_key::<Key>()? {
            entries.push((key.0, map.next_value::<Tree>()?));
        }
        Ok(Tree::map_from(entries))
    }
}

/// A map key: YAML allows numbers and booleans as keys; JSON (and the API server) turn them
/// into strings.
struct Key(Box<str>);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map key")
            }
            fn visit_str<E>(self, v: &str) -> Result<Key, E> {
                Ok(Key(v.into()))
            }
            fn visit_string<E>(self, v: String) -> Result<Key, E> {
                Ok(Key(v.into_boxed_str()))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Key, E> {
                Ok(Key(v.to_string().into()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Key, E> {
                Ok(Key(v.to_string().into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Key, E> {
                Ok(Key(v.to_string().into()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Key, E> {
                Ok(Key(v.to_string().into()))
            }
            fn visit_unit<E>(self) -> Result<Key, E> {
                Ok(Key("null".into()))
            }
        }
        deserializer.deserialize_any(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_keep_the_last_value() {
        let t = Tree::map_from(vec![
            ("spec".into(), Tree::Int(1)),
            ("a".into(), Tree::Null),
            ("spec".into(), Tree::Int(2)),
        ]);
        assert_eq!(t.get("spec"), Some(&Tree::Int(2)));
        assert_eq!(t.get("a"), Some(&Tree::Null));
        assert_eq!(t.get("b"), None);
    }

    #[test]
    fn json_round_trip_keeps_values() {
        let v = serde_json::json!({"b": [1, 2.5, "x", null, true], "a": {"c": {}}});
        let t = Tree::from(&v);
        assert_eq!(t.to_json(), v);
        assert_eq!(t.pointer("/a/c"), Some(&Tree::Map(Box::new([]))));
        assert!(t.pointer("/a/c").unwrap().is_empty_value());
        let parsed: Tree = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(parsed, t);
    }

    #[test]
    fn non_string_yaml_keys_become_strings() {
        let t: Tree = serde_saphyr::from_str("1: one\ntrue: yes\n").unwrap();
        assert_eq!(t.get("1").and_then(Tree::as_str), Some("one"));
        assert_eq!(t.get("true"), Some(&Tree::Bool(true)));
    }
}
