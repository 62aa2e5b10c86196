//! Property tests (proptest) of the two comparisons everything rests on:
//!
//! - quantities: any spelling of a value parses to the value the API server stores for it
//!   (its canonical form, modelled here from apimachinery's `resource.Quantity`), and different
//!   values never compare equal;
//! - fields (ownership.rs, with a schema written for each generated object as a custom
//!   resource's would be: objects listed by `name` are map-lists, `limits`/`requests` hold
//!   quantities, other lists are atomic): a value always equals itself; what the API server (and other writers
//!   the design tolerates) does to a chart's object never counts as a change: map keys in
//!   another order, quantities canonicalized, `2.0` stored as `2`, empty values dropped, fields
//!   and list items added, lists of keyed items reordered; and a real change to a field the
//!   chart sets always counts, for admission and for drift.
//!
//! Not modelled, because ownership.rs does not claim it: Go's `omitempty` dropping `false`, `0`
//! and `""` (a chart's `hostNetwork: false` is absent on the server).

use helm_locker_core::{parse_manifest, Change, Quantity, Schema, Tree};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// Whether items of every keyed list agree on each field's shape, as items of one schema do
/// (the generator draws each item on its own).
fn consistent(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.values().all(consistent),
        Value::Array(items) => {
            items.iter().all(consistent)
                && (!is_keyed(items)
                    || items.iter().all(|a| items.iter().all(|b| compatible(a, b))))
        }
        _ => true,
    }
}

/// Whether two values can have one type.
fn compatible(a: &Value, b: &Value) -> bool {
    fn shape(v: &Value) -> u8 {
        match v {
            Value::Object(_) => 1,
            Value::Array(items) if is_keyed(items) => 2,
            Value::Array(_) => 3,
            _ => 4,
        }
    }
    match (a, b) {
        (Value::Null, _) | (_, Value::Null) => true,
        (Value::Object(x), Value::Object(y)) => x
            .iter()
            .all(|(k, v)| y.get(k).is_none_or(|w| compatible(v, w))),
        (Value::Array(x), Value::Array(y)) => {
            (x.is_empty() || y.is_empty() || shape(a) == shape(b))
                && x.iter().all(|p| y.iter().all(|q| compatible(p, q)))
        }
        _ => shape(a) == shape(b),
    }
}

fn is_keyed(items: &[Value]) -> bool {
    !items.is_empty()
        && items
            .iter()
            .all(|i| i.get("name").is_some_and(Value::is_string))
}

fn merge_examples(a: Value, b: Value) -> Value {
    let empty = |v: &Value| {
        v.is_null()
            || v.as_object().is_some_and(Map::is_empty)
            || v.as_array().is_some_and(Vec::is_empty)
    };
    match (a, b) {
        (Value::Object(mut x), Value::Object(y)) => {
            for (k, v) in y {
                let merged = match x.remove(&k) {
                    Some(old) => merge_examples(old, v),
                    None => v,
                };
                x.insert(k, merged);
            }
            Value::Object(x)
        }
        (a, Value::Null) => a,
        (a, b) if empty(&a) => b,
        (a, _) => a,
    }
}

