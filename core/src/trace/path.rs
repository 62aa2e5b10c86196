//! The traced path as what to look for in a template: keys, and list items by their position
//! (when it is to be trusted) or by the fields that identify them.

use serde_json::Value;

use super::values::scalar_text;

/// One segment of the traced path.
#[derive(Clone, Debug)]
pub(super) enum Want {
    Key(String),
    /// A list item: its position (when trusted), or the fields that identify it.
    Item {
        index: Option<usize>,
        fields: Vec<(String, String)>,
    },
}

/// The path as [`Want`]s, and the rendered value at it (when `rendered` is given).
pub(super) fn wants<'v>(
    segments: &[&str],
    rendered: Option<&'v Value>,
    trust_index: bool,
) -> (Vec<Want>, Option<&'v Value>) {
    let mut node = rendered;
    let mut out = Vec::new();
    for segment in segments {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        let is_map = node.is_some_and(Value::is_object);
        if let (Ok(n), false) = (segment.parse::<usize>(), is_map) {
            let item = node.and_then(|v| v.get(n));
            let fields = item
                .and_then(|i| i.get("name"))
                .and_then(Value::as_str)
                .map(|name| vec![("name".to_string(), name.to_string())])
                .unwrap_or_default();
            out.push(Want::Item {
                index: trust_index.then_some(n),
                fields,
            });
            node = item;
        } else if let Some(inner) = segment.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            let fields: Vec<(String, String)> = inner
                .split(',')
                .filter_map(|pair| pair.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            node = node.and_then(Value::as_array).and_then(|items| {
                items.iter().find(|item| {
                    !fields.is_empty()
                        && fields
                            .iter()
                            .all(|(k, v)| item.get(k).and_then(scalar_text).as_deref() == Some(v))
                })
            });
            out.push(Want::Item {
                index: None,
                fields,
            });
        } else {
            node = node.and_then(|v| v.get(&segment));
            out.push(Want::Key(segment));
        }
    }
    (out, node)
}
