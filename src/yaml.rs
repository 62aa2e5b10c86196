//! One YAML document into a [`Tree`].
//!
//! serde-saphyr is the reference: it handles all of YAML (anchors, aliases, merge keys, tags)
//! within a budget against hostile input. It is also the cost of indexing a cluster (~13 MB/s
//! on the benchmark machine). Rendered chart templates are nearly always plain block YAML, so
//! they take a fast path first: yaml-rust2's event parser (~3x faster) building the tree
//! directly. The fast path gives up, and the reference parses the document, on anything where
//! the two might not agree: anchors, aliases, tags, merge keys, non-string keys, more than one
//! document, syntax errors, and plain scalars whose type YAML versions read differently
//! (`0755`, `1e3`, `yes`, `.inf`, `12:30`...). A unit test checks that the two agree on every
//! document the fast path accepts.

use serde_saphyr::DuplicateKeyPolicy;
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::TScalarStyle;

use crate::tree::Tree;

/// A document that is not valid YAML, with the line of the problem when known.
#[derive(Debug)]
pub struct YamlError {
    pub line: Option<usize>,
}

/// Parses one document. Duplicate keys keep the last value, as Helm's YAML decoding does.
pub fn parse_document(doc: &str) -> Result<Tree, YamlError> {
    if let Some(tree) = fast_path(doc) {
        return Ok(tree);
    }
    reference(doc)
}

/// The reference parser alone (serde-saphyr).
pub fn reference(doc: &str) -> Result<Tree, YamlError> {
    let options = serde_saphyr::options! {
        duplicate_keys: DuplicateKeyPolicy::LastWins,
        with_snippet: false,
    };
    serde_saphyr::from_str_with_options::<Tree>(doc, options).map_err(|e| YamlError {
        line: e.location().map(|l| l.line() as usize),
    })
}

enum Frame {
    List(Vec<Tree>),
    /// Entries so far, and the key waiting for its value.
    Map(Vec<(Box<str>, Tree)>, Option<Box<str>>),
}

/// The fast path: `None` when the document needs the reference parser.
pub fn fast_path(doc: &str) -> Option<Tree> {
    let mut parser = Parser::new_from_str(doc);
    let mut stack: Vec<Frame> = Vec::new();
    let mut root: Option<Tree> = None;
    let mut documents = 0;
    loop {
        let (event, _) = parser.next_token().ok()?;
        let at_key = matches!(stack.last(), Some(Frame::Map(_, None)));
        let value = match event {
            Event::StreamStart | Event::Nothing | Event::DocumentEnd => continue,
            Event::DocumentStart => {
                documents += 1;
                if documents > 1 {
                    return None;
                }
                continue;
            }
            Event::StreamEnd => break,
            Event::Alias(_) => return None,
            Event::Scalar(text, style, anchor, tag) => {
                if anchor != 0 || tag.is_some() {
                    return None;
                }
                let value = match style {
                    TScalarStyle::Plain => plain_scalar(&text)?,
                    _ => Tree::Str(text.into_boxed_str()),
                };
                if at_key {
                    let Tree::Str(key) = value else {
                        return None;
                    };
                    if &*key == "<<" && style == TScalarStyle::Plain {
                        return None;
                    }
                    if let Some(Frame::Map(_, slot)) = stack.last_mut() {
                        *slot = Some(key);
                    }
                    continue;
                }
                value
            }
            Event::SequenceStart(anchor, tag) | Event::MappingStart(anchor, tag)
                if anchor != 0 || tag.is_some() || at_key =>
            {
                return None
            }
            Event::SequenceStart(..) => {
                stack.push(Frame::List(Vec::new()));
                continue;
            }
            Event::MappingStart(..) => {
                stack.push(Frame::Map(Vec::new(), None));
                continue;
            }
            Event::SequenceEnd => match stack.pop()? {
                Frame::List(items) => Tree::List(items.into_boxed_slice()),
                Frame::Map(..) => return None,
            },
            Event::MappingEnd => match stack.pop()? {
                Frame::Map(entries, None) => Tree::map_from(entries),
                _ => return None,
            },
        };
        match stack.last_mut() {
            None if root.is_none() => root = Some(value),
            None => return None,
            Some(Frame::List(items)) => items.push(value),
            Some(Frame::Map(entries, key)) => entries.push((key.take()?, value)),
        }
    }
    if !stack.is_empty() {
        return None;
    }
    Some(root.unwrap_or(Tree::Null))
}

