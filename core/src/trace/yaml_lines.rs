//! A template read as YAML, line by line and not executed: each line's key path, the scopes
//! open around it and where a splice lands; the keys and list items it opens, with the list
//! positions that are certain; and which lines a traced path matches.

use super::actions::{actions, apply_blocks, Scope};
use super::path::Want;

/// The key a line gets when it is only an action that writes YAML (`{{ toYaml . | nindent 4 }}`).
pub(super) const SPLICE: &str = "{{splice}}";

/// The documents of a template file (split at `---`) that write `kind: <kind>`, with the number
/// of lines before each; the whole file when none says so (a kind set by an action).
pub(super) fn documents<'a>(text: &'a str, kind: &str) -> Vec<(usize, &'a str)> {
    let mut docs = Vec::new();
    let (mut start, mut start_line, mut offset) = (0, 0, 0);
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if line.trim_end() == "---" || line.starts_with("--- ") {
            docs.push((start_line, &text[start..offset]));
            start = offset + line.len();
            start_line = i + 1;
        }
        offset += line.len();
    }
    docs.push((start_line, &text[start..]));
    let wanted = format!("kind: {kind}");
    let matching: Vec<(usize, &str)> = docs
        .into_iter()
        .filter(|(_, doc)| doc.lines().any(|l| l.trim_end() == wanted))
        .collect();
    if matching.is_empty() {
        vec![(0, text)]
    } else {
        matching
    }
}

/// One line of a template as YAML: its key path (list items as `*`) and what it writes.
pub(super) struct Line<'a> {
    pub(super) number: usize,
    pub(super) indent: usize,
    /// Keys from the document's root; a key written by an action is `{{`.
    pub(super) path: Vec<String>,
    /// The [`Node`] of each key and item of `path`.
    nodes: Vec<usize>,
    /// The text after `key:` (or after `- `), actions included.
    pub(super) value: &'a str,
    pub(super) scopes: Vec<Scope>,
    /// For a line that splices YAML in (`{{ toYaml . | nindent 8 }}`): where it lands.
    pub(super) splice: Option<Splice>,
}

/// Where a splice lands in the key above it (which may hold a list).
#[derive(Clone, Copy, Debug)]
pub(super) struct Splice {
    /// The [`Node`] it lands under.
    pub(super) parent: usize,
    /// Its place among the items and splices under `parent`.
    pub(super) seq: usize,
    /// How many items surely come before it; `None` when uncertain.
    pub(super) before: Option<usize>,
    /// Inside a block (`if`, `with`, `range`) opened under `parent`: it may not render.
    pub(super) conditional: bool,
}

/// A key or list item of a template, as the lines under it need it.
#[derive(Clone, Debug, Default)]
struct Node {
    /// How many scopes are open once its line is read.
    depth: usize,
    /// The certain position of the next item under it; `None` once uncertain.
    next: Option<usize>,
    /// Items and splices under it.
    producers: usize,
    /// For an item: its certain position in its list.
    pos: Option<usize>,
    /// For an item: its literal scalar fields that always render (`name: web`).
    fields: Vec<(String, String)>,
    parent: Option<usize>,
}

/// The lines of a template and its keys and items.
pub(super) struct Doc<'a> {
    pub(super) lines: Vec<Line<'a>>,
    nodes: Vec<Node>,
}

