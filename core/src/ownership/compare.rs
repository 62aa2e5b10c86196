//! Values compared as the API server stores them: quantities canonically, numbers by value, an
//! empty list or map as no value; a chart's value and a request's read alike as a [`Node`].

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

    fn items(self) -> Option<Vec<Node<'a>>> {
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
                let item_ty = match schema.atom(ty) {
                    Atom::List { items, .. } => *items,
                    _ => TypeId::UNTYPED,
                };
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
