//! The search for the template line that writes a field and the values keys it reads: the
//! line itself, every item of a list alike, or a key above it whose content is spliced in
//! (`toYaml`, `include`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::actions::{actions, as_is, included, refs, resolve_ref, Scope, MAX_INCLUDE_DEPTH};
use super::path::Want;
use super::values::{lookup, scalar_text};
use super::yaml_lines::{yaml_lines, Doc, Line, Splice, SPLICE};

/// What the search carries: the helpers, the release's values if known.
pub(super) struct Ctx {
    pub(super) defines: BTreeMap<String, String>,
    pub(super) values: Option<Value>,
}

/// What a search found: the line, the keys, and whether the field's value is the key's
/// value as is (a single key, written with no more than `quote`, `toYaml`...).
pub(super) struct Found {
    pub(super) line: Option<usize>,
    pub(super) keys: Vec<String>,
    pub(super) exact: bool,
}

/// The line writing `want` in `text`, and the keys it reads.
pub(super) fn find(
    text: &str,
    want: &[Want],
    segments: &[&str],
    ctx: &Ctx,
    outer: &[Scope],
    depth: usize,
) -> Option<Found> {
    let doc = yaml_lines(text, outer);
    let lines = &doc.lines;
    let field = match want.last() {
        Some(Want::Key(key)) => Some(key.as_str()),
        _ => None,
    };
    // The line that writes the field itself.
    // (line, keys, value, whether the key is literal) of each line writing the field.
    type Candidate<'t> = (usize, Vec<(String, bool)>, &'t str, bool);
    let mut direct: Vec<Candidate<'_>> = Vec::new();
    for line in lines {
        if doc.matches(line, want) {
            let keys = refs(line.value, &line.scopes, &ctx.defines, depth, field);
            if !keys.is_empty() || !line.value.trim().is_empty() {
                let literal = line.path.last().is_some_and(|k| k != "{{");
                direct.push((line.number, keys, line.value, literal));
            }
        }
    }
    // A key the template writes literally wins over `{{ $k }}:` lines that may write any.
    if direct.iter().any(|(_, _, _, literal)| *literal) {
        direct.retain(|(_, _, _, literal)| *literal);
    }
    if let Some((number, keys, value, _)) = direct.first() {
        if direct.iter().any(|(_, other, _, _)| other != keys) {
            // Written in several places (`if`/`else`) from different keys: no one line.
            return Some(Found {
                line: None,
                keys: Vec::new(),
                exact: false,
            });
        }
        let exact_keys: Vec<String> = keys
            .iter()
            .filter(|(_, exact)| *exact)
            .map(|(k, _)| k.clone())
            .collect();
        let all_exact = exact_keys.len() == keys.len();
        return Some(Found {
            line: Some(*number),
            exact: all_exact && exact_keys.len() == 1 && as_is(value),
            keys: exact_keys,
        });
    }
    if let Some(found) = any_item(&doc, want, ctx, depth, field) {
        return Some(found);
    }
    // A key above the field whose content is spliced in (`toYaml`, `include`), deepest first.
    for len in (0..want.len()).rev() {
        let mut literal = None;
        for (i, line) in lines.iter().enumerate() {
            if !doc.matches(line, &want[..len]) {
                continue;
            }
            literal.get_or_insert(line.number);
            let (rest, rest_segments) = (&want[len..], &segments[len..]);
            // A flow collection written on the key's line: `limits: {cpu: "0.5"}`.
            let value = line.value.trim_start();
            if (value.starts_with('{') && !value.starts_with("{{")) || value.starts_with('[') {
                let keys = refs(line.value, &line.scopes, &ctx.defines, depth, None);
                let exact: Vec<String> = keys
                    .iter()
                    .filter(|(_, exact)| *exact)
                    .map(|(k, _)| k.clone())
                    .collect();
                // An item of a flow list with several keys on the line: which one is unsure.
                let unsure = exact.len() != keys.len()
                    || (exact.len() > 1 && rest.iter().any(|w| matches!(w, Want::Item { .. })));
                return Some(Found {
                    line: Some(line.number),
                    keys: if unsure { Vec::new() } else { exact },
                    exact: false,
                });
            }
            // Inline: `key: {{ toYaml .Values.x | nindent 8 }}` (all the key holds); or on
            // the lines right under it.
            let mut splices = vec![Splicer {
                value: line.value,
                scopes: &line.scopes,
                at: Splice {
                    parent: usize::MAX,
                    seq: 0,
                    before: Some(0),
                    conditional: false,
                },
                last: true,
            }];
            splices.extend(
                lines[i + 1..]
                    .iter()
                    .take_while(|l| l.indent > line.indent)
                    .filter(|l| {
                        l.path.len() == line.path.len() + 1
                            && l.path.last().map(String::as_str) == Some(SPLICE)
                    })
                    .filter_map(|l| {
                        let splice = l.splice?;
                        Some(Splicer {
                            value: l.value,
                            scopes: &l.scopes,
                            at: splice,
                            last: doc.is_last(&splice),
                        })
                    }),
            );
            for splicer in splices {
                if let Some((keys, exact)) = spliced(splicer, rest, rest_segments, ctx, depth) {
                    return Some(Found {
                        line: Some(line.number),
                        keys,
                        exact,
                    });
                }
            }
        }
        // The deepest key the template writes literally: the field is somewhere under it,
        // not in a splice further up.
        if let Some(number) = literal {
            if len > 0 {
                return Some(Found {
                    line: Some(number),
                    keys: Vec::new(),
                    exact: false,
                });
            }
        }
    }
    None
}