impl Doc<'_> {
    pub(super) fn matches(&self, line: &Line<'_>, want: &[Want]) -> bool {
        line.path.len() == want.len()
            && line
                .path
                .iter()
                .zip(&line.nodes)
                .zip(want)
                .all(|((have, node), want)| match want {
                    Want::Key(key) => have == key || have == "{{",
                    Want::Item { .. } => have == "*" && self.item_matches(*node, want),
                })
    }

    /// Whether item `node` is surely the wanted one.
    fn item_matches(&self, node: usize, want: &Want) -> bool {
        let Want::Item { index, fields } = want else {
            return false;
        };
        let item = &self.nodes[node];
        if let (Some(index), Some(pos)) = (index, item.pos) {
            return *index == pos;
        }
        if fields.is_empty() {
            return false;
        }
        let mut all_literal = true;
        for (k, v) in fields {
            match item.fields.iter().find(|(fk, _)| fk == k) {
                Some((_, fv)) if fv != v => return false,
                Some(_) => {}
                None => all_literal = false,
            }
        }
        // Not identified by its fields: the only item of a list that has nothing else.
        all_literal
            || (index.is_none()
                && item.pos == Some(0)
                && item.parent.is_some_and(|p| self.nodes[p].producers == 1))
    }

    /// [`Self::matches`] with any item of a list for each wanted item that may be at its index.
    pub(super) fn matches_any_item(&self, line: &Line<'_>, want: &[Want]) -> bool {
        line.path.len() == want.len()
            && line
                .path
                .iter()
                .zip(&line.nodes)
                .zip(want)
                .all(|((have, node), want)| match want {
                    Want::Key(key) => have == key || have == "{{",
                    // An item at a certain other position is not it.
                    Want::Item { index, .. } => {
                        have == "*"
                            && match (index, self.nodes[*node].pos) {
                                (Some(index), Some(pos)) => *index == pos,
                                _ => true,
                            }
                    }
                })
    }

    /// Whether `lines` (each matching a want with items) write every item their lists can
    /// hold: each list they are in has no producer (item, splice) but their items.
    pub(super) fn cover_their_lists(&self, lines: &[&Line<'_>], want: &[Want]) -> bool {
        want.iter().enumerate().all(|(k, w)| {
            if !matches!(w, Want::Item { .. }) {
                return true;
            }
            let mut items: Vec<usize> = lines.iter().map(|l| l.nodes[k]).collect();
            items.sort_unstable();
            items.dedup();
            let parents: Vec<Option<usize>> = items.iter().map(|&i| self.nodes[i].parent).collect();
            match parents.first() {
                Some(Some(parent)) => {
                    parents.iter().all(|p| *p == Some(*parent))
                        && self.nodes[*parent].producers == items.len()
                }
                _ => false,
            }
        })
    }

    pub(super) fn is_last(&self, splice: &Splice) -> bool {
        splice.seq + 1 == self.nodes[splice.parent].producers
    }
}

/// A literal scalar as YAML reads it (quotes dropped); `None` for anything else.
fn literal_scalar(value: &str) -> Option<String> {
    let value = value.trim();
    if value.is_empty()
        || value.contains("{{")
        || value.starts_with(['{', '[', '|', '>', '&', '*', '!', '#'])
    {
        return None;
    }
    let value = value.split(" #").next().unwrap_or(value).trim();
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return Some(inner.to_string());
        }
    }
    Some(value.to_string())
}

