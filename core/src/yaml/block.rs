//! A line-oriented parser for plain block YAML: the shape `helm template` renders.
//!
//! Rendered chart templates are almost always block mappings and sequences of plain, quoted and
//! literal scalars, one entry per line, indented with spaces. This parser reads exactly that,
//! a line at a time over bytes, about ten times faster than a general YAML scanner, and gives up
//! (`None`, and the caller uses a general parser) on anything else: flow collections other
//! than `{}` and `[]`, anchors, aliases, tags, directives, multi-line plain or quoted scalars,
//! block scalars with an indentation indicator or `+` chomping, folded scalars with
//! more-indented lines, tabs or carriage returns where they could matter, keys that are not
//! plain strings, merge keys, nesting deeper than `MAX_DEPTH`, and any indentation it does not
//! expect. What it accepts, it reads as the reference parser does; a unit test and the `yaml`
//! fuzz target check that.

use super::plain_scalar;
use crate::tree::Tree;

/// Deeper documents go to the reference parser, which has its own budget.
const MAX_DEPTH: usize = 64;

/// One line: the spaces before its text, and the text without them and without the newline.
#[derive(Clone, Copy)]
struct Line<'a> {
    indent: usize,
    text: &'a str,
}

impl Line<'_> {
    /// Blank or comment: no structure.
    fn is_insignificant(&self) -> bool {
        self.text.is_empty() || self.text.starts_with('#')
    }
}

/// Parses a document of block YAML, or `None` when it is not (only) that.
pub fn parse(doc: &str) -> Option<Tree> {
    if !plain_characters(doc) {
        return None;
    }
    let mut lines: Vec<Line<'_>> =
        Vec::with_capacity(doc.bytes().filter(|b| *b == b'\n').count() + 1);
    lines.extend(doc.split('\n').map(|raw| {
        let text = raw.trim_start_matches(' ');
        Line {
            indent: raw.len() - text.len(),
            text,
        }
    }));
    let mut parser = Parser {
        lines,
        at: 0,
        entries: Vec::new(),
        items: Vec::new(),
    };
    let tree = match parser.peek() {
        None => Tree::Null,
        Some(first) => {
            let tree = parser.node(first.indent, 0)?;
            if parser.peek().is_some() {
                return None;
            }
            tree
        }
    };
    Some(tree)
}

/// No carriage returns, byte-order marks, directives' or documents' markers, and no characters
/// YAML does not allow in a stream (controls other than tab and newline, C1 controls,
/// non-characters).
pub(crate) fn plain_characters(doc: &str) -> bool {
    // One pass of fixed-size chunks, with no branch inside a chunk (the compiler vectorizes
    // it): every document of every release goes through here at start-up.
    let (mut control, mut high) = (0u8, 0u8);
    for chunk in doc.as_bytes().chunks(64) {
        for &b in chunk {
            control |= u8::from(b < 0x20 && b != b'\n' && b != b'\t') | u8::from(b == 0x7f);
            high |= b & 0x80;
        }
        if control != 0 {
            return false;
        }
    }
    // NEL and the Unicode line separators are line breaks to some YAML readers.
    high == 0
        || !doc.chars().any(|c| {
            matches!(
                c,
                '\u{80}'
                    ..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
            )
        })
}

struct Parser<'a> {
    lines: Vec<Line<'a>>,
    at: usize,
    /// The entries and items of the mappings and sequences being read, innermost last: each
    /// collection's are moved out into one allocation of the right size when it ends.
    entries: Vec<(Box<str>, Tree)>,
    items: Vec<Tree>,
}

