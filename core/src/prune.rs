//! Only what an UPDATE changes. The API server encodes a review's `object` and `oldObject` with
//! the same encoder, so a subtree the write leaves alone is byte for byte the same in both. Every
//! rule of [`decide`](crate::decide) looks for a change away from the old object (a locked
//! change differs from the chart *and* from the current value; a repeated key or an owner
//! reference counts only when the old object lacked it), so such subtrees can be left out of
//! both sides without being parsed. A status update of a 20 kB Deployment parses its status
//! and a few metadata fields, not its pod template.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// `object` and `oldObject` with every subtree equal in both left out of both, parsed.
/// Objects are compared key by key; anything else that differs is parsed whole.
pub fn changed_parts(new: &RawValue, old: &RawValue) -> Result<(Value, Value), serde_json::Error> {
    Ok(prune(new, old)?.unwrap_or_else(|| (Value::Object(Map::new()), Value::Object(Map::new()))))
}

fn is_object(raw: &RawValue) -> bool {
    raw.get().trim_start().starts_with('{')
}

/// `None` when both are the same text.
fn prune(new: &RawValue, old: &RawValue) -> Result<Option<(Value, Value)>, serde_json::Error> {
    if new.get() == old.get() {
        return Ok(None);
    }
    if !(is_object(new) && is_object(old)) {
        return Ok(Some((
            serde_json::from_str(new.get())?,
            serde_json::from_str(old.get())?,
        )));
    }
    let new_entries: BTreeMap<String, &RawValue> = serde_json::from_str(new.get())?;
    let mut old_entries: BTreeMap<String, &RawValue> = serde_json::from_str(old.get())?;
    let (mut new_out, mut old_out) = (Map::new(), Map::new());
    for (key, n) in new_entries {
        match old_entries.remove(&key) {
            Some(o) => {
                if let Some((n, o)) = prune(n, o)? {
                    new_out.insert(key.clone(), n);
                    old_out.insert(key, o);
                }
            }
            None => {
                new_out.insert(key, serde_json::from_str(n.get())?);
            }
        }
    }
    for (key, o) in old_entries {
        old_out.insert(key, serde_json::from_str(o.get())?);
    }
    Ok(Some((Value::Object(new_out), Value::Object(old_out))))
}

/// Just `metadata.managedFields` of an object (the co-owner check reads nothing else), or
/// `None` when the text is not an object.
pub fn managed_fields_only(object: &RawValue) -> Option<Value> {
    #[derive(serde::Deserialize)]
    struct Object<'a> {
        #[serde(borrow)]
        metadata: Option<Metadata<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Metadata<'a> {
        #[serde(borrow, rename = "managedFields")]
        managed_fields: Option<&'a RawValue>,
    }
    let parsed: Object = serde_json::from_str(object.get()).ok()?;
    let fields = match parsed.metadata.and_then(|m| m.managed_fields) {
        Some(raw) => serde_json::from_str(raw.get()).ok()?,
        None => Value::Null,
    };
    let mut metadata = Map::new();
    if !fields.is_null() {
        metadata.insert("managedFields".into(), fields);
    }
    Some(serde_json::json!({ "metadata": metadata }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(v: &Value) -> Box<RawValue> {
        RawValue::from_string(v.to_string()).unwrap()
    }

    #[test]
    fn what_both_sides_share_is_left_out_of_both() {
        let old = json!({"metadata": {"name": "web", "labels": {"a": "1"}, "resourceVersion": "1"},
                         "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "web"}]}}},
                         "status": {"ready": 1}});
        let new = json!({"metadata": {"name": "web", "labels": {"a": "2"}, "resourceVersion": "2", "annotations": {"n": "x"}},
                         "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "web"}, {"name": "side"}]}}}});
        let (n, o) = changed_parts(&raw(&new), &raw(&old)).unwrap();
        assert_eq!(
            n,
            json!({"metadata": {"labels": {"a": "2"}, "resourceVersion": "2", "annotations": {"n": "x"}},
                   "spec": {"template": {"spec": {"containers": [{"name": "web"}, {"name": "side"}]}}}})
        );
        assert_eq!(
            o,
            json!({"metadata": {"labels": {"a": "1"}, "resourceVersion": "1"},
                   "spec": {"template": {"spec": {"containers": [{"name": "web"}]}}},
                   "status": {"ready": 1}})
        );
        let same = changed_parts(&raw(&old), &raw(&old)).unwrap();
        assert_eq!(same, (json!({}), json!({})));
        // Not objects: parsed whole.
        let (n, o) = changed_parts(&raw(&json!("text")), &raw(&json!([1]))).unwrap();
        assert_eq!((n, o), (json!("text"), json!([1])));
    }

    #[test]
    fn managed_fields_are_read_alone() {
        let object = json!({"metadata": {"name": "x", "managedFields": [{"manager": "kubectl"}]}, "spec": {"big": [1, 2, 3]}});
        assert_eq!(
            managed_fields_only(&raw(&object)),
            Some(json!({"metadata": {"managedFields": [{"manager": "kubectl"}]}}))
        );
        assert_eq!(
            managed_fields_only(&raw(&json!({}))),
            Some(json!({"metadata": {}}))
        );
        assert_eq!(managed_fields_only(&raw(&json!("text"))), None);
    }
}
