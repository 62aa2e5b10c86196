//! One YAML document into a [`Tree`].
//!
//! serde-saphyr is the reference: it handles all of YAML (anchors, aliases, merge keys, tags)
//! within a budget against hostile input, at ~13 MB/s on the benchmark machine, which made it
//! nearly all the cost of indexing a cluster. Rendered chart templates are nearly always plain
//! block YAML, so they take [`block::parse`] first (~10x faster), which reads exactly that and
//! gives up on anything where it might not read the document as the reference does. A unit
//! test (every recorded manifest) and the `yaml` fuzz target check that the two agree.
//!
//! (Before it, yaml-rust2's event parser was the fast path; fuzzing found it reading NUL
//! characters and whitespace-only lines at the end of block scalars differently from the
//! reference, so it is gone.)

pub mod block;

use serde_saphyr::DuplicateKeyPolicy;

use crate::tree::Tree;

/// A document that is not valid YAML, with the line of the problem when known (never the
/// text: manifests carry chart values).
#[derive(Debug, thiserror::Error)]
#[error("not valid YAML{}", .line.map(|l| format!(" (line {l})")).unwrap_or_default())]
pub struct YamlError {
    pub line: Option<usize>,
}

/// Parses one document. Duplicate keys keep the last value, as Helm's YAML decoding does.
pub fn parse_document(doc: &str) -> Result<Tree, YamlError> {
    match block::parse(doc) {
        Some(tree) => Ok(tree),
        None => reference(doc),
    }
}

/// The reference parser alone (serde-saphyr).
pub fn reference(doc: &str) -> Result<Tree, YamlError> {
    let options = serde_saphyr::options! {
        duplicate_keys: DuplicateKeyPolicy::LastWins,
        // Helm reads manifests as YAML 1.1 (sigs.k8s.io/yaml, go-yaml v2): `0755` is octal 493,
        // as the API server receives it from Helm.
        legacy_octal_numbers: true,
        with_snippet: false,
    };
    serde_saphyr::from_str_with_options::<Tree>(doc, options).map_err(|e| YamlError {
        line: e.location().map(|l| l.line() as usize),
    })
}

/// A plain scalar's value where every YAML version agrees on it, else `None`.
pub(crate) fn plain_scalar(text: &str) -> Option<Tree> {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Some(Tree::Null),
        "true" | "True" | "TRUE" => return Some(Tree::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Tree::Bool(false)),
        _ => {}
    }
    // YAML 1.1 booleans and special floats, and a leading `+` (YAML 1.2 reads `+1` as a
    // number, some readers do not).
    const AMBIGUOUS: &[&str] = &[
        "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off",
        "OFF", ".inf", ".Inf", ".INF", "-.inf", "-.Inf", "-.INF", "+.inf", "+.Inf", "+.INF",
        ".nan", ".NaN", ".NAN", "=",
    ];
    // Other casings (`truE`, `NuLL`, `.iNf`) are strings to Go's YAML but not to every reader
    // (serde-saphyr reads `truE` as true): left to the reference, which the fast path must match.
    const ANY_CASE: &[&str] = &[
        "true", "false", "null", "yes", "no", "on", "off", "y", "n", ".inf", "-.inf", "+.inf",
        ".nan",
    ];
    if text.len() <= 5 && ANY_CASE.iter().any(|w| w.eq_ignore_ascii_case(text)) {
        return None;
    }
    let may_be_ambiguous = text.len() <= 5
        && matches!(
            text.as_bytes()[0],
            b'y' | b'Y' | b'n' | b'N' | b'o' | b'O' | b'.' | b'-' | b'+' | b'='
        );
    if text.starts_with('+') || (may_be_ambiguous && AMBIGUOUS.contains(&text)) {
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
            ("truE", None),
            ("NuLL", None),
            (".iNf", None),
            ("True", Some(Tree::Bool(true))),
            ("trueish", Some(Tree::Str("trueish".into()))),
        ] {
            assert_eq!(plain_scalar(text), expected, "{text}");
            let doc = format!("a: {text}\n");
            if let Some(tree) = block::parse(&doc) {
                assert_eq!(tree, reference(&doc).unwrap(), "{text}");
            }
        }
    }

    #[test]
    fn numbers_read_as_helm_reads_them_yaml_1_1() {
        // A widely used chart writes `defaultMode: 0755`: Helm sends 493 to the API server.
        for (text, expected) in [
            ("0755", Tree::Int(493)),
            ("0400", Tree::Int(256)),
            ("0644", Tree::Int(420)),
            ("0x1F", Tree::Int(31)),
            ("0", Tree::Int(0)),
            ("10", Tree::Int(10)),
            ("yes", Tree::Bool(true)),
            ("off", Tree::Bool(false)),
        ] {
            let doc = format!("defaultMode: {text}\n");
            assert_eq!(
                parse_document(&doc).unwrap().get("defaultMode"),
                Some(&expected),
                "{text}"
            );
        }
        // Quoted, it stays a string.
        let quoted = parse_document("mode: \"0755\"\n").unwrap();
        assert_eq!(quoted.get("mode"), Some(&Tree::Str("0755".into())));
    }

    #[test]
    fn documents_the_block_parser_leaves_are_read_by_the_reference() {
        let doc = "base: &b {x: 1}\nc:\n  <<: *b\n  y: 2\n";
        assert!(block::parse(doc).is_none());
        let tree = parse_document(doc).unwrap();
        assert_eq!(tree.pointer("/c/x"), Some(&Tree::Int(1)));
        assert!(parse_document("a: [1, 2\n").is_err());
    }
}