/// An item whose position is not certain (a list written by `range`, or after an `if`): when
/// every item its list can hold writes the field from the same keys, none read through a
/// `range` item (`{{ $.Values.host }}` inside `range .Values.paths`), which item it is does not
/// matter.
fn any_item(
    doc: &Doc<'_>,
    want: &[Want],
    ctx: &Ctx,
    depth: usize,
    field: Option<&str>,
) -> Option<Found> {
    if !want.iter().any(|w| matches!(w, Want::Item { .. })) {
        return None;
    }
    let any: Vec<&Line<'_>> = doc
        .lines
        .iter()
        .filter(|l| doc.matches_any_item(l, want))
        .collect();
    if any.is_empty() || !doc.cover_their_lists(&any, want) {
        return None;
    }
    let keys: Vec<Vec<(String, bool)>> = any
        .iter()
        .map(|l| refs(l.value, &l.scopes, &ctx.defines, depth, field))
        .collect();
    let same = keys.iter().all(|k| *k == keys[0]);
    if !same || keys[0].is_empty() || !keys[0].iter().all(|(_, exact)| *exact) {
        return None;
    }
    let one = any.len() == 1;
    Some(Found {
        line: one.then(|| any[0].number),
        exact: one && keys[0].len() == 1 && as_is(any[0].value),
        keys: keys[0].iter().map(|(k, _)| k.clone()).collect(),
    })
}

/// A value that splices YAML in under a key (the key's own, or an action-only line under it),
/// and where that YAML lands.
#[derive(Clone, Copy)]
struct Splicer<'l> {
    value: &'l str,
    scopes: &'l [Scope],
    at: Splice,
    /// The last thing the key holds: it renders whatever the values say.
    last: bool,
}

/// The keys for `rest` under a value that splices YAML in: `toYaml X` gives `X.rest`, an
/// `include` is searched for `rest`. A list item is counted from where the splice starts.
fn spliced(
    splicer: Splicer<'_>,
    rest: &[Want],
    rest_segments: &[&str],
    ctx: &Ctx,
    depth: usize,
) -> Option<(Vec<String>, bool)> {
    let Splicer {
        value,
        scopes,
        at,
        last,
    } = splicer;
    for action in actions(value) {
        let words: Vec<&str> = action.split_whitespace().collect();
        if let Some(pos) = words.iter().position(|w| *w == "toYaml" || *w == "toJson") {
            let (base, exact) = words
                .get(pos + 1)
                .and_then(|arg| resolve_ref(arg, scopes))?;
            let base_value = ctx.values.as_ref().and_then(|v| lookup(v, &base));
            let mut key = base.clone();
            let mut rest = rest;
            let mut node = base_value;
            if let Some(first @ Want::Item { .. }) = rest.first() {
                let i = splice_index(first, at, last, node)?;
                key.push_str(&format!("[{i}]"));
                node = node.and_then(|n| n.get(i));
                rest = &rest[1..];
            }
            for want in rest {
                match want {
                    Want::Key(k) => {
                        if k.contains('.') {
                            key.push_str(&format!(".{}", k.replace('.', "\\.")));
                        } else {
                            key.push('.');
                            key.push_str(k);
                        }
                        node = node.and_then(|n| n.get(k));
                    }
                    Want::Item { .. } => {
                        let i = splice_index(
                            want,
                            Splice {
                                parent: usize::MAX,
                                seq: 0,
                                before: Some(0),
                                conditional: false,
                            },
                            true,
                            node,
                        )?;
                        key.push_str(&format!("[{i}]"));
                        node = node.and_then(|n| n.get(i));
                    }
                }
            }
            return Some(if exact {
                (vec![key], true)
            } else {
                (Vec::new(), false)
            });
        }
        if depth < MAX_INCLUDE_DEPTH {
            // An include that writes list items: only when it is all the list holds.
            let sole = at.before == Some(0) && last;
            if matches!(rest.first(), Some(Want::Item { .. })) && !sole {
                continue;
            }
            if let Some(body) = included(action).and_then(|name| ctx.defines.get(name)) {
                if let Some(found) = find(body, rest, rest_segments, ctx, scopes, depth + 1) {
                    return Some((found.keys, found.exact));
                }
            }
        }
    }
    None
}

/// The index in a spliced list (`values`, when known) of the wanted item: by its position
/// from the splice's certain start, or by its fields in the values.
fn splice_index(want: &Want, at: Splice, last: bool, values: Option<&Value>) -> Option<usize> {
    let Want::Item { index, fields } = want else {
        return None;
    };
    let items = values.and_then(Value::as_array);
    if let (Some(n), Some(before)) = (index, at.before) {
        if let Some(i) = n.checked_sub(before) {
            // Its items start at `before`; an item past them is another's, unless it is the
            // last thing the list holds (and so renders whatever the values say).
            match items.map(|items| i < items.len()) {
                Some(false) => return None,
                Some(true) if !at.conditional => return Some(i),
                _ if last => return Some(i),
                _ => {}
            }
        }
    }
    if fields.is_empty() {
        return None;
    }
    let mut found = items?.iter().enumerate().filter(|(_, item)| {
        fields
            .iter()
            .all(|(k, v)| item.get(k).and_then(scalar_text).as_deref() == Some(v))
    });
    match (found.next(), found.next()) {
        (Some((i, _)), None) => Some(i),
        _ => None,
    }
}