impl<'a> Parser<'a> {
    /// The next line with structure, skipping (and consuming) blank and comment lines.
    fn peek(&mut self) -> Option<Line<'a>> {
        while let Some(line) = self.lines.get(self.at) {
            if !line.is_insignificant() {
                return Some(*line);
            }
            self.at += 1;
        }
        None
    }

    /// A block node whose first line is the next one, at `indent`.
    fn node(&mut self, indent: usize, depth: usize) -> Option<Tree> {
        if depth > MAX_DEPTH {
            return None;
        }
        let line = self.peek()?;
        if line.indent != indent {
            return None;
        }
        if is_sequence_entry(line.text) {
            self.sequence(indent, depth)
        } else {
            self.mapping(indent, depth)
        }
    }

    fn mapping(&mut self, indent: usize, depth: usize) -> Option<Tree> {
        let start = self.entries.len();
        while let Some(line) = self.peek() {
            if line.indent < indent {
                break;
            }
            if line.indent > indent || line.text.starts_with('\t') {
                return None;
            }
            if is_sequence_entry(line.text) {
                // Only valid as the value of a key, which `value` reads.
                return None;
            }
            let (key, rest) = split_key(line.text)?;
            self.at += 1;
            let value = self.value(rest, indent, depth, true)?;
            self.entries.push((key, value));
        }
        Some(Tree::map_from(self.entries.drain(start..).collect()))
    }

    fn sequence(&mut self, indent: usize, depth: usize) -> Option<Tree> {
        let start = self.items.len();
        while let Some(line) = self.peek() {
            if line.indent < indent || (line.indent == indent && !is_sequence_entry(line.text)) {
                break;
            }
            if line.indent > indent {
                return None;
            }
            let after_dash = &line.text[1..];
            let inline = after_dash.trim_start_matches(' ');
            if inline.starts_with('\t') {
                return None;
            }
            let column = indent + 1 + (after_dash.len() - inline.len());
            let item = if !inline.is_empty() && !inline.starts_with('#') && is_mapping_entry(inline)
            {
                // `- key: value`: a mapping at the column of its first key, whose first line
                // is the rest of this one.
                self.lines[self.at] = Line {
                    indent: column,
                    text: inline,
                };
                self.mapping(column, depth + 1)?
            } else if is_sequence_entry(inline) {
                return None;
            } else {
                self.at += 1;
                self.value(inline, indent, depth, false)?
            };
            self.items.push(item);
        }
        Some(Tree::List(self.items.drain(start..).collect()))
    }

    /// The value after `key:` (in a mapping at `indent`) or after `- ` (in a sequence at
    /// `indent`): `rest` of the line, then the lines below it. The line itself is consumed.
    fn value(&mut self, rest: &'a str, indent: usize, depth: usize, of_key: bool) -> Option<Tree> {
        if rest.is_empty() || rest.starts_with('#') {
            // The value is the block below, if any.
            return match self.peek() {
                Some(next) if next.indent > indent => self.node(next.indent, depth + 1),
                // `key:` followed by `- item` at the key's own indentation.
                Some(next) if of_key && next.indent == indent && is_sequence_entry(next.text) => {
                    self.sequence(indent, depth + 1)
                }
                _ => Some(Tree::Null),
            };
        }
        let value = match rest.as_bytes()[0] {
            b'|' | b'>' => return self.block_scalar(rest, indent),
            b'"' => {
                let (text, after) = double_quoted(rest)?;
                end_of_value(after)?;
                Tree::Str(text.into_boxed_str())
            }
            b'\'' => {
                let (text, after) = single_quoted(rest)?;
                end_of_value(after)?;
                Tree::Str(text.into_boxed_str())
            }
            b'{' | b'[' => {
                let (value, after) = flow(rest, depth)?;
                end_of_value(after)?;
                value
            }
            _ => plain_value(rest)?,
        };
        // A more indented line after a one-line value would continue it (or be an error).
        if self.peek().is_some_and(|next| next.indent > indent) {
            return None;
        }
        Some(value)
    }

    /// `|`, `|-`, `>` or `>-` on the line just consumed, the content on the lines below, more
    /// indented than `indent`.
    fn block_scalar(&mut self, header: &str, indent: usize) -> Option<Tree> {
        let (literal, rest) = match header.as_bytes()[0] {
            b'|' => (true, &header[1..]),
            _ => (false, &header[1..]),
        };
        let (strip, rest) = match rest.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, rest),
        };
        // `+` chomping and indentation indicators are left to the reference.
        end_of_value(rest)?;

        // The content's indentation is that of its first non-blank line.
        let start = self.at;
        let mut first = start;
        while self.lines.get(first).is_some_and(|l| l.text.is_empty()) {
            first += 1;
        }
        let content_indent = match self.lines.get(first) {
            Some(line) if line.indent > indent => line.indent,
            _ => {
                // No content: only trailing blank lines, which are not part of the value.
                self.at = first.min(self.lines.len());
                if first > start && self.lines[start..first].iter().any(|l| l.indent > indent) {
                    return None;
                }
                return Some(Tree::Str("".into()));
            }
        };
        if self.lines[start..first]
            .iter()
            .any(|l| l.indent > content_indent)
        {
            return None;
        }
        let mut end = first;
        while let Some(line) = self.lines.get(end) {
            if line.text.is_empty() || line.indent >= content_indent {
                end += 1;
            } else {
                break;
            }
        }
        // Trailing empty lines belong to no value (both chomping modes here drop them); a line
        // of spaces beyond the content's indentation is content.
        let mut last = end;
        while last > first
            && self.lines[last - 1].text.is_empty()
            && self.lines[last - 1].indent <= content_indent
        {
            last -= 1;
        }
        self.at = end;
        if self
            .lines
            .get(end)
            .is_some_and(|l| !l.is_insignificant() && l.indent > indent)
        {
            // Less indented than the content but more than the parent.
            return None;
        }
        let content = &self.lines[start..last];
        let mut text = String::new();
        if literal {
            for (i, line) in content.iter().enumerate() {
                if i > 0 {
                    text.push('\n');
                }
                push_content(&mut text, line, content_indent);
            }
        } else {
            // Folding: a line break between two text lines becomes a space, each blank line a
            // newline. More indented lines and leading white space keep their breaks in YAML;
            // those go to the reference.
            let mut pending_breaks = 0;
            let mut started = false;
            for line in content {
                if line.text.is_empty() {
                    if line.indent > content_indent {
                        return None;
                    }
                    pending_breaks += 1;
                    continue;
                }
                if line.indent != content_indent || line.text.starts_with('\t') {
                    return None;
                }
                if started {
                    if pending_breaks == 0 {
                        text.push(' ');
                    } else {
                        text.extend(std::iter::repeat_n('\n', pending_breaks));
                    }
                } else {
                    text.extend(std::iter::repeat_n('\n', pending_breaks));
                }
                pending_breaks = 0;
                started = true;
                text.push_str(line.text);
            }
        }
        if !strip && !content.is_empty() {
            text.push('\n');
        }
        Some(Tree::Str(text.into_boxed_str()))
    }
}

