//! What an object of a manifest is, read without parsing it: `apiVersion`, `kind`,
//! `metadata.name` and `metadata.namespace` of a plain block-YAML document.
//!
//! Routing a review needs only an object's identity; its field tree is needed when a write
//! reaches it. Parsing every document of every release at start-up was most of a replica's
//! time to ready (docs/performance.md, "Start-up"), so the index reads each document's
//! identity here, a line at a time, and parses the document on first need
//! ([`crate::object_content`]). This reads only the shape `helm template` renders: top-level
//! keys at column 0, `metadata`'s keys one indentation in, the four values plain or quoted on
//! their line. Anything else (a document that is not a block mapping, a flow `metadata`, a
//! value it cannot be sure of, a quoted or flow scalar that does not end on its line, anchors,
//! tags, tabs or carriage returns) gives `None`, and the caller parses the document whole as
//! before. What it returns, the full parser reads the same: a unit test over every recorded
//! manifest and the fuzz corpora checks it, and the first parse checks it again
//! ([`crate::object_content::ObjectContent::unpack`]).

/// An object's identity as its document writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Identity<'d> {
    pub api_version: &'d str,
    pub kind: &'d str,
    pub name: &'d str,
    /// As written (often absent).
    pub namespace: Option<&'d str>,
}

/// `doc`'s identity, or `None` when this reader cannot be sure of it (the full parser then
/// decides, with its reasons for a document it cannot use).
pub(crate) fn identity(doc: &str) -> Option<Identity<'_>> {
    if memchr::memchr2(b'\r', b'\t', doc.as_bytes()).is_some()
        || !crate::yaml::block::plain_characters(doc)
    {
        return None;
    }
    let (mut api_version, mut kind, mut name, mut namespace) = (None, None, None, None);
    // The top-level key the lines belong to, and the indentation of `metadata`'s keys.
    let mut in_metadata = false;
    let mut metadata_indent: Option<usize> = None;
    // Inside a block scalar: lines more indented than this are its text.
    let mut block_text_over: Option<usize> = None;
    for raw in doc.split('\n') {
        let text = raw.trim_start_matches(' ');
        let indent = raw.len() - text.len();
        if let Some(over) = block_text_over {
            if text.is_empty() || indent > over {
                continue;
            }
            block_text_over = None;
        }
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let entry = line_entry(text)?;
        if entry.block_scalar {
            block_text_over = Some(indent);
        }
        if indent == 0 && (text == "-" || text.starts_with("- ")) {
            // An item of the top-level key above (`rules:` then `- apiGroups: ...` at column
            // 0, as Helm renders it); under `metadata` it would make metadata a list.
            if in_metadata && metadata_indent.is_none() {
                return None;
            }
            continue;
        }
        if indent == 0 {
            let key = entry.key?;
            in_metadata = key == "metadata";
            match key {
                "apiVersion" => api_version = Some(plain_string(entry.value?)?),
                "kind" => kind = Some(plain_string(entry.value?)?),
                // `metadata:` then its keys on the lines below: a value here is not that.
                "metadata" if entry.value.is_some() || entry.block_scalar => return None,
                _ => {}
            }
            continue;
        }
        if !in_metadata {
            continue;
        }
        let at = *metadata_indent.get_or_insert(indent);
        if indent < at {
            return None;
        }
        if indent == at {
            match entry.key? {
                "name" => name = Some(plain_string(entry.value?)?),
                "namespace" => namespace = Some(plain_string(entry.value?)?),
                _ => {}
            }
        }
    }
    Some(Identity {
        api_version: api_version?,
        kind: kind?,
        name: name?,
        namespace,
    })
}

/// One line's mapping entry: its key when the line is `key: value` (after any `- ` of
/// sequence items), its value's text, and whether that value starts a block scalar.
struct Entry<'l> {
    key: Option<&'l str>,
    value: Option<&'l str>,
    block_scalar: bool,
}

/// `None` when the line holds something this reader does not follow: a quoted or flow scalar
/// that does not end on the line, an anchor, alias, tag, directive, complex key, or a key
/// that is not plain.
fn line_entry(text: &str) -> Option<Entry<'_>> {
    let mut rest = text;
    let mut item = false;
    while let Some(after) = rest
        .strip_prefix("- ")
        .or(if rest == "-" { Some("") } else { None })
    {
        rest = after.trim_start_matches(' ');
        item = true;
    }
    if rest.is_empty() || rest.starts_with('#') {
        return Some(Entry {
            key: None,
            value: None,
            block_scalar: false,
        });
    }
    if starts_unsure(rest) {
        return None;
    }
    let (key, value) = if rest.starts_with(['"', '\'']) {
        // A quoted key or a quoted item: it must end on the line.
        let after = quoted_end(rest)?;
        let after = after.trim_start_matches(' ');
        match after.strip_prefix(':') {
            Some(v) if v.is_empty() || v.starts_with(' ') => (None, v.trim_start_matches(' ')),
            _ if after.is_empty() || after.starts_with('#') => (None, ""),
            _ => return None,
        }
    } else {
        match key_split(rest) {
            Some((key, value)) => (Some(key), value),
            // A plain scalar item (`- foo`) or a plain scalar's next line.
            None => (None, ""),
        }
    };
    let value = strip_comment(value);
    let block_scalar = value.starts_with(['|', '>']);
    if !value.is_empty() && !block_scalar && !value_ends_on_line(value) {
        return None;
    }
    // An item's key is not a top-level or `metadata` key.
    let key = if item { None } else { key };
    Some(Entry {
        key,
        value: (!value.is_empty() && !block_scalar).then_some(value),
        block_scalar,
    })
}

