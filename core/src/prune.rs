//! Only what an UPDATE changes. The API server encodes a review's `object` and `oldObject` with
//! the same encoder, so a subtree the write leaves alone is byte for byte the same in both. Every
//! rule of [`decide`](crate::decide) looks for a change away from the old object (a locked
//! change differs from the chart *and* from the current value; a repeated key or an owner
//! reference counts only when the old object lacked it), so such subtrees can be left out of
//! both sides without being parsed. A status update of a 20 kB Deployment parses its status
//! and a few metadata fields, not its pod template.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::scan::{member_at, string, Flow, Scanner};

/// `object` and `oldObject` with every subtree equal in both left out of both, parsed.
/// Objects are compared key by key; anything else that differs (a list, a scalar) is parsed
/// whole.
pub(crate) fn changed_parts(new: &str, old: &str) -> Result<(Value, Value), serde_json::Error> {
    let empty = || (Value::Object(Map::new()), Value::Object(Map::new()));
    if new == old {
        return Ok(empty());
    }
    // The object is read once into the entries of its objects (lists and scalars stay
    // text); the old object is read against it, stepping over every value that is the same
    // text as the object's.
    if let Some(Node::Object(entries)) = Scanner::read(new) {
        let mut scanner = Scanner::new(old);
        scanner.skip_whitespace();
        if scanner.bytes.get(scanner.pos) == Some(&b'{') {
            if let Some((n, o)) = scanner.prune_against(&entries, 0, false)? {
                scanner.skip_whitespace();
                if scanner.pos == scanner.bytes.len() {
                    return Ok((Value::Object(n), Value::Object(o)));
                }
            }
        }
    }
    Ok((serde_json::from_str(new)?, serde_json::from_str(old)?))
}

type Object = Map<String, Value>;

/// The position of the entry for `key` (the last one, as a parse keeps): looked up in `index`
/// for a large object (a ConfigMap's data), else scanned.
fn position_of(
    entries: &[Entry<'_>],
    index: Option<&BTreeMap<&str, usize>>,
    key: &str,
) -> Option<usize> {
    match index {
        Some(index) => index.get(key).copied(),
        None => entries.iter().rposition(|e| e.key == key),
    }
}

/// A value of a JSON text: an object's entries, or anything else as its text.
enum Node<'a> {
    Object(Vec<Entry<'a>>),
    Text,
}

struct Entry<'a> {
    key: std::borrow::Cow<'a, str>,
    /// The value's text.
    raw: &'a str,
    node: Node<'a>,
}

/// Objects nested deeper than this are read the ordinary way.
const MAX_DEPTH: usize = 64;