/// A content line of a literal scalar: the spaces beyond the content's indentation are text.
fn push_content(text: &mut String, line: &Line<'_>, content_indent: usize) {
    let extra = line.indent.saturating_sub(content_indent);
    text.extend(std::iter::repeat_n(' ', extra));
    text.push_str(line.text);
}

/// `- item`, `-` alone, `- # comment`.
fn is_sequence_entry(text: &str) -> bool {
    text == "-" || text.starts_with("- ") || text.starts_with("-\t")
}

/// Whether `text` starts with a key and its `:`.
fn is_mapping_entry(text: &str) -> bool {
    match text.as_bytes()[0] {
        b'[' | b'{' => false,
        b'"' => double_quoted(text).is_some_and(|(_, after)| is_colon(after)),
        b'\'' => single_quoted(text).is_some_and(|(_, after)| is_colon(after)),
        _ => plain_key_end(text).is_some(),
    }
}

fn is_colon(after: &str) -> bool {
    after == ":" || after.starts_with(": ")
}

/// Where a plain key ends: the first `: ` or a final `:` before any comment.
fn plain_key_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b':' if i + 1 == bytes.len() || bytes[i + 1] == b' ' => return Some(i),
            b'#' if i > 0 && bytes[i - 1] == b' ' => return None,
            _ => {}
        }
    }
    None
}

