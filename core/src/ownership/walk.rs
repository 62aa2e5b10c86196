//! The walk of the chart's object beside a request's (and the stored one): what Helm owns in it,
//! by the schema, and which of those values the request changes.

use serde_json::{Map, Value};

use super::applied::{MANAGED_BY_LABEL, RELEASE_NAMESPACE_ANNOTATION, RELEASE_NAME_ANNOTATION};
use super::change::{Change, OwnedValue};
use super::compare::{equal, null_is_owned, same_json, stored_as, Node};
use super::item_key::{pair_key, ItemKey};
use super::pointer::{is_ignored, push_index, push_segment};
use crate::schema::{Atom, ListType, Schema, TypeId};
use crate::tree::Tree;

pub(super) struct Walk<'a> {
    schema: &'a Schema,
    ignore: &'a [&'a str],
    pub(super) changes: Vec<Change>,
    pub(super) path: String,
    /// A difference from the chart counts only when the value also changes from the old one
    /// (admission); off for drift, where there is no old value.
    against_old: bool,
    /// Record owned values equal to the chart's too ([`owned_values`](super::owned_values));
    /// `differs[i]` says which of `changes` differ.
    pub(super) keep_equal: bool,
    differs: Vec<bool>,
    /// The value visited next is a field the API server leaves out at its zero value
    /// ([`Schema::omits_zero`]); set before [`Walk::child`], taken by [`Walk::visit`].
    omits_zero: bool,
}

impl<'a> Walk<'a> {
    /// A walk that compares plain strings only (no schema needed).
    pub(super) fn new_unchecked(ignore: &'a [&'a str], against_old: bool) -> Self {
        static EMPTY: std::sync::OnceLock<Schema> = std::sync::OnceLock::new();
        Walk::new(EMPTY.get_or_init(Schema::empty), ignore, against_old)
    }

    pub(super) fn helm_metadata(
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
            self.leaf(TypeId::UNTYPED, &expected, new_value, old_value, false);
        }
        self.path.clear();
    }

    pub(super) fn new(schema: &'a Schema, ignore: &'a [&'a str], against_old: bool) -> Self {
        Walk {
            schema,
            ignore,
            changes: Vec::new(),
            path: String::new(),
            against_old,
            keep_equal: false,
            differs: Vec::new(),
            omits_zero: false,
        }
    }

    pub(super) fn owned_values(self) -> Vec<OwnedValue> {
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

    pub(super) fn object(&mut self, root: TypeId, chart: &Tree, new: &Value, old: Option<&Value>) {
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
            self.omits_zero = is_zero(chart_value) && self.schema.omits_zero(root, key);
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

    pub(super) fn visit(
        &mut self,
        ty: TypeId,
        chart: &Tree,
        new: Option<&Value>,
        old: Option<&Value>,
    ) {
        let omits_zero = std::mem::take(&mut self.omits_zero);
        if is_ignored(&self.path, self.ignore) {
            return;
        }
        if matches!(chart, Tree::Null) {
            // A null the API server attributes to Helm (a scalar, an atomic value) means
            // "absent", and is Helm's: setting it is a change. A null map or list owns nothing.
            if null_is_owned(self.schema.atom(ty)) {
                self.leaf(ty, chart, new, old, false);
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
            _ => self.leaf(ty, chart, new, old, omits_zero),
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
                    self.leaf(TypeId::UNTYPED, chart_value, n, o, false);
                }
                self.path.truncate(len);
                continue;
            }
            self.omits_zero = is_zero(chart_value) && schema.omits_zero(ty, key);
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
                    l.iter().any(|v| {
                        stored_as(schema, items, Node::Tree(item), Some(Node::Json(v)), false)
                    })
                })
            };
            if !present(new) && (!self.against_old || present(old)) {
                let len = self.path.len();
                self.path.push_str("/-");
                self.push(item, None);
                self.path.truncate(len);
            } else if self.keep_equal {
                let found = new.and_then(Value::as_array).and_then(|l| {
                    l.iter().enumerate().find(|(_, v)| {
                        stored_as(schema, items, Node::Tree(item), Some(Node::Json(v)), false)
                    })
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

    /// One owned value, compared as the API server stores it ([`stored_as`]; `omits_zero`: it
    /// is a field the API server leaves out at its zero value).
    fn leaf(
        &mut self,
        ty: TypeId,
        chart: &Tree,
        new: Option<&Value>,
        old: Option<&Value>,
        omits_zero: bool,
    ) {
        let schema = self.schema;
        let new_node = new.map(Node::Json);
        let chart_node = Node::Tree(chart);
        if stored_as(schema, ty, chart_node, new_node, omits_zero) {
            // An UPDATE from a stored value the chart's stands for to another one it also stands
            // for, but not to the chart's own: the stored object shows what the API server keeps
            // (a zero the API server kept though the tables say it omits it; a field inside an
            // atomic item), and the write removes or changes it.
            let stored_change = self.against_old
                && old.is_some_and(|o| !o.is_null())
                && !same_json(schema, ty, new, old)
                && !equal(schema, ty, chart_node, new_node)
                && stored_as(schema, ty, chart_node, old.map(Node::Json), omits_zero);
            if !stored_change {
                if self.keep_equal {
                    self.push_equal(chart, new);
                }
                return;
            }
            self.push(chart, new);
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

    /// An owned value equal to the chart's ([`owned_values`](super::owned_values) only).
    fn push_equal(&mut self, chart: &Tree, new: Option<&Value>) {
        self.changes.push(Change {
            path: self.path.clone(),
            chart: chart.to_json(),
            requested: new.filter(|v| !v.is_null()).cloned(),
        });
        self.differs.push(false);
    }
}

/// `""`, `false` or `0`: only these can stand for a field the API server leaves out (checked
/// before the schema is asked, on every key the chart sets).
fn is_zero(value: &Tree) -> bool {
    match value {
        Tree::Str(s) => s.is_empty(),
        Tree::Bool(b) => !b,
        Tree::Int(i) => *i == 0,
        Tree::Float(f) => *f == 0.0,
        _ => false,
    }
}