/// A plain scalar's value where every YAML version agrees on it, else `None`.
fn plain_scalar(text: &str) -> Option<Tree> {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Some(Tree::Null),
        "true" | "True" | "TRUE" => return Some(Tree::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Tree::Bool(false)),
        _ => {}
    }
    // YAML 1.1 booleans and special floats.
    const AMBIGUOUS: &[&str] = &[
        "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off",
        "OFF", ".inf", ".Inf", ".INF", "-.inf", "-.Inf", "-.INF", "+.inf", "+.Inf", "+.INF",
        ".nan", ".NaN", ".NAN", "=",
    ];
    // A leading `+` (YAML 1.2 reads `+1` as a number, some readers do not).
    if AMBIGUOUS.contains(&text) || text.starts_with('+') {
        return None;
    }
    let bytes = text.as_bytes();
    let (sign, digits) = match bytes[0] {
        b'-' => (true, &bytes[1..]),
        _ => (false, bytes),
    };
    let looks_numeric = matches!(bytes[0], b'0'..=b'9' | b'-' | b'+' | b'.')
        && bytes
            .get(usize::from(sign))
            .is_some_and(|b| b.is_ascii_digit() || *b == b'.');
    if looks_numeric {
        // Decimal integers without leading zeros (YAML 1.1 reads `0755` as octal).
        if !digits.is_empty()
            && digits.iter().all(u8::is_ascii_digit)
            && (digits[0] != b'0' || digits.len() == 1)
        {
            return text.parse::<i64>().ok().map(Tree::Int);
        }
        // `1.5`, `-0.25`, `2.5e-3`: digits on both sides of the point.
        if let Some((int, frac)) = std::str::from_utf8(digits).ok()?.split_once('.') {
            let (frac, exp) = match frac.split_once(['e', 'E']) {
                Some((f, e)) => (f, Some(e)),
                None => (frac, None),
            };
            let plain_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            let exp_ok = exp.is_none_or(|e| plain_digits(e.trim_start_matches(['-', '+'])));
            if plain_digits(int)
                && (int.len() == 1 || !int.starts_with('0'))
                && plain_digits(frac)
                && exp_ok
            {
                return text.parse::<f64>().ok().map(Tree::Float);
            }
        }
        // Something else that starts like a number: only a string if no YAML version could
        // read it as one (`500m`, `128Mi`, a checksum are strings; `1e3`, `0x1F`, `1_000`,
        // `12:30`, `2026-11-21` may not be).
        let unsigned = text.trim_start_matches(['-', '+']);
        let prefixed = ["0x", "0X", "0o", "0O", "0b", "0B"]
            .iter()
            .any(|p| unsigned.starts_with(p));
        let maybe_number = text.bytes().all(|b| {
            b.is_ascii_digit() || matches!(b, b'_' | b':' | b'.' | b'e' | b'E' | b'+' | b'-')
        });
        if prefixed || maybe_number {
            return None;
        }
        return Some(Tree::Str(text.into()));
    }
    Some(Tree::Str(text.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agrees(doc: &str) {
        if let Some(fast) = fast_path(doc) {
            let reference = reference(doc)
                .unwrap_or_else(|e| panic!("fast path accepted invalid YAML {doc:?}: {e:?}"));
            assert_eq!(fast, reference, "the parsers disagree on {doc:?}");
        }
    }

    #[test]
    fn plain_chart_documents_take_the_fast_path_and_match_the_reference() {
        let doc = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {app: web, tier: \"1\"}\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      - name: web\n        image: \"nginx:1.25\"\n        args: ['--port=80', --verbose]\n        resources:\n          limits: {cpu: 500m, memory: 128Mi}\n          requests: {cpu: 0.5, memory: 1Gi}\n        env:\n        - name: EMPTY\n          value:\n        - name: NULL\n          value: ~\n        - name: TEXT\n          value: |\n            line one\n            line two\n        - name: FOLDED\n          value: >-\n            folded\n            text\n      enabled: true\n      ratio: -0.25\n      big: 2.5e-3\n";
        let fast = fast_path(doc).expect("a plain chart document takes the fast path");
        assert_eq!(fast, reference(doc).unwrap());
        assert_eq!(fast.pointer("/spec/replicas"), Some(&Tree::Int(3)));
    }

    #[test]
    fn anything_the_versions_read_differently_goes_to_the_reference() {
        for doc in [
            "a: &x 1\nb: *x\n",
            "base: &b {x: 1}\nc:\n  <<: *b\n",
            "a: !!str 1\n",
            "a: 0755\n",
            "a: 1e3\n",
            "a: 0x1F\n",
            "a: 1_000\n",
            "a: 12:30\n",
            "a: yes\n",
            "a: off\n",
            "a: .inf\n",
            "a: -.inf\n",
            "a: 1.25.3\n",
            "a: 2026-11-21\n",
            "80: http\n",
            "? [a]\n: b\n",
            "a: 1\n---\nb: 2\n",
            "a: [1, 2\n",
            "a: 99999999999999999999\n",
        ] {
            assert!(fast_path(doc).is_none(), "fast path took {doc:?}");
            agrees(doc);
        }
    }

    #[test]
    fn the_fast_path_agrees_with_the_reference_on_every_recorded_manifest() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut docs = 0;
        for folder in ["cluster-capture/releases", "helm3-releases"] {
            let Ok(entries) = std::fs::read_dir(dir.join(folder)) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(text) = std::fs::read_to_string(entry.path()) else {
                    continue;
                };
                let Ok(secrets) = crate::release::parse_release_file(&text) else {
                    continue;
                };
                for secret in secrets.into_iter().flatten() {
                    for doc in crate::manifest::split_documents(&secret.release.manifest) {
                        agrees(doc);
                        docs += 1;
                    }
                }
            }
        }
        assert!(docs > 20, "only {docs} documents found");
    }

    #[test]
    fn scalars_that_look_like_numbers_but_are_not_stay_strings() {
        for (text, expected) in [
            ("500m", Some(Tree::Str("500m".into()))),
            ("128Mi", Some(Tree::Str("128Mi".into()))),
            ("1.25-alpine", Some(Tree::Str("1.25-alpine".into()))),
            ("-1", Some(Tree::Int(-1))),
            ("0", Some(Tree::Int(0))),
            ("0.5", Some(Tree::Float(0.5))),
            ("3.0", Some(Tree::Float(3.0))),
            ("01", None),
            ("-", Some(Tree::Str("-".into()))),
            ("hello", Some(Tree::Str("hello".into()))),
            ("0f3a9c", Some(Tree::Str("0f3a9c".into()))),
            ("9d8e7f", Some(Tree::Str("9d8e7f".into()))),
            (".nan", None),
            ("-.inf", None),
            ("+1", None),
        ] {
            assert_eq!(plain_scalar(text), expected, "{text}");
            agrees(&format!("a: {text}\n"));
        }
    }
}