/// The parts of the scanner only `changed_parts` needs: objects read into their entries.
impl<'a> Scanner<'a> {
    fn read(text: &'a str) -> Option<Node<'a>> {
        let mut scanner = Scanner::new(text);
        let (node, _) = scanner.value(0)?;
        scanner.skip_whitespace();
        (scanner.pos == scanner.bytes.len()).then_some(node)
    }

    /// Reads the old object at `pos` (its `{`) against the new object's entries. A value whose
    /// text begins with the new value's text, followed by a delimiter, is that same value (a
    /// JSON value ends where its text says): it is stepped over unread. `Ok(None)` when the
    /// text is not what the scanner expects.
    ///
    /// In `metadata` (`in_metadata`), `managedFields` is left out of both sides: no rule reads
    /// it there (the co-owner check reads it from the request itself), and it changes on every
    /// write.
    fn prune_against(
        &mut self,
        new: &[Entry<'_>],
        depth: usize,
        in_metadata: bool,
    ) -> Result<Option<(Object, Object)>, serde_json::Error> {
        let index: Option<BTreeMap<&str, usize>> =
            (new.len() > 16).then(|| new.iter().enumerate().map(|(i, e)| (&*e.key, i)).collect());
        let mut seen = vec![false; new.len()];
        let (mut new_out, mut old_out) = (Map::new(), Map::new());
        self.pos += 1; // {
        self.skip_whitespace();
        if self.bytes.get(self.pos) == Some(&b'}') {
            self.pos += 1;
        } else {
            loop {
                self.skip_whitespace();
                let Some(key) = self.key() else {
                    return Ok(None);
                };
                self.skip_whitespace();
                if self.bytes.get(self.pos) != Some(&b':') {
                    return Ok(None);
                }
                self.pos += 1;
                self.skip_whitespace();
                let found = position_of(new, index.as_ref(), &key);
                if in_metadata && key == "managedFields" {
                    if let Some(i) = found {
                        seen[i] = true;
                    }
                    if self.value(depth + 1).is_none() {
                        return Ok(None);
                    }
                } else {
                    match found {
                        Some(i) => {
                            seen[i] = true;
                            let n = &new[i];
                            let rest = &self.bytes[self.pos..];
                            let same = rest.starts_with(n.raw.as_bytes())
                                && rest.get(n.raw.len()).is_none_or(|b| {
                                    matches!(b, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t')
                                });
                            if same {
                                self.pos += n.raw.len();
                            } else if let (Node::Object(children), Some(b'{'), true) =
                                (&n.node, self.bytes.get(self.pos), depth < MAX_DEPTH)
                            {
                                let metadata = depth == 0 && key == "metadata";
                                let Some((a, b)) =
                                    self.prune_against(children, depth + 1, metadata)?
                                else {
                                    return Ok(None);
                                };
                                new_out.insert(key.to_string(), Value::Object(a));
                                old_out.insert(key.into_owned(), Value::Object(b));
                            } else {
                                let Some((_, raw)) = self.value(depth + 1) else {
                                    return Ok(None);
                                };
                                new_out.insert(key.to_string(), serde_json::from_str(n.raw)?);
                                old_out.insert(key.into_owned(), serde_json::from_str(raw)?);
                            }
                        }
                        None => {
                            let Some((_, raw)) = self.value(depth + 1) else {
                                return Ok(None);
                            };
                            old_out.insert(key.into_owned(), serde_json::from_str(raw)?);
                        }
                    }
                }
                self.skip_whitespace();
                match self.bytes.get(self.pos) {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Ok(None),
                }
            }
        }
        for (i, n) in new.iter().enumerate() {
            // Only the last of a repeated key counts.
            if !seen[i]
                && position_of(new, index.as_ref(), &n.key) == Some(i)
                && !(in_metadata && n.key == "managedFields")
            {
                new_out.insert(n.key.to_string(), serde_json::from_str(n.raw)?);
            }
        }
        Ok(Some((new_out, old_out)))
    }

    /// The value at `pos` and its text; `pos` ends after it.
    fn value(&mut self, depth: usize) -> Option<(Node<'a>, &'a str)> {
        self.skip_whitespace();
        let start = self.pos;
        let node = match *self.bytes.get(self.pos)? {
            b'{' if depth < MAX_DEPTH => Node::Object(self.object(depth)?),
            _ => {
                self.skip_value()?;
                Node::Text
            }
        };
        Some((node, &self.text[start..self.pos]))
    }

    fn object(&mut self, depth: usize) -> Option<Vec<Entry<'a>>> {
        let mut entries = Vec::new();
        self.each_entry(|scanner, key| {
            let (node, raw) = scanner.value(depth + 1)?;
            entries.push(Entry { key, raw, node });
            Some(Flow::Next)
        })?;
        Some(entries)
    }
}

/// An object's `metadata.managedFields`, read without building values: its text (to compare
/// two objects' at a glance) and its `Apply` entries with their `fieldsV1` unread.
pub(crate) struct ManagedFields<'a> {
    pub raw: Option<&'a str>,
    pub applies: Vec<ApplyEntry<'a>>,
}

/// Helm's release-name annotation as a `fieldsV1` key.
const RELEASE_NAME_FIELD: &str = "f:meta.helm.sh/release-name";

pub(crate) struct ApplyEntry<'a> {
    pub manager: std::borrow::Cow<'a, str>,
    /// The entry's `fieldsV1`, as text.
    pub fields: &'a str,
}