/// The key of a mapping entry and the rest of the line after `: ` (leading spaces removed).
fn split_key(text: &str) -> Option<(Box<str>, &str)> {
    let (key, after) = match text.as_bytes()[0] {
        b'"' => {
            let (key, after) = double_quoted(text)?;
            (key.into_boxed_str(), after)
        }
        b'\'' => {
            let (key, after) = single_quoted(text)?;
            (key.into_boxed_str(), after)
        }
        _ => {
            let end = plain_key_end(text)?;
            let key = &text[..end];
            if key.is_empty()
                || key.ends_with(' ')
                || key.contains('\t')
                || starts_with_indicator(key)
                || key == "<<"
            {
                return None;
            }
            match plain_scalar(key)? {
                Tree::Str(key) => (key, &text[end..]),
                _ => return None,
            }
        }
    };
    let rest = after.strip_prefix(':')?;
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    let rest = rest.trim_start_matches(' ');
    if rest.starts_with('\t') {
        return None;
    }
    Some((key, rest))
}

/// What may follow a complete value on its line: spaces and a comment.
fn end_of_value(after: &str) -> Option<()> {
    let rest = after.trim_start_matches(' ');
    (rest.is_empty() || (rest.starts_with('#') && rest.len() < after.len())).then_some(())
}

/// A plain scalar that is the rest of its line, up to a comment.
fn plain_value(rest: &str) -> Option<Tree> {
    let bytes = rest.as_bytes();
    let mut end = bytes.len();
    for i in 1..bytes.len() {
        if bytes[i] == b'#' && bytes[i - 1] == b' ' {
            end = i;
            break;
        }
    }
    let text = rest[..end].trim_end_matches(' ');
    if text.contains('\t')
        || text.contains(": ")
        || text.ends_with(':')
        || starts_with_indicator(text)
    {
        return None;
    }
    plain_scalar(text)
}

/// A plain scalar may not start with an indicator; `-`, `?` and `:` may start one only when
/// followed by a non-space, which this parser leaves to the reference except for `-`.
fn starts_with_indicator(text: &str) -> bool {
    let bytes = text.as_bytes();
    match bytes[0] {
        b'-' => bytes.get(1).is_none_or(|b| *b == b' '),
        b'?' | b':' | b',' | b'[' | b']' | b'{' | b'}' | b'#' | b'&' | b'*' | b'!' | b'|'
        | b'>' | b'\'' | b'"' | b'%' | b'@' | b'`' => true,
        _ => false,
    }
}

/// A flow collection closed on this line (`[a, "b", {c: 1}]`, `{a: 1, b: [x]}`): its value
/// and what follows it. Flow entries here are scalars and flow collections separated by `,`;
/// single-pair mappings in sequences, keys without values, empty entries, comments and
/// trailing commas are left to the reference.
fn flow(text: &str, depth: usize) -> Option<(Tree, &str)> {
    if depth > MAX_DEPTH {
        return None;
    }
    let is_map = text.starts_with('{');
    let close = if is_map { '}' } else { ']' };
    let mut rest = text[1..].trim_start_matches(' ');
    let mut items = Vec::new();
    let mut entries = Vec::new();
    if let Some(after) = rest.strip_prefix(close) {
        rest = after;
    } else {
        loop {
            if is_map {
                let (key, after) = flow_scalar(rest)?;
                let Tree::Str(key) = key else {
                    return None;
                };
                if &*key == "<<" {
                    return None;
                }
                let after = after.strip_prefix(": ")?.trim_start_matches(' ');
                let (value, after) = flow_node(after, depth)?;
                entries.push((key, value));
                rest = after;
            } else {
                let (item, after) = flow_node(rest, depth)?;
                if after.starts_with(':') {
                    return None;
                }
                items.push(item);
                rest = after;
            }
            rest = rest.trim_start_matches(' ');
            if let Some(after) = rest.strip_prefix(close) {
                rest = after;
                break;
            }
            rest = rest.strip_prefix(',')?.trim_start_matches(' ');
            if rest.starts_with([',', ']', '}']) {
                return None;
            }
        }
    }
    let value = if is_map {
        Tree::map_from(entries)
    } else {
        Tree::List(items.into_boxed_slice())
    };
    Some((value, rest))
}

fn flow_node(text: &str, depth: usize) -> Option<(Tree, &str)> {
    match text.as_bytes().first()? {
        b'[' | b'{' => flow(text, depth + 1),
        _ => flow_scalar(text),
    }
}

