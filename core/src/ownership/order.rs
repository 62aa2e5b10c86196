//! Endpoints' unordered sets put in one order, so that the same sets sent in another order are
//! no change.

use std::borrow::Cow;

use serde_json::Value;

use crate::tree::Tree;

/// Whether a kind's lists hold sets that the API server stores in the order they are sent:
/// Endpoints' `subsets`, and each subset's `addresses`, `notReadyAddresses` and `ports` ("sets
/// of addresses and ports", core/v1). kube-apiserver does not repack them (its Endpoints
/// strategy canonicalizes nothing: measured on 1.20 in `tests/e2e/test_restore.py`), while the
/// endpoints controller and restore tools write them in their own order. Compared in one order
/// ([`in_one_order`]), the same sets in another order are no change.
pub(crate) fn has_unordered_sets(group: &str, kind: &str) -> bool {
    group.is_empty() && kind == "Endpoints"
}

/// `value` (an object of `group`/`kind`) with its unordered sets in one order: addresses by IP,
/// ports by name, port and protocol, then the subsets by what they hold.
pub(crate) fn in_one_order<'v>(group: &str, kind: &str, value: &'v Value) -> Cow<'v, Value> {
    let Some(subsets) = value.get("subsets").and_then(Value::as_array) else {
        return Cow::Borrowed(value);
    };
    if !has_unordered_sets(group, kind) {
        return Cow::Borrowed(value);
    }
    let text = |v: &Value, field: &str| match v.get(field) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let port = |v: &Value| v.get("port").and_then(Value::as_i64).unwrap_or_default();
    let mut subsets: Vec<Value> = subsets.clone();
    for subset in &mut subsets {
        for field in ["addresses", "notReadyAddresses"] {
            if let Some(Value::Array(addresses)) = subset.get_mut(field) {
                addresses.sort_by_cached_key(|a| (text(a, "ip"), a.to_string()));
            }
        }
        if let Some(Value::Array(ports)) = subset.get_mut("ports") {
            ports.sort_by_cached_key(|p| (text(p, "name"), port(p), text(p, "protocol")));
        }
    }
    subsets.sort_by_cached_key(Value::to_string);
    let mut value = value.clone();
    value["subsets"] = Value::Array(subsets);
    Cow::Owned(value)
}

/// The chart's object in the order [`in_one_order`] compares it in.
pub(crate) fn chart_in_one_order<'t>(
    group: &str,
    kind: &str,
    chart: Cow<'t, Tree>,
) -> Cow<'t, Tree> {
    if !has_unordered_sets(group, kind) || chart.get("subsets").is_none() {
        return chart;
    }
    let json = chart.to_json();
    Cow::Owned(Tree::from(in_one_order(group, kind, &json).as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn endpoints_sets_are_put_in_one_order_and_other_kinds_are_left_alone() {
        let ep = |subsets: Value| json!({"subsets": subsets});
        let a = ep(json!([
            {"addresses": [{"ip": "10.0.0.9"}, {"ip": "10.0.0.1"}], "notReadyAddresses": [{"ip": "b"}, {"ip": "a"}],
             "ports": [{"name": "b", "port": 90}, {"name": "a", "port": 80}]},
            {"addresses": [{"ip": "10.1.0.1"}], "ports": [{"name": "a", "port": 81}]}
        ]));
        let b = ep(json!([
            {"addresses": [{"ip": "10.1.0.1"}], "ports": [{"name": "a", "port": 81}]},
            {"ports": [{"port": 80, "name": "a"}, {"name": "b", "port": 90}], "notReadyAddresses": [{"ip": "a"}, {"ip": "b"}],
             "addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.9"}]}
        ]));
        assert_ne!(a, b);
        assert_eq!(
            in_one_order("", "Endpoints", &a),
            in_one_order("", "Endpoints", &b)
        );
        let fewer =
            ep(json!([{"addresses": [{"ip": "10.1.0.1"}], "ports": [{"name": "a", "port": 81}]}]));
        assert_ne!(
            in_one_order("", "Endpoints", &a),
            in_one_order("", "Endpoints", &fewer)
        );
        assert!(matches!(
            in_one_order("", "ConfigMap", &a),
            Cow::Borrowed(_)
        ));
        let chart = chart_in_one_order("", "Endpoints", Cow::Owned(Tree::from(&a)));
        assert_eq!(chart.to_json(), *in_one_order("", "Endpoints", &b));
    }
}