impl ApplyEntry<'_> {
    /// Whether this entry owns Helm's release-name annotation (Helm's own entry).
    pub(crate) fn owns_release_annotation(&self) -> bool {
        matches!(
            member_at(
                self.fields,
                &["f:metadata", "f:annotations", RELEASE_NAME_FIELD]
            ),
            Some(Some(_))
        )
    }

    pub(crate) fn field_set(&self) -> crate::fields_v1::FieldSet {
        serde_json::from_str::<Value>(self.fields)
            .map(|v| crate::fields_v1::parse_fields_v1(&v))
            .unwrap_or_default()
    }
}

/// `None` when the text is not an object. Read with the scanner, not parsed, and only as far
/// as needed: the API server writes `metadata` before `spec` and `status`, and `managedFields`
/// is the last field of `metadata`, so nothing after it is read; an entry's `fieldsV1` is only
/// stepped over.
pub(crate) fn managed_fields(text: &str) -> Option<ManagedFields<'_>> {
    managed_fields_until(text, |_| false)
}

/// [`managed_fields`], stopping at the first `Apply` entry for which `enough` is true: that
/// entry is the last of `applies`, and `raw` is `None` (the rest was not read).
pub(crate) fn managed_fields_until<'a>(
    text: &'a str,
    mut enough: impl FnMut(&ApplyEntry<'a>) -> bool,
) -> Option<ManagedFields<'a>> {
    let mut scanner = Scanner::new(text);
    let mut applies = Vec::new();
    if !(scanner.enter_member("metadata")? && scanner.enter_member("managedFields")?) {
        return Some(ManagedFields { raw: None, applies });
    }
    // One pass over the list: each entry's fields are found as it is stepped over.
    let start = scanner.pos;
    let stopped = scanner.each_item(|scanner| {
        let [manager, operation, fields] = scanner.members(["manager", "operation", "fieldsV1"])?;
        if let (Some(manager), Some("\"Apply\""), Some(fields)) = (manager, operation, fields) {
            let entry = ApplyEntry {
                manager: string(manager)?,
                fields,
            };
            let stop = enough(&entry);
            applies.push(entry);
            if stop {
                return Some(Flow::Stop);
            }
        }
        Some(Flow::Next)
    })?;
    Some(ManagedFields {
        raw: (!stopped).then(|| &text[start..scanner.pos]),
        applies,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::tests::arbitrary_json;
    use serde_json::json;

    fn raw(v: &Value) -> String {
        v.to_string()
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
        // managedFields, which change on every write, are never read from the parts.
        let mut with_fields = old.clone();
        with_fields["metadata"]["managedFields"] = json!([{"manager": "a", "time": "1"}]);
        let mut touched = with_fields.clone();
        touched["metadata"]["managedFields"] = json!([{"manager": "a", "time": "2"}]);
        touched["metadata"]["labels"]["a"] = json!("3");
        let (n, o) = changed_parts(&raw(&touched), &raw(&with_fields)).unwrap();
        assert_eq!(n, json!({"metadata": {"labels": {"a": "3"}}}));
        assert_eq!(o, json!({"metadata": {"labels": {"a": "1"}}}));
        let same = changed_parts(&raw(&old), &raw(&old)).unwrap();
        assert_eq!(same, (json!({}), json!({})));
        // Not objects: parsed whole.
        let (n, o) = changed_parts(&raw(&json!("text")), &raw(&json!([1]))).unwrap();
        assert_eq!((n, o), (json!("text"), json!([1])));
    }

    /// What `changed_parts` must give, on parsed values: equal subtrees left out of both.
    fn reference(new: &Value, old: &Value) -> Option<(Value, Value)> {
        if new == old {
            return None;
        }
        let (Some(n), Some(o)) = (new.as_object(), old.as_object()) else {
            return Some((new.clone(), old.clone()));
        };
        let (mut a, mut b) = (Map::new(), Map::new());
        for (k, v) in n {
            match o.get(k) {
                Some(w) => {
                    if let Some((x, y)) = reference(v, w) {
                        a.insert(k.clone(), x);
                        b.insert(k.clone(), y);
                    }
                }
                None => {
                    a.insert(k.clone(), v.clone());
                }
            }
        }
        for (k, w) in o {
            if !n.contains_key(k) {
                b.insert(k.clone(), w.clone());
            }
        }
        Some((Value::Object(a), Value::Object(b)))
    }

    #[test]
    fn the_scanner_reads_strings_escapes_and_nesting_as_json_does() {
        let old = json!({"a\"b": {"x]": "}{\\\"[", "list": [{"k": "v]"}, [], [[{}]], "a,b"], "n": -1.5e3},
                         "empty": {}, "s": "é", "t": true, "z": null});
        let new = json!({"a\"b": {"x]": "}{\\\"[", "list": [{"k": "v]"}, [], [[{}]], "a,b", 1], "n": -1.5e3},
                         "empty": {"now": 1}, "s": "é", "t": false});
        for (n, o) in [(&new, &old), (&old, &new)] {
            let want = reference(n, o).unwrap_or((json!({}), json!({})));
            assert_eq!(changed_parts(&raw(n), &raw(o)).unwrap(), want);
            // Whitespace the API server does not send, but JSON allows.
            let spaced = serde_json::to_string_pretty(n).unwrap();
            let pretty_old = serde_json::to_string_pretty(o).unwrap();
            assert_eq!(changed_parts(&spaced, &pretty_old).unwrap(), want);
        }
    }

    proptest::proptest! {
        #[test]
        fn left_out_is_exactly_what_both_share(
            (new, old) in arbitrary_pair()
        ) {
            let want = reference(&new, &old).unwrap_or((json!({}), json!({})));
            proptest::prop_assert_eq!(changed_parts(&raw(&new), &raw(&old)).unwrap(), want);
        }
    }

    /// Two objects that share some subtrees: the second is the first with a few entries
    /// replaced, added or removed.
    fn arbitrary_pair() -> impl proptest::strategy::Strategy<Value = (Value, Value)> {
        use proptest::prelude::*;
        (arbitrary_json(), arbitrary_json(), any::<u8>()).prop_map(|(a, b, how)| {
            let mut old =
                json!({"keep": a.clone(), "nested": {"same": a.clone(), "other": b.clone()}});
            let mut new = old.clone();
            match how % 4 {
                0 => new["nested"]["other"] = a,
                1 => new["added"] = b,
                2 => {
                    new.as_object_mut().unwrap().remove("keep");
                }
                _ => old["nested"]["gone"] = b,
            }
            (new, old)
        })
    }

    #[test]
    fn the_release_name_field_is_helms_annotation() {
        assert_eq!(
            RELEASE_NAME_FIELD,
            format!("f:{}", crate::ownership::RELEASE_NAME_ANNOTATION)
        );
    }

    #[test]
    fn managed_fields_are_read_without_their_values() {
        let object = json!({"metadata": {"name": "x", "managedFields": [
            {"manager": "kube-controller-manager", "operation": "Update", "fieldsV1": {"f:status": {}}},
            {"manager": "helm", "operation": "Apply", "fieldsV1": {"f:metadata": {"f:annotations": {
                "f:meta.helm.sh/release-name": {}}}, "f:data": {"f:a": {}}}},
            {"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:data": {"f:a": {}}}}
        ]}, "spec": {"big": [1, 2, 3]}});
        let raw = raw(&object);
        let fields = managed_fields(&raw).unwrap();
        let managers: Vec<&str> = fields.applies.iter().map(|e| &*e.manager).collect();
        assert_eq!(managers, ["helm", "kubectl"]);
        assert!(fields.applies[0].owns_release_annotation());
        assert!(!fields.applies[1].owns_release_annotation());
        assert_eq!(
            fields.applies[1].field_set(),
            ["f:data.f:a".to_string()].into()
        );
        assert!(fields.raw.is_some());
        assert!(managed_fields(&super::tests::raw(&json!({})))
            .unwrap()
            .applies
            .is_empty());
        assert!(managed_fields(&super::tests::raw(&json!("text"))).is_none());
    }
}