/// A quoted or plain scalar inside a flow collection, and what follows it.
fn flow_scalar(text: &str) -> Option<(Tree, &str)> {
    match text.as_bytes().first()? {
        b'"' => double_quoted(text).map(|(s, after)| (Tree::Str(s.into_boxed_str()), after)),
        b'\'' => single_quoted(text).map(|(s, after)| (Tree::Str(s.into_boxed_str()), after)),
        _ => {
            // A plain scalar ends at a flow indicator or at `: `. `#`, `:` and tabs inside
            // one are left to the reference.
            let indicator = text.find([',', '[', ']', '{', '}'])?;
            let end = text[..indicator].find(": ").unwrap_or(indicator);
            let scalar = text[..end].trim_end_matches(' ');
            if scalar.is_empty()
                || scalar.contains(['#', ':', '\t'])
                || starts_with_indicator(scalar)
            {
                return None;
            }
            Some((plain_scalar(scalar)?, &text[scalar.len()..]))
        }
    }
}

/// A single-quoted scalar closed on this line: its text and what follows the closing quote.
fn single_quoted(text: &str) -> Option<(String, &str)> {
    let body = &text[1..];
    let mut out = String::new();
    let mut from = 0;
    loop {
        let quote = from + body[from..].find('\'')?;
        out.push_str(&body[from..quote]);
        if body[quote + 1..].starts_with('\'') {
            out.push('\'');
            from = quote + 2;
        } else {
            return Some((out, &body[quote + 1..]));
        }
    }
}

/// A double-quoted scalar closed on this line: its text and what follows the closing quote.
fn double_quoted(text: &str) -> Option<(String, &str)> {
    let body = &text[1..];
    let mut out = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &body[i + 1..])),
            '\\' => {
                let (_, escape) = chars.next()?;
                let simple = match escape {
                    '0' => Some('\0'),
                    'a' => Some('\u{7}'),
                    'b' => Some('\u{8}'),
                    't' | '\t' => Some('\t'),
                    'n' => Some('\n'),
                    'v' => Some('\u{b}'),
                    'f' => Some('\u{c}'),
                    'r' => Some('\r'),
                    'e' => Some('\u{1b}'),
                    ' ' => Some(' '),
                    '"' => Some('"'),
                    '/' => Some('/'),
                    '\\' => Some('\\'),
                    'N' => Some('\u{85}'),
                    '_' => Some('\u{a0}'),
                    'L' => Some('\u{2028}'),
                    'P' => Some('\u{2029}'),
                    _ => None,
                };
                let c = match (simple, escape) {
                    (Some(c), _) => c,
                    (None, 'x') => hex_char(&mut chars, 2)?,
                    (None, 'u') => hex_char(&mut chars, 4)?,
                    (None, 'U') => hex_char(&mut chars, 8)?,
                    _ => return None,
                };
                out.push(c);
            }
            c => out.push(c),
        }
    }
    // Not closed on this line: a multi-line scalar, left to the reference.
    None
}