/// Anchors, aliases, tags, directives, complex keys, reserved indicators, document markers.
fn starts_unsure(text: &str) -> bool {
    text.starts_with(['&', '*', '!', '%', '?', '@', '`', '|', '>'])
        || text.starts_with("---")
        || text.starts_with("...")
}

/// `key` and the value's text of `key: value` / `key:` with a plain key, else `None`.
fn key_split(text: &str) -> Option<(&str, &str)> {
    let colon = text
        .match_indices(':')
        .map(|(i, _)| i)
        .find(|&i| text[i + 1..].is_empty() || text[i + 1..].starts_with(' '))?;
    let key = &text[..colon];
    // A `#` after a space starts a comment: the colon was inside it.
    if key.contains(" #") || key.is_empty() {
        return None;
    }
    Some((
        key.trim_end_matches(' '),
        text[colon + 1..].trim_start_matches(' '),
    ))
}

/// The text without a trailing ` # comment`, outside quotes (a plain value cannot contain
/// ` #`).
fn strip_comment(value: &str) -> &str {
    if value.starts_with(['"', '\'']) {
        return match quoted_end(value) {
            Some(after) => &value[..value.len() - after.len()],
            None => value,
        };
    }
    match value.find(" #") {
        Some(i) => value[..i].trim_end_matches(' '),
        None => value.trim_end_matches(' '),
    }
}

/// A value this reader is sure ends on its line: a quoted scalar closed here (followed by
/// nothing but a comment), a flow collection closed here with no quote inside, or a plain
/// scalar (whose next lines, if any, are more indented).
fn value_ends_on_line(value: &str) -> bool {
    if value.starts_with(['"', '\'']) {
        return quoted_end(value).is_some_and(|after| {
            after.trim_start_matches(' ').is_empty() || after.starts_with(" #")
        });
    }
    if value.starts_with(['[', '{']) {
        // Closed on the line, brackets outside quotes counted: `[a, "b"]`, `{k: v}`.
        let bytes = value.as_bytes();
        let (mut depth, mut i) = (0_i32, 0);
        while i < bytes.len() {
            match bytes[i] {
                b'[' | b'{' => depth += 1,
                b']' | b'}' => depth -= 1,
                b'"' | b'\'' => match quoted_end(&value[i..]) {
                    Some(after) => {
                        i = value.len() - after.len();
                        continue;
                    }
                    None => return false,
                },
                b'#' => return false,
                _ => {}
            }
            if depth <= 0 {
                return depth == 0 && value[i + 1..].trim_start_matches(' ').is_empty();
            }
            i += 1;
        }
        return false;
    }
    !starts_unsure(value)
}

/// The text after a quoted scalar that starts `text` and ends on this line, else `None`.
/// A quoted value can be long (a chart's `| quote`d config, a padding): the next quote or
/// escape is found with `memchr`, not byte by byte.
fn quoted_end(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut i = 1;
    if bytes[0] == b'"' {
        loop {
            i += memchr::memchr2(b'"', b'\\', bytes.get(i..)?)?;
            if bytes[i] == b'"' {
                return Some(&text[i + 1..]);
            }
            // A backslash escapes the character after it: that one is not the end.
            i += 2;
        }
    }
    let quote = bytes[0];
    loop {
        i += memchr::memchr(quote, bytes.get(i..)?)?;
        if quote == b'\'' && bytes.get(i + 1) == Some(&b'\'') {
            // `''` is a quote inside a single-quoted scalar.
            i += 2;
            continue;
        }
        return Some(&text[i + 1..]);
    }
}