/// The YAML lines of a template with their key paths and scopes, and its keys and items.
pub(super) fn yaml_lines<'a>(text: &'a str, outer: &[Scope]) -> Doc<'a> {
    let mut out = Vec::new();
    let mut nodes: Vec<Node> = Vec::new();
    let mut scopes: Vec<Scope> = outer.to_vec();
    // (indent, key, node) of the open mappings and lists.
    let mut open: Vec<(usize, String, usize)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let action_only = trimmed.starts_with("{{")
            && trimmed.trim_end().ends_with("}}")
            && actions(trimmed).len() == trimmed.matches("{{").count()
            && strip_actions(trimmed).trim().is_empty();
        if action_only {
            let splices = actions(trimmed).iter().any(|a| {
                a.contains("toYaml") || a.contains("include") || a.contains("template \"")
            }) && !actions(trimmed)
                .iter()
                .any(|a| a.starts_with("define") || a.starts_with("if"));
            if splices {
                // Its YAML lands at `nindent N`: under the last key shallower than N, or in the
                // list whose items sit at N beside their key (`rules:` then `- host:` below it).
                let at = nindent(trimmed).unwrap_or(raw.len() - trimmed.len());
                let compact = open.iter().any(|(i, k, _)| *i == at && k == "*");
                let under: Vec<&(usize, String, usize)> = open
                    .iter()
                    .filter(|(indent, key, _)| {
                        *indent < at || (compact && *indent == at && key != "*")
                    })
                    .collect();
                let mut path: Vec<String> = under.iter().map(|(_, k, _)| k.clone()).collect();
                let mut ids: Vec<usize> = under.iter().map(|(_, _, n)| *n).collect();
                let splice = under.last().map(|(_, _, parent)| {
                    let node = &mut nodes[*parent];
                    let splice = Splice {
                        parent: *parent,
                        seq: node.producers,
                        before: node.next,
                        conditional: scopes.len() != node.depth,
                    };
                    node.producers += 1;
                    node.next = None;
                    splice
                });
                path.push(SPLICE.into());
                ids.push(usize::MAX);
                out.push(Line {
                    number: i + 1,
                    indent: at,
                    path,
                    nodes: ids,
                    value: trimmed,
                    scopes: scopes.clone(),
                    splice,
                });
            }
            apply_blocks(trimmed, &mut scopes);
            continue;
        }
        let mut indent = raw.len() - trimmed.len();
        let mut body = trimmed;
        let mut item = false;
        // List items: `- key: v` opens an item, whose keys sit two columns further in. A list
        // may start at its key's own column (`containers:` then `- name:` below it).
        while let Some(rest) = body.strip_prefix("- ").or((body == "-").then_some("")) {
            open.retain(|(i, k, _)| *i < indent || (*i == indent && k != "*" && !item));
            let parent = open.last().map(|(_, _, n)| *n);
            let pos = parent.and_then(|p| {
                let node = &mut nodes[p];
                let certain = scopes.len() == node.depth;
                let pos = if certain { node.next } else { None };
                node.next = pos.map(|n| n + 1);
                node.producers += 1;
                pos
            });
            nodes.push(Node {
                depth: scopes.len(),
                next: Some(0),
                pos,
                parent,
                ..Node::default()
            });
            open.push((indent, "*".into(), nodes.len() - 1));
            item = true;
            indent += 2 + (rest.len() - rest.trim_start().len());
            body = rest.trim_start();
        }
        if !item {
            open.retain(|(i, _, _)| *i < indent);
        }
        let (key, value) = match split_key(body) {
            Some((key, value)) => (Some(key), value),
            None => (None, body),
        };
        let mut path: Vec<String> = open.iter().map(|(_, k, _)| k.clone()).collect();
        let mut ids: Vec<usize> = open.iter().map(|(_, _, n)| *n).collect();
        // A literal field of an item that always renders: what identifies the item.
        if let (Some(key), Some((_, parent_key, parent))) = (&key, open.last()) {
            if parent_key == "*" && scopes.len() == nodes[*parent].depth {
                if let Some(literal) = literal_scalar(value) {
                    nodes[*parent].fields.push((key.clone(), literal));
                }
            }
        }
        let parent = open.last().map(|(_, _, n)| *n);
        if let Some(key) = &key {
            path.push(key.clone());
            ids.push(nodes.len());
        }
        out.push(Line {
            number: i + 1,
            indent,
            path,
            nodes: ids,
            value,
            scopes: scopes.clone(),
            splice: None,
        });
        apply_blocks(value, &mut scopes);
        if let Some(key) = key {
            nodes.push(Node {
                depth: scopes.len(),
                next: Some(0),
                parent,
                ..Node::default()
            });
            open.push((indent, key, nodes.len() - 1));
        }
    }
    Doc { lines: out, nodes }
}

fn strip_actions(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        match rest[start..].find("}}") {
            Some(end) => rest = &rest[start + end + 2..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// `N` of `nindent N` / `indent N` in a line's actions.
fn nindent(text: &str) -> Option<usize> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == "nindent" || *w == "indent")?;
    words
        .get(at + 1)?
        .trim_end_matches("}}")
        .trim_end_matches('-')
        .parse()
        .ok()
}

/// `key: value` of a YAML line (a key written by an action is `{{`).
fn split_key(body: &str) -> Option<(String, &str)> {
    if body.starts_with("{{") {
        // `{{ $key }}: {{ $value }}`
        let end = body.find("}}")? + 2;
        let after = body[end..].strip_prefix(':')?;
        return Some(("{{".into(), after.trim_start()));
    }
    let (key, value) = if let Some(quoted) = body.strip_prefix('"') {
        let end = quoted.find('"')?;
        let after = quoted[end + 1..].strip_prefix(':')?;
        (&quoted[..end], after)
    } else {
        let colon = body
            .find(": ")
            .or_else(|| body.ends_with(':').then(|| body.len() - 1))?;
        let key = &body[..colon];
        if key.contains("{{") || key.contains(' ') {
            return None;
        }
        (key, &body[colon + 1..])
    };
    Some((key.to_string(), value.trim_start()))
}
