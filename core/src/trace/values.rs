//! The release's values: merged as Helm merges them, looked up by a `--set` key, and held
//! against a traced field, so that a key is named only when its value is what rendered it.

use serde_json::Value;

use crate::chart::{Templates, CHART_VALUES, RELEASE_CONFIG};

/// The release's values as Helm merges them: the config over the chart's defaults (maps key
/// by key, a `null` in the config deletes the key). `None` when neither is known.
pub(super) fn merged_values(templates: &Templates) -> Option<Value> {
    let read = |name: &str| {
        templates
            .get(name)
            .and_then(|text| serde_json::from_str::<Value>(text).ok())
    };
    let (defaults, config) = (read(CHART_VALUES), read(RELEASE_CONFIG));
    if defaults.is_none() && config.is_none() {
        return None;
    }
    let mut merged = match defaults {
        Some(Value::Object(map)) => Value::Object(map),
        _ => Value::Object(Default::default()),
    };
    if let Some(config) = config {
        coalesce(&mut merged, config);
    }
    Some(merged)
}

fn coalesce(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (k, v) in over {
                match (base.get_mut(&k), v) {
                    (_, Value::Null) => {
                        base.remove(&k);
                    }
                    (Some(existing @ Value::Object(_)), v @ Value::Object(_)) => {
                        coalesce(existing, v)
                    }
                    (_, v) => {
                        base.insert(k, v);
                    }
                }
            }
        }
        (base, over) => *base = over,
    }
}

/// The value of a key in `--set` syntax (`a.b\.c[1].d`).
pub(super) fn lookup<'v>(values: &'v Value, key: &str) -> Option<&'v Value> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = key.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => current.extend(chars.next()),
            '.' => parts.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    parts.push(current);
    let mut node = values;
    for part in parts {
        let (name, indexes) = match part.find('[') {
            Some(at) if part.ends_with(']') => (&part[..at], &part[at..]),
            _ => (part.as_str(), ""),
        };
        if !name.is_empty() || indexes.is_empty() {
            node = node.as_object()?.get(name)?;
        }
        for index in indexes.split(['[', ']']).filter(|s| !s.is_empty()) {
            node = node.as_array()?.get(index.parse::<usize>().ok()?)?;
        }
    }
    Some(node)
}

/// A scalar as text (`3`, `true`, `web`); `None` for lists and maps.
pub(super) fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null => Some(String::new()),
        _ => None,
    }
}

pub(super) fn same_scalar(a: &Value, b: &Value) -> bool {
    match (scalar_text(a), scalar_text(b)) {
        (Some(a), Some(b)) => {
            a == b || matches!((a.parse::<f64>(), b.parse::<f64>()), (Ok(x), Ok(y)) if x == y)
        }
        _ => false,
    }
}

/// The keys that the release's values confirm: each exists in them, and where the field's
/// value is the key's value as is (`exact`), it is that value.
pub(super) fn checked(
    keys: Vec<String>,
    exact: bool,
    values: Option<&Value>,
    rendered: Option<&Value>,
) -> Vec<String> {
    let Some(values) = values else {
        return keys;
    };
    let single = keys.len() == 1;
    keys.into_iter()
        .filter(|key| {
            let Some(value) = lookup(values, key) else {
                return false;
            };
            let Some(rendered) = rendered else {
                return true;
            };
            let (rendered_scalar, value_scalar) = (
                scalar_text(rendered).is_some(),
                scalar_text(value).is_some(),
            );
            if rendered_scalar != value_scalar {
                // A list or map for a scalar field (or the other way round): not its key.
                return false;
            }
            if !rendered_scalar {
                return true;
            }
            if exact && single {
                return same_scalar(rendered, value);
            }
            // Read through a function (`default .Chart.Name .Values.nameOverride`, `printf`,
            // `sha256sum`): the key is certain only when its value shows in the field's, so an
            // empty `nameOverride` under a chart-named label, or a config under its checksum,
            // is not named.
            match (scalar_text(rendered), scalar_text(value)) {
                (Some(rendered), Some(value)) => !value.is_empty() && rendered.contains(&value),
                _ => false,
            }
        })
        .collect()
}