fn hex_char(chars: &mut std::str::CharIndices<'_>, digits: usize) -> Option<char> {
    let mut code = 0u32;
    for _ in 0..digits {
        code = code * 16 + chars.next()?.1.to_digit(16)?;
    }
    char::from_u32(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::reference;

    /// What the block parser accepts, it reads as the reference does.
    fn agrees(doc: &str) -> bool {
        match parse(doc) {
            Some(tree) => {
                let reference = reference(doc).unwrap_or_else(|e| {
                    panic!("block parser accepted invalid YAML {doc:?}: {e:?}")
                });
                assert_eq!(tree, reference, "the parsers disagree on {doc:?}");
                true
            }
            None => false,
        }
    }

    #[test]
    fn rendered_templates_are_read_like_the_reference() {
        for doc in [
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels:\n    app.kubernetes.io/name: web\n    helm.sh/chart: \"shop-0.1.0\"\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n        - name: web\n          image: 'nginx:1.25'\n          args:\n          - --port=80\n          - -v\n          resources: {}\n          ports: []\n          env:\n            - name: EMPTY\n              value:\n            - name: TILDE\n              value: ~\n            - name: URL\n              value: http://x:8080/a#b # a comment\n",
            "# Source: x\n\napiVersion: v1\nkind: ConfigMap\n\nmetadata:\n  name: cfg   # trailing\ndata:\n  script: |\n    #!/bin/sh\n      indented\n\n    echo done\n\n\n  strip: |-\n    no newline\n  folded: >-\n    one\n    two\n\n    three\n  empty: |\n  after: x\n",
            "a:\n- 1\n- -2\n- 0.5\n- true\n- null\n-\n- \"\\u00e9\\t\\\"q\\\"\"\n- 'it''s'\nb: c\n",
            "list:\n  - name: a\n    nested:\n      - x: 1\n        z: [] # none\n  -   name: b\n      v: \"2\"\n",
            "\"quoted key\": 1\n'single': 2\nk: v\nk: last\n",
            "a: |\n  text\n\n\n",
            "a: >\n  folded\n  text\nb: 1\n",
            "a: |-\n\nb: 2\n",
            "  indented: doc\n  second: 2\n",
            "",
            "# only a comment\n",
            "a: b:c\nd: -e\nf: é ü\n",
            "rules:\n- apiGroups: [\"\"]\n  verbs: [get, list,watch]\n  x: {a: 1, b: [c, 'd', \"e f\"], e: {}, f: [[], [1]]}\n- {name: a, value: \"1\"}\n- [a]\n",
        ] {
            assert!(agrees(doc), "the block parser did not take {doc:?}");
        }
    }

    #[test]
    fn anything_else_goes_to_the_reference() {
        for doc in [
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "<<: {a: 1}\n",
            "a: {b}\n",
            "a: [b: 1]\n",
            "a: [1, 2,]\n",
            "a: [1, , 2]\n",
            "a: {b: 1\n",
            "a: {b: 1} x\n",
            "a: [x:y]\n",
            "a: [\"x\":y]\n",
            "a: [yes]\n",
            "a: {<<: {}}\n",
            "a: multi\n  line\n",
            "a: \"multi\n  line\"\n",
            "a: |+\n  keep\n",
            "a: |2\n    text\n",
            "a: >\n  folded\n    more\n",
            "a: 0755\n",
            "a: yes\n",
            "1: one\n",
            "true: x\n",
            "null: x\n",
            "a:\r\n  b: 1\r\n",
            "a:\n\tb: 1\n",
            "a: b: c\n",
            "- - nested\n",
            "scalar\n",
            "? complex\n: key\n",
            "%YAML 1.2\n---\na: 1\n",
            "a: 1\n...\n",
            "a: 1\n b: 2\n",
            "a:\n  b: 1\n c: 2\n",
            "a: \"x\" y\n",
            "a: \"\\q\"\n",
            "a: @x\n",
            "a: 99999999999999999999\n",
            "a: 1e3\n",
            "a: 0x1F\n",
            "a: 1_000\n",
            "a: 12:30\n",
            "a: .inf\n",
            "a: -.inf\n",
            "a: 1.25.3\n",
            "a: 2026-11-21\n",
            "a: off\n",
            "a: \u{0}\n",
            "a: |\n  x\u{85}y\n",
        ] {
            assert!(parse(doc).is_none(), "the block parser took {doc:?}");
        }
    }

    #[test]
    fn deep_nesting_goes_to_the_reference() {
        let doc: String = (0..200).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
        assert!(parse(&doc).is_none());
        let shallow: String = (0..10).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
        assert!(agrees(&shallow));
    }

    #[test]
    fn every_recorded_manifest_is_read_like_the_reference() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        let (mut docs, mut taken) = (0, 0);
        for folder in ["cluster-capture/releases", "helm3-style"] {
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
                        docs += 1;
                        let ok = agrees(doc);
                        if !ok && std::env::var("SHOW").is_ok() {
                            eprintln!("=====\n{doc}");
                        }
                        taken += usize::from(ok);
                    }
                }
            }
        }
        assert!(docs > 20, "only {docs} documents found");
        // Recorded charts are plain block YAML: nearly all take this path.
        assert!(taken * 10 >= docs * 9, "{taken} of {docs} documents taken");
    }
}