/// A value that is a non-empty string to every YAML reader, without escapes: a plain scalar
/// the full parser reads as a string, or a quoted one with nothing to unescape.
fn plain_string(value: &str) -> Option<&str> {
    let inner = match value.as_bytes().first()? {
        b'"' => value.strip_prefix('"')?.strip_suffix('"')?,
        b'\'' => value.strip_prefix('\'')?.strip_suffix('\'')?,
        _ => {
            // A plain scalar: a string only when no reader takes it for anything else.
            return match crate::yaml::plain_scalar(value) {
                Some(crate::tree::Tree::Str(_)) if !value.starts_with(['[', '{']) => Some(value),
                _ => None,
            };
        }
    };
    let simple = !inner.is_empty()
        && !inner.contains(['"', '\'', '\\'])
        && !inner.starts_with(' ')
        && !inner.ends_with(' ');
    simple.then_some(inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(doc: &str) -> Option<(String, String, String, Option<String>)> {
        identity(doc).map(|i| {
            (
                i.api_version.into(),
                i.kind.into(),
                i.name.into(),
                i.namespace.map(Into::into),
            )
        })
    }

    fn some(
        api: &str,
        kind: &str,
        name: &str,
        ns: Option<&str>,
    ) -> Option<(String, String, String, Option<String>)> {
        Some((api.into(), kind.into(), name.into(), ns.map(Into::into)))
    }

    #[test]
    fn reads_a_rendered_template() {
        let doc = "# Source: shop/templates/web.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web # the app\n  namespace: \"shop\"\n  labels:\n    name: not-this\n    app: web\nspec:\n  template:\n    metadata:\n      name: nor-this\n      namespace: nor-this\n  args: [\"--port=8080\"]\n";
        assert_eq!(id(doc), some("apps/v1", "Deployment", "web", Some("shop")));
    }

    #[test]
    fn the_last_of_a_repeated_key_counts_as_the_parser_reads_it() {
        let doc =
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\nkind: Secret\n";
        assert_eq!(id(doc), some("v1", "Secret", "b", None));
    }

    #[test]
    fn block_scalar_text_is_not_read_as_keys() {
        let doc = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: real\n  annotations:\n    note: |\n      name: fake\n  x: |\n    namespace: fake\nkind2: |\n  kind: Secret\ndata:\n  a: b\n";
        assert_eq!(id(doc), some("v1", "ConfigMap", "real", None));
    }

    #[test]
    fn gives_up_on_what_it_cannot_be_sure_of() {
        for doc in [
            // Flow metadata, a value that is not a string, no name, an alias, a tag.
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: 0755\n",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: true\n",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  generateName: x-\n",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: *x\n",
            "apiVersion: v1\nkind: !!str ConfigMap\nmetadata:\n  name: x\n",
            // A quoted scalar that goes on to the next lines, which could read as keys.
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  annotations:\n    a: \"one\nkind: Secret\"\n",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  - 'one\n  name: y'\n",
            // A flow collection that goes on.
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata: [a,\nkind: Secret]\n",
            // Escapes, tabs, carriage returns, a sequence at the top, metadata as a list.
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"a\\u0062\"\n",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: x\n",
            "apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: x\r\n",
            "- apiVersion: v1\n  kind: ConfigMap\n",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  - name: x\n",
            // Keys of metadata less indented than its first.
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n    labels: {}\n  name: x\n",
            "",
        ] {
            assert_eq!(id(doc), None, "{doc:?}");
        }
    }

    #[test]
    fn a_quoted_value_ends_at_its_closing_quote_not_at_an_escaped_one() {
        let long = "x".repeat(5000);
        let head = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: real\n  annotations:\n";
        for (value, ends) in [
            (format!("\"{long}\""), true),
            (format!("\"{long}\\\"kind: Secret\""), true),
            (format!("\"{long}\\\\\""), true),
            (format!("'{long}''s'"), true),
            (format!("\"{long}\" # a comment"), true),
            // Not closed on the line: an escaped quote last, a doubled one last.
            (format!("\"{long}\\\""), false),
            (format!("'{long}''"), false),
            (format!("\"{long}"), false),
        ] {
            let doc = format!("{head}    note: {value}\ndata:\n  a: b\n");
            let read = id(&doc);
            assert_eq!(read.is_some(), ends, "{}", value.replace(&long, "<5000 x>"));
            if ends {
                assert_eq!(read, some("v1", "ConfigMap", "real", None));
                let tree = crate::yaml::parse_document(&doc).unwrap();
                assert_eq!(
                    tree.pointer("/metadata/name")
                        .and_then(crate::tree::Tree::as_str),
                    Some("real")
                );
            }
        }
    }

    #[test]
    fn agrees_with_the_parser_on_every_synthetic_object() {
        for j in 0..12 {
            let (_, doc) = crate::test_util::synthetic_object("app", j);
            let tree = crate::yaml::parse_document(&doc).unwrap();
            let got = identity(&doc).unwrap_or_else(|| panic!("object {j}: {doc}"));
            assert_eq!(
                Some(got.api_version),
                tree.get("apiVersion").and_then(crate::tree::Tree::as_str)
            );
            assert_eq!(
                Some(got.kind),
                tree.get("kind").and_then(crate::tree::Tree::as_str)
            );
            assert_eq!(
                Some(got.name),
                tree.pointer("/metadata/name")
                    .and_then(crate::tree::Tree::as_str)
            );
        }
    }
}