/// The schema a custom resource definition would give `chart` (see the module comment).
fn schema_for(chart: &Value) -> Schema {
    fn node(v: &Value, quantities: bool) -> Value {
        match v {
            _ if quantities => {
                json!({"type": "object", "additionalProperties": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"}})
            }
            Value::Object(m) if m.is_empty() => {
                json!({"type": "object", "additionalProperties": {}})
            }
            Value::Object(m) => {
                let properties: Map<String, Value> = m
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            node(
                                v,
                                matches!(k.as_str(), "limits" | "requests") && v.is_object(),
                            ),
                        )
                    })
                    .collect();
                json!({"type": "object", "properties": properties})
            }
            Value::Array(items) => {
                if is_keyed(items) {
                    // Items share one type: the union of their fields, each field typed by the
                    // fullest example.
                    let mut merged = json!({});
                    for item in items {
                        merged = merge_examples(merged, item.clone());
                    }
                    let merged = merged.as_object().cloned().unwrap_or_default();
                    let fields: Map<String, Value> = merged
                        .into_iter()
                        .map(|(k, v)| {
                            let t = node(
                                &v,
                                matches!(k.as_str(), "limits" | "requests") && v.is_object(),
                            );
                            (k, t)
                        })
                        .collect();
                    json!({"type": "array", "items": {"type": "object", "properties": fields},
                           "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]})
                } else {
                    json!({"type": "array", "items": {}})
                }
            }
            Value::String(_) => json!({"type": "string"}),
            Value::Number(_) => json!({"type": "number"}),
            Value::Bool(_) => json!({"type": "boolean"}),
            Value::Null => json!({}),
        }
    }
    let mut root = node(chart, false);
    root["x-kubernetes-group-version-kind"] =
        json!([{"group": "", "version": "v1", "kind": "Thing"}]);
    let doc = json!({"definitions": {
        "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
        "thing": root,
    }});
    Schema::from_openapi_v2(doc.to_string().as_bytes()).unwrap()
}

fn locked_changes(chart: &Tree, new: &Value, old: Option<&Value>, ignore: &[&str]) -> Vec<Change> {
    let schema = schema_for(&chart.to_json());
    let root = schema.root_or_deduced("v1", "Thing");
    helm_locker_core::locked_changes(&schema, root, chart, new, old, ignore)
}

fn drifted_fields(chart: &Tree, live: &Value, ignore: &[&str]) -> Vec<Change> {
    let schema = schema_for(&chart.to_json());
    let root = schema.root_or_deduced("v1", "Thing");
    helm_locker_core::drifted_fields(&schema, root, chart, live, ignore)
}

// ------------------------------------------------------------------------------------------
// Quantities

/// A value written in a chart: `±mantissa * 10^scale`.
#[derive(Clone, Copy, Debug)]
struct Exact {
    negative: bool,
    mantissa: u64,
    scale: i32,
}

impl Exact {
    /// The value the API server keeps, in units of 1n: precision below 1n is rounded up, away
    /// from zero (apimachinery `ParseQuantity`: `amount.Round(amount, Nano, inf.RoundUp)`).
    fn nanos(self) -> i128 {
        let m = i128::from(self.mantissa);
        let magnitude = if self.scale >= -9 {
            m * 10i128.pow((self.scale + 9) as u32)
        } else {
            let unit = 10i128.pow((-9 - self.scale) as u32);
            m / unit + i128::from(m % unit != 0)
        };
        if self.negative {
            -magnitude
        } else {
            magnitude
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Format {
    DecimalSi,
    DecimalExponent,
    BinarySi,
}

const DECIMAL_SUFFIXES: [(i32, &str); 9] = [
    (-9, "n"),
    (-6, "u"),
    (-3, "m"),
    (3, "k"),
    (6, "M"),
    (9, "G"),
    (12, "T"),
    (15, "P"),
    (18, "E"),
];
const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// The string the API server stores for a value parsed in `format` (apimachinery
/// `Quantity.CanonicalizeBytes`): the largest exponent that is a multiple of 3 and loses no
/// digit, or for binary input of at least 1Ki that is a whole number, the largest power of 1024.
fn canonical(nanos: i128, format: Format) -> String {
    if nanos == 0 {
        return "0".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let magnitude = nanos.unsigned_abs();
    const BILLION: u128 = 1_000_000_000;
    if format == Format::BinarySi && magnitude >= 1024 * BILLION && magnitude % BILLION == 0 {
        let (mut value, mut power) = (magnitude / BILLION, 0);
        while value % 1024 == 0 && power < 6 {
            value /= 1024;
            power += 1;
        }
        return format!("{sign}{value}{}", BINARY_SUFFIXES[power]);
    }
    let (mut digits, mut exponent) = (magnitude, -9i32);
    while digits % 10 == 0 {
        digits /= 10;
        exponent += 1;
    }
    let down = exponent.rem_euclid(3);
    digits *= 10u128.pow(down as u32);
    exponent -= down;
    match (format, exponent) {
        (_, 0) => format!("{sign}{digits}"),
        (Format::DecimalExponent, e) => format!("{sign}{digits}e{e}"),
        (_, e) => {
            let suffix = DECIMAL_SUFFIXES.iter().find(|(x, _)| *x == e).unwrap().1;
            format!("{sign}{digits}{suffix}")
        }
    }
}

/// `digits * 10^scale` written out as a decimal, with `extra_zeros` after the point.
fn decimal(digits: u128, scale: i32, extra_zeros: usize, bare_point: bool) -> String {
    let text = digits.to_string();
    let zeros = "0".repeat(extra_zeros);
    if scale >= 0 {
        let point = if extra_zeros > 0 { "." } else { "" };
        return format!("{text}{}{point}{zeros}", "0".repeat(scale as usize));
    }
    let fraction = (-scale) as usize;
    let padded = format!("{text:0>width$}", width = fraction + 1);
    let (int, frac) = padded.split_at(padded.len() - fraction);
    let int = if bare_point && int == "0" { "" } else { int };
    format!("{int}.{frac}{zeros}")
}

/// One way a chart may write a value.
#[derive(Clone, Debug)]
struct Spelling {
    text: String,
    format: Format,
}

fn exact(min_scale: i32) -> impl Strategy<Value = Exact> {
    (any::<bool>(), 0u64..=1_000_000_000, min_scale..=9).prop_map(|(negative, mantissa, scale)| {
        Exact {
            negative,
            mantissa,
            scale,
        }
    })
}

/// The spellings of `x`: plain decimal, decimal suffix, exponent, binary suffix (whole values).
fn spell(x: Exact) -> impl Strategy<Value = Spelling> {
    let sign = move |plus: bool| {
        if x.negative {
            "-"
        } else if plus {
            "+"
        } else {
            ""
        }
    };
    let m = u128::from(x.mantissa);
    let nanos = x.nanos();
    let whole = nanos % 1_000_000_000 == 0 && nanos.unsigned_abs() <= 1_000_000_000_000_000;
    let binary_powers: Vec<usize> = if whole { vec![1, 2, 3] } else { vec![] };
    (
        0..4u8,
        any::<bool>(),
        0..3usize,
        any::<bool>(),
        prop::sample::select(DECIMAL_SUFFIXES.to_vec()),
        any::<bool>(),
        prop::sample::select(if binary_powers.is_empty() {
            vec![0]
        } else {
            binary_powers
        }),
    )
        .prop_map(
            move |(kind, plus, extra_zeros, bare_point, (k, suffix), upper, power)| {
                let sign = sign(plus);
                match kind {
                    0 => Spelling {
                        text: format!("{sign}{}", decimal(m, x.scale, extra_zeros, bare_point)),
                        format: Format::DecimalSi,
                    },
                    1 => Spelling {
                        text: format!(
                            "{sign}{}{suffix}",
                            decimal(m, x.scale - k, extra_zeros, bare_point)
                        ),
                        format: Format::DecimalSi,
                    },
                    3 if power > 0 => {
                        // value / 1024^power is a finite decimal: value * 5^(10 power) / 10^(10 power).
                        let value = nanos.unsigned_abs() / 1_000_000_000;
                        let digits = value * 5u128.pow(10 * power as u32);
                        Spelling {
                            text: format!(
                                "{sign}{}{}",
                                decimal(digits, -10 * power as i32, extra_zeros, bare_point),
                                BINARY_SUFFIXES[power]
                            ),
                            format: Format::BinarySi,
                        }
                    }
                    _ => Spelling {
                        text: format!("{sign}{m}{}{}", if upper { "E" } else { "e" }, x.scale),
                        format: Format::DecimalExponent,
                    },
                }
            },
        )
}

fn exact_and_spelling(min_scale: i32) -> impl Strategy<Value = (Exact, Spelling)> {
    exact(min_scale).prop_flat_map(|x| (Just(x), spell(x)))
}

fn parse(text: &str) -> Quantity {
    Quantity::parse(text).unwrap_or_else(|| panic!("{text:?} should parse"))
}

fn limits(cpu: Value) -> Value {
    json!({"spec": {"resources": {"limits": {"cpu": cpu}}}})
}

#[test]
fn quantities_the_api_server_stores_differently_are_equal() {
    for (chart, server) in [
        ("1000m", "1"),
        ("0.5", "500m"),
        ("1Gi", "1024Mi"),
        ("1.5Gi", "1536Mi"),
        ("1.5", "1500m"),
        ("1e3", "1k"),
        ("0.1Ki", "102400m"),
        ("2048Ki", "2Mi"),
        ("0.1n", "1n"),
        ("-0.1n", "-1n"),
    ] {
        assert_eq!(parse(chart), parse(server), "{chart} {server}");
    }
    assert_ne!(parse("1Gi"), parse("1G"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn a_quantity_equals_the_form_the_api_server_stores((x, spelling) in exact_and_spelling(-12)) {
        let stored = canonical(x.nanos(), spelling.format);
        prop_assert_eq!(parse(&spelling.text), parse(&stored), "{} is stored as {}", spelling.text, stored);
        let decimal_form = canonical(x.nanos(), Format::DecimalSi);
        prop_assert_eq!(parse(&spelling.text), parse(&decimal_form));
        // As the comparison sees it: the chart's spelling, the server's canonical string.
        let chart = Tree::from(&limits(json!(spelling.text)));
        let live = limits(json!(stored));
        prop_assert!(locked_changes(&chart, &live, None, &[]).is_empty());
        prop_assert!(drifted_fields(&chart, &live, &[]).is_empty());
    }

    #[test]
    fn a_json_number_equals_the_form_the_api_server_stores(x in exact(-9)) {
        // Charts write `cpu: 1` or `cpu: 0.25`: a number, not a string.
        let text = decimal(u128::from(x.mantissa), x.scale, 0, false);
        let text = if x.negative { format!("-{text}") } else { text };
        let number: Value = serde_json::from_str(&text).unwrap();
        let stored = canonical(x.nanos(), Format::DecimalSi);
        prop_assert_eq!(Quantity::from_json(&number), Some(parse(&stored)), "{}", text);
        let chart = Tree::from(&limits(number));
        prop_assert!(drifted_fields(&chart, &limits(json!(stored)), &[]).is_empty());
    }

    #[test]
    fn different_quantities_never_compare_equal(
        (x, a) in exact_and_spelling(-9),
        (y, b) in exact_and_spelling(-9),
    ) {
        prop_assume!(x.nanos() != y.nanos());
        prop_assert_ne!(parse(&a.text), parse(&b.text), "{} and {}", a.text, b.text);
        let chart = Tree::from(&limits(json!(a.text)));
        let live = limits(json!(canonical(y.nanos(), b.format)));
        prop_assert!(!drifted_fields(&chart, &live, &[]).is_empty());
        prop_assert!(!locked_changes(&chart, &live, Some(&limits(json!(a.text))), &[]).is_empty());
    }
}

// ------------------------------------------------------------------------------------------
// Field comparison

/// A chart's value and what the API server holds for it (`None`: the field is absent).
type Pair = (Value, Option<Value>);

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "[a-e]{1,2}",
        1 => Just("x/y".to_string()),
        1 => Just("t~1".to_string()),
    ]
}

fn scalar() -> impl Strategy<Value = Pair> {
    prop_oneof![
        "[a-z]{0,4}".prop_map(|s| (json!(s), Some(json!(s)))),
        (-1000i64..1000).prop_map(|i| (json!(i), Some(json!(i)))),
        (-1000i64..1000).prop_map(|i| (json!(i as f64 + 0.5), Some(json!(i as f64 + 0.5)))),
        // The chart's `2.0` is stored as `2` in an integer field.
        (-1000i64..1000).prop_map(|i| (json!(i as f64), Some(json!(i)))),
        any::<bool>().prop_map(|b| (json!(b), Some(json!(b)))),
        any::<bool>().prop_map(|keep| (Value::Null, keep.then_some(Value::Null))),
    ]
}

/// A quantity as a chart writes it and as the API server stores it.
fn quantity_pair() -> impl Strategy<Value = Pair> {
    exact_and_spelling(-12).prop_map(|(x, spelling)| {
        let stored = json!(canonical(x.nanos(), spelling.format));
        (json!(spelling.text), Some(stored))
    })
}

/// Extra fields the server or another writer adds (defaults, annotations): keys the chart
/// never uses.
fn extras() -> impl Strategy<Value = Vec<(String, Value)>> {
    prop::collection::vec(
        (
            "zz[a-c]",
            prop_oneof![
                any::<i64>().prop_map(|i| json!(i)),
                "[a-z]{1,3}".prop_map(|s| json!(s))
            ],
        ),
        0..2,
    )
}

/// A chart's empty map or list may be stored or left out (`omitempty`). A map the chart fills
/// is kept even when the server dropped all its entries: Go drops only what is empty when
/// decoded, it does not cascade.
fn empty_or_absent(chart_empty: bool, server: Value, keep: bool) -> Option<Value> {
    if chart_empty && !keep {
        None
    } else {
        Some(server)
    }
}

fn map_of(inner: BoxedStrategy<Pair>) -> impl Strategy<Value = Pair> {
    (
        prop::collection::btree_map(key(), inner, 0..4),
        extras(),
        any::<bool>(),
    )
        .prop_map(|(entries, extras, keep_empty)| {
            let mut chart = Map::new();
            let mut server = Map::new();
            for (k, (c, s)) in entries {
                chart.insert(k.clone(), c);
                if let Some(s) = s {
                    server.insert(k, s);
                }
            }
            for (k, v) in extras {
                server.insert(k, v);
            }
            // An empty struct is stored (`emptyDir: {}`); only an empty map may be dropped,
            // and a chart's empty map owns nothing either way: the generator stores it.
            let _ = keep_empty;
            (Value::Object(chart), Some(Value::Object(server)))
        })
}

/// Inside a list nothing is dropped: a position holds `null` or `{}`.
fn in_list((chart, server): Pair) -> (Value, Value) {
    let server = server.unwrap_or_else(|| match chart {
        Value::Object(_) => json!({}),
        Value::Array(_) => json!([]),
        _ => Value::Null,
    });
    (chart, server)
}

/// A list of objects keyed by `name` (containers, env): the server (or a strategic merge) may
/// reorder it and others may add items, but items sharing a name keep their order.
fn keyed_list(inner: BoxedStrategy<Pair>) -> impl Strategy<Value = Pair> {
    (
        prop::collection::vec(("[abc]", map_of(inner)), 0..4),
        any::<u64>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(items, shuffle, extra, keep_empty)| {
            let mut chart = Vec::new();
            let mut server = Vec::new();
            for (name, pair) in items {
                let (mut c, mut s) = in_list(pair);
                c.as_object_mut()
                    .unwrap()
                    .insert("name".into(), json!(name));
                s.as_object_mut()
                    .unwrap()
                    .insert("name".into(), json!(name));
                chart.push(c);
                server.push(s);
            }
            let server = reorder_keeping_same_names_in_order(server, shuffle);
            let mut server = server;
            if extra && !chart.is_empty() {
                server.insert(0, json!({"name": "zz-injected", "zza": 1}));
            }
            let server = empty_or_absent(chart.is_empty(), Value::Array(server), keep_empty);
            (Value::Array(chart), server)
        })
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn reorder_keeping_same_names_in_order(items: Vec<Value>, seed: u64) -> Vec<Value> {
    let mut state = seed | 1;
    let mut order: Vec<usize> = (0..items.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, (xorshift(&mut state) % (i as u64 + 1)) as usize);
    }
    // Slots keep the shuffled positions; each name fills its slots in its original order.
    let name = |v: &Value| v["name"].as_str().unwrap().to_string();
    let mut out = vec![Value::Null; items.len()];
    for n in items
        .iter()
        .map(name)
        .collect::<std::collections::BTreeSet<_>>()
    {
        let slots: Vec<usize> = order
            .iter()
            .enumerate()
            .filter(|(_, &from)| name(&items[from]) == n)
            .map(|(slot, _)| slot)
            .collect();
        let originals = items.iter().filter(|v| name(v) == n);
        for (slot, item) in slots.into_iter().zip(originals) {
            out[slot] = item.clone();
        }
    }
    out
}

fn pair() -> impl Strategy<Value = Pair> {
    scalar().prop_recursive(4, 48, 4, |inner| {
        let inner = inner.boxed();
        prop_oneof![
            3 => map_of(inner.clone()),
            1 => keyed_list(inner.clone()),
            // A list replaced whole (atomic) is stored as written: the server neither reorders
            // nor adds to its items.
            1 => prop::collection::vec(inner, 0..4).prop_map(|items| {
                let (chart, _): (Vec<_>, Vec<Value>) = items.into_iter().map(in_list).unzip();
                (Value::Array(chart.clone()), Some(Value::Array(chart)))
            }),
            1 => (
                prop::sample::select(vec!["limits", "requests"]),
                prop::collection::btree_map(
                    prop::sample::select(vec!["cpu", "memory", "storage"]),
                    quantity_pair(),
                    1..3,
                ),
            )
                .prop_map(|(field, quantities)| {
                    let chart: Map<_, _> = quantities.iter().map(|(k, (c, _))| (k.to_string(), c.clone())).collect();
                    let server: Map<_, _> = quantities.into_iter().map(|(k, (_, s))| (k.to_string(), s.unwrap())).collect();
                    (json!({ field: chart }), Some(json!({ field: server })))
                }),
        ]
    })
}

/// A chart object (its `spec` generated) and the object the API server holds for it.
fn object() -> impl Strategy<Value = (Value, Value)> {
    map_of(pair().boxed()).prop_map(|(chart, server)| {
        let wrap = |spec: Value| {
            json!({"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "x"}, "spec": spec})
        };
        (wrap(chart), wrap(server.unwrap_or_else(|| json!({}))))
    })
}

/// The chart as Helm renders it, map keys in any order, read back as the index reads it.
fn chart_tree(chart: &Value, seed: u64) -> Tree {
    fn render(v: &Value, state: &mut u64, out: &mut String) {
        match v {
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                for i in (1..entries.len()).rev() {
                    entries.swap(i, (xorshift(state) % (i as u64 + 1)) as usize);
                }
                out.push('{');
                for (i, (k, v)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&serde_json::to_string(k).unwrap());
                    out.push_str(": ");
                    render(v, state, out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    render(v, state, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&serde_json::to_string(scalar).unwrap()),
        }
    }
    let mut text = String::from("# Source: chart/templates/thing.yaml\n");
    let mut state = seed | 1;
    render(chart, &mut state, &mut text);
    text.push('\n');
    let manifest = parse_manifest(&text);
    assert_eq!(manifest.skipped, [], "{text}");
    manifest
        .objects
        .into_iter()
        .next()
        .unwrap()
        .content
        .unpack()
}

/// JSON pointers of the scalars under `/spec` that came from the chart (not added by others).
fn chart_scalars(v: &Value, path: &str, out: &mut Vec<String>) {
    let escape = |k: &str| k.replace('~', "~0").replace('/', "~1");
    match v {
        Value::Object(map) => {
            if map.get("name").and_then(Value::as_str) == Some("zz-injected") {
                return;
            }
            for (k, child) in map {
                if !k.starts_with("zz") {
                    chart_scalars(child, &format!("{path}/{}", escape(k)), out);
                }
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                chart_scalars(child, &format!("{path}/{i}"), out);
            }
        }
        Value::Null => {}
        _ => out.push(path.to_string()),
    }
}

fn changed(value: &Value) -> Value {
    match value {
        Value::String(s) => json!(format!("{s}x")),
        Value::Bool(b) => json!(!b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => json!(i + 1),
            None => json!(n.as_f64().unwrap() + 1.0),
        },
        other => panic!("not a scalar: {other}"),
    }
}

fn paths(changes: &[Change]) -> Vec<&str> {
    changes.iter().map(|c| c.path.as_str()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { max_global_rejects: 1_000_000, ..ProptestConfig::with_cases(1000) })]

    #[test]
    fn a_value_always_equals_itself((chart, _) in object()) {
        prop_assume!(consistent(&chart));
        let tree = Tree::from(&chart);
        let changes = locked_changes(&tree, &chart, None, &[]);
        prop_assert!(changes.is_empty(), "{:?}", paths(&changes));
        let changes = locked_changes(&tree, &chart, Some(&chart), &[]);
        prop_assert!(changes.is_empty(), "{:?}", paths(&changes));
        let drift = drifted_fields(&tree, &chart, &[]);
        prop_assert!(drift.is_empty(), "{:?}", paths(&drift));
    }

    #[test]
    fn what_the_api_server_stores_for_the_chart_is_no_change(
        (chart, server) in object(),
        seed in any::<u64>(),
    ) {
        prop_assume!(consistent(&chart));
        let tree = chart_tree(&chart, seed);
        let changes = locked_changes(&tree, &server, None, &[]);
        prop_assert!(changes.is_empty(), "create: {:?} {} {}", paths(&changes), tree.to_json(), server);
        let changes = locked_changes(&tree, &server, Some(&server), &[]);
        prop_assert!(changes.is_empty(), "update: {:?}", paths(&changes));
        let drift = drifted_fields(&tree, &server, &[]);
        prop_assert!(drift.is_empty(), "drift: {:?} {} {}", paths(&drift), tree.to_json(), server);
    }

    #[test]
    fn a_real_change_to_a_chart_field_always_counts(
        (chart, server) in object(),
        seed in any::<u64>(),
        pick in any::<prop::sample::Index>(),
    ) {
        prop_assume!(consistent(&chart));
        let mut candidates = Vec::new();
        chart_scalars(&server["spec"], "/spec", &mut candidates);
        prop_assume!(!candidates.is_empty());
        let pointer = pick.get(&candidates);
        let mut new = server.clone();
        let field = new.pointer_mut(pointer).unwrap();
        *field = changed(field);
        let tree = chart_tree(&chart, seed);
        let changes = locked_changes(&tree, &new, Some(&server), &[]);
        prop_assert!(!changes.is_empty(), "{} changed in {}", pointer, new);
        let drift = drifted_fields(&tree, &new, &[]);
        prop_assert!(!drift.is_empty(), "{} changed in {}", pointer, new);
    }
}

/// A payload that compresses as a tenant's bomb does (long runs) or does not (noise), at any size.
fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (any::<u8>(), 0usize..200_000).prop_map(|(b, n)| vec![b; n]),
        prop::collection::vec(any::<u8>(), 0..4_000),
    ]
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Bounded before decoded: a payload within the limit decompresses whole, one over it is
    /// too large, whatever its gzip trailer claims; nothing ever comes out longer than the limit.
    #[test]
    fn decompression_never_goes_past_the_limit(
        data in payload(),
        limit in 0u64..250_000,
        claim in prop::option::of(any::<u32>()),
    ) {
        let mut gz = gzip(&data);
        if let Some(claim) = claim {
            let at = gz.len() - 4;
            gz[at..].copy_from_slice(&claim.to_le_bytes());
        }
        let honest = claim.is_none_or(|c| u64::from(c) == data.len() as u64);
        match helm_locker_core::gunzip_within(&gz, limit) {
            Ok(out) => {
                prop_assert!(out.len() as u64 <= limit);
                prop_assert_eq!(&out, &data);
            }
            Err(helm_locker_core::DecodeError::TooLarge { limit: l }) => {
                prop_assert_eq!(l, limit);
                // Too large, or a trailer that says so (refused before decompressing).
                prop_assert!(data.len() as u64 > limit || claim.is_some_and(|c| u64::from(c) > limit));
            }
            Err(e) => prop_assert!(!honest, "{}", e),
        }
        if honest && data.len() as u64 <= limit {
            prop_assert!(helm_locker_core::gunzip_within(&gz, limit).is_ok());
        }
    }

    /// Any bytes at all, as gzip: never more than the limit out.
    #[test]
    fn garbage_never_decompresses_past_the_limit(
        mut data in prop::collection::vec(any::<u8>(), 0..2_000),
        limit in 0u64..10_000,
    ) {
        let magic = [0x1f, 0x8b, 0x08];
        for (i, b) in magic.iter().enumerate() {
            if let Some(d) = data.get_mut(i) {
                *d = *b;
            }
        }
        if let Ok(out) = helm_locker_core::gunzip_within(&data, limit) {
            prop_assert!(out.len() as u64 <= limit);
        }
    }
}
