//! Values compared as the API server stores them: quantities canonically, numbers by value, an
//! empty list or map as no value; a chart's value and a request's read alike as a [`Node`].
//! [`stored_as`] compares the chart's value with a stored one: besides [`equal`], a zero value
//! the API server leaves out is no value, and an item of an atomic list may carry the defaults
//! the API server fills in.

use serde_json::Value;

use crate::quantity::Quantity;
use crate::schema::{Atom, ListType, Scalar, Schema, TypeId};
use crate::tree::Tree;

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
pub(super) fn same_json(
    schema: &Schema,
    ty: TypeId,
    new: Option<&Value>,
    old: Option<&Value>,
) -> bool {
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

pub(super) enum ScalarView<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a str),
    Composite,
}

impl<'a> Node<'a> {
    pub(super) fn scalar(self) -> ScalarView<'a> {
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

    pub(super) fn get(self, key: &str) -> Option<Node<'a>> {
        match self {
            Node::Tree(t) => t.get(key).map(Node::Tree),
            Node::Json(v) => v.get(key).map(Node::Json),
        }
    }

    /// Entries of a map whose value is not null.
    pub(super) fn entries(self) -> Option<Vec<(&'a str, Node<'a>)>> {
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

    pub(super) fn items(self) -> Option<Vec<Node<'a>>> {
        match self {
            Node::Tree(Tree::List(l)) => Some(l.iter().map(Node::Tree).collect()),
            Node::Json(Value::Array(a)) => Some(a.iter().map(Node::Json).collect()),
            _ => None,
        }
    }

    pub(super) fn to_json(self) -> Value {
        match self {
            Node::Tree(t) => t.to_json(),
            Node::Json(v) => v.clone(),
        }
    }
}

/// Whether two values are the same as the API server stores them: quantities canonically,
/// numbers by value, maps by their non-null entries; an empty list or map is no value at all
/// (Kubernetes' `omitempty`).
pub(super) fn equal(schema: &Schema, ty: TypeId, a: Node<'_>, b: Option<Node<'_>>) -> bool {
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
                let item_ty = item_type(schema, ty);
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

/// Whether the API server stores the chart's value `chart` (of type `ty`) as `stored`: [`equal`],
/// or equal once the API server's own normalisation is undone, the rule in docs/design.md ("As
/// the API server stores it"):
///
/// - `omits_zero` (the value is a field the API server encodes with `omitempty`,
///   [`Schema::omits_zero`]): the zero value `""`, `false` or `0` is no value;
/// - inside an atomic value, the same for the fields of built-in structs, and a stored object may
///   carry a field the chart's leaves out at the default the API server fills in ([`filled_in`]:
///   an Endpoints port's `protocol: TCP`). Lists keep their length and order, scalars their
///   value; any other field more is a difference.
pub(super) fn stored_as(
    schema: &Schema,
    ty: TypeId,
    chart: Node<'_>,
    stored: Option<Node<'_>>,
    omits_zero: bool,
) -> bool {
    if equal(schema, ty, chart, stored) {
        return true;
    }
    let Some(stored) = stored.filter(|n| !matches!(n.scalar(), ScalarView::Null)) else {
        return omits_zero && is_zero(schema, ty, chart);
    };
    match (chart.entries(), stored.entries()) {
        (Some(set), Some(kept)) => {
            set.iter().all(|(k, v)| {
                stored_as(
                    schema,
                    schema.field(ty, k),
                    *v,
                    stored.get(k),
                    schema.omits_zero(ty, k),
                )
            }) && kept.iter().all(|(k, v)| {
                chart
                    .get(k)
                    .is_some_and(|c| !matches!(c.scalar(), ScalarView::Null))
                    || filled_in(schema, ty, k, *v)
            })
        }
        (None, None) => match (chart.items(), stored.items()) {
            (Some(x), Some(y)) => {
                let item_ty = item_type(schema, ty);
                x.len() == y.len()
                    && x.iter()
                        .zip(&y)
                        .all(|(p, q)| stored_as(schema, item_ty, *p, Some(*q), false))
            }
            _ => false,
        },
        _ => false,
    }
}

/// `""`, `false` or `0` of a string, boolean or number.
fn is_zero(schema: &Schema, ty: TypeId, n: Node<'_>) -> bool {
    matches!(
        schema.atom(ty),
        Atom::Scalar(Scalar::String | Scalar::Number | Scalar::Boolean)
    ) && match n.scalar() {
        ScalarView::Str(s) => s.is_empty(),
        ScalarView::Bool(b) => !b,
        ScalarView::Int(i) => i == 0,
        ScalarView::Float(f) => f == 0.0,
        _ => false,
    }
}

/// Whether the API server fills field `key` of a `ty` in as `value` where the chart leaves it
/// out: a built-in struct's field at the default the API server gives it
/// ([`FILLED_IN`]: those defaults are in its code, not in its OpenAPI v2 document), a custom
/// resource's field at its schema's default.
fn filled_in(schema: &Schema, ty: TypeId, key: &str, value: Node<'_>) -> bool {
    let builtin = schema.is_go_struct(ty)
        && schema.is_declared_field(ty, key)
        && FILLED_IN
            .iter()
            .any(|(k, d)| *k == key && matches!(value.scalar(), ScalarView::Str(s) if s == *d));
    builtin
        || schema
            .field_default(ty, key)
            .is_some_and(|d| equal(schema, schema.field(ty, key), Node::Json(d), Some(value)))
}

/// Defaults the API server fills in inside the items of built-in atomic lists, measured on 1.20
/// and 1.36 (`tests/e2e/test_restore.py`): a port's `protocol` (an Endpoints subset's, a
/// NetworkPolicy rule's) and an admission webhook rule's `scope`.
const FILLED_IN: [(&str, &str); 2] = [("protocol", "TCP"), ("scope", "*")];

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

/// The type of a list's items (untyped when `ty` is not a list the schema knows).
fn item_type(schema: &Schema, ty: TypeId) -> TypeId {
    match schema.atom(ty) {
        Atom::List { items, .. } => *items,
        _ => TypeId::UNTYPED,
    }
}
