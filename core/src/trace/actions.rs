//! Go template actions: the values keys an action (`{{ ... }}`) reads, under the `with` and
//! `range` scopes open around it, and the helpers (`define`) an `include` is followed into.

use std::collections::BTreeMap;

use crate::chart::{Templates, CHART_VALUES, RELEASE_CONFIG};

/// A values key in scope: `with .Values.a` makes `.b` mean `a.b`.
#[derive(Clone, Debug)]
pub(super) enum Scope {
    /// `with`: the dot is this key (`None`: not a values key); `false`: read through a
    /// `range` item, so not a key `--set` can address.
    With(Option<(String, bool)>),
    /// `range`: the dot is an item of this key; `$k`/`$v` name its keys and values.
    Range {
        key: Option<String>,
        key_var: Option<String>,
        value_var: Option<String>,
    },
    /// `if`, `define`, `block`, anything else closed by `end`.
    Other,
}

pub(super) const MAX_INCLUDE_DEPTH: usize = 4;

/// The actions (`{{ ... }}` contents, trim markers and comments dropped) of a text.
pub(super) fn actions(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let Some(end) = rest[start..].find("}}") else {
            break;
        };
        let inner = rest[start + 2..start + end]
            .trim_start_matches('-')
            .trim_end_matches('-')
            .trim();
        if !inner.starts_with("/*") {
            out.push(inner);
        }
        rest = &rest[start + end + 2..];
    }
    out
}

/// Applies the block actions of a line to the scope stack.
pub(super) fn apply_blocks(text: &str, scopes: &mut Vec<Scope>) {
    for action in actions(text) {
        let mut words = action.split_whitespace();
        match words.next() {
            Some("with") => {
                let arg = words.next().unwrap_or_default();
                let key = resolve_ref(arg, scopes);
                scopes.push(Scope::With(key));
            }
            Some("range") => {
                let words: Vec<&str> = action.split_whitespace().skip(1).collect();
                let (vars, source) = match words.iter().position(|w| *w == ":=") {
                    Some(at) => (&words[..at], words.get(at + 1).copied()),
                    None => (&words[..0], words.first().copied()),
                };
                let vars: Vec<String> = vars
                    .iter()
                    .map(|v| v.trim_end_matches(',').to_string())
                    .collect();
                let (key_var, value_var) = match vars.as_slice() {
                    [k, v] => (Some(k.clone()), Some(v.clone())),
                    [v] => (None, Some(v.clone())),
                    _ => (None, None),
                };
                let key = source.and_then(|s| resolve(s, scopes));
                scopes.push(Scope::Range {
                    key,
                    key_var,
                    value_var,
                });
            }
            Some("if" | "define" | "block") => scopes.push(Scope::Other),
            Some("end") => {
                scopes.pop();
            }
            _ => {}
        }
    }
}

/// Values keys an action reads: `.Values.a.b`, `$.Values.a`, and `.b` relative to a `with`.
fn action_refs(action: &str, scopes: &[Scope]) -> Vec<(String, bool)> {
    let mut keys = Vec::new();
    for word in action.split(|c: char| c.is_whitespace() || "()|,".contains(c)) {
        if let Some(key) = resolve_ref(word, scopes) {
            push_unique(&mut keys, key);
        }
    }
    keys
}

/// The values key a template argument denotes, if any.
fn resolve(word: &str, scopes: &[Scope]) -> Option<String> {
    resolve_ref(word, scopes).map(|(key, _)| key)
}

/// The values key a template argument denotes, and whether it is that key's own value
/// (`false`: an item of a `range`, which `--set` cannot address by the key found).
pub(super) fn resolve_ref(word: &str, scopes: &[Scope]) -> Option<(String, bool)> {
    // A variable of a `range` (`$k`, `$v`, `$v.x`): an item of the ranged key.
    if word.starts_with('$') && !word.starts_with("$.") && word.len() > 1 {
        let var = word.split('.').next().unwrap_or(word);
        return scopes.iter().rev().find_map(|s| match s {
            Scope::Range {
                key,
                key_var,
                value_var,
            } if key_var.as_deref() == Some(var) || value_var.as_deref() == Some(var) => {
                key.clone().map(|k| (k, false))
            }
            _ => None,
        });
    }
    let word = word.trim_start_matches('$');
    if let Some(key) = word.strip_prefix(".Values.") {
        return valid_key(key).map(|k| (k, true));
    }
    if word == ".Values" {
        return None;
    }
    // Relative to the innermost `with` or `range`.
    let (dot, exact) = scopes.iter().rev().find_map(|s| match s {
        Scope::With(key) => Some(key.clone()),
        Scope::Range { key, .. } => Some(key.clone().map(|k| (k, false))),
        Scope::Other => None,
    })??;
    if word == "." {
        return Some((dot, exact));
    }
    let rest = word.strip_prefix('.')?;
    let builtin = [
        "Release",
        "Chart",
        "Capabilities",
        "Template",
        "Files",
        "Values",
    ];
    if builtin.iter().any(|b| rest.split('.').next() == Some(*b)) {
        return None;
    }
    let rest = valid_key(rest)?;
    Some(if exact {
        (format!("{dot}.{rest}"), true)
    } else {
        (dot, false)
    })
}

fn valid_key(key: &str) -> Option<String> {
    (!key.is_empty()
        && key
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_alphanumeric() || c == '_')))
    .then(|| key.to_string())
}

/// Values keys a value text reads, each with whether `--set` addresses it as the field's
/// own (`false`: read through a `range` item). `field`: the traced key, for `{{ $k }}:` in a
/// `range` over a map.
pub(super) fn refs(
    value: &str,
    scopes: &[Scope],
    defines: &BTreeMap<String, String>,
    depth: usize,
    field: Option<&str>,
) -> Vec<(String, bool)> {
    let mut keys: Vec<(String, bool)> = Vec::new();
    for action in actions(value) {
        for key in action_refs(action, scopes) {
            push_unique(&mut keys, key);
        }
        // A key written by `{{ $k }}` in `range $k, $v := .Values.m`: the key is the field's.
        if let Some(field) = field {
            for scope in scopes.iter().rev() {
                if let Scope::Range {
                    key: Some(map),
                    key_var: Some(k),
                    value_var,
                } = scope
                {
                    let uses = |var: &str| action.split_whitespace().any(|w| w == var);
                    if uses(k) || value_var.as_deref().is_some_and(uses) {
                        keys.retain(|(key, _)| key != map);
                        push_unique(&mut keys, (join_key(map, &[field]), true));
                    }
                    break;
                }
            }
        }
        if depth < MAX_INCLUDE_DEPTH {
            if let Some(body) = included(action).and_then(|name| defines.get(name)) {
                for key in refs(body, &[], defines, depth + 1, field) {
                    push_unique(&mut keys, key);
                }
            }
        }
    }
    keys
}

/// The template name of `include "name" ...` or `template "name" ...`.
pub(super) fn included(action: &str) -> Option<&str> {
    let at = action
        .find("include \"")
        .map(|i| i + 9)
        .or_else(|| action.find("template \"").map(|i| i + 10))?;
    let rest = &action[at..];
    Some(&rest[..rest.find('"')?])
}

/// `base` followed by the rest of the path in `--set` syntax: `resources.limits.cpu`,
/// `tolerations[0].key`.
fn join_key(base: &str, rest: &[&str]) -> String {
    let mut key = base.to_string();
    for segment in rest {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if segment.parse::<usize>().is_ok() {
            key.push_str(&format!("[{segment}]"));
        } else if segment.starts_with('[') {
            // A keyed item (`[name=web]`): --set addresses items by index only.
            break;
        } else if segment.contains('.') {
            key.push_str(&format!(".{}", segment.replace('.', "\\.")));
        } else {
            key.push('.');
            key.push_str(&segment);
        }
    }
    key
}

pub(super) fn push_unique<T: PartialEq>(keys: &mut Vec<T>, key: T) {
    if !keys.contains(&key) {
        keys.push(key);
    }
}

/// Whether a value text is one action that writes its key's value as is:
/// `{{ .Values.x }}`, `"{{ .Values.x | quote }}"`.
pub(super) fn as_is(value: &str) -> bool {
    let value = value.trim();
    let value = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value);
    if !value.starts_with("{{") || !value.ends_with("}}") || actions(value).len() != 1 {
        return false;
    }
    let harmless = [
        "quote", "squote", "toString", "toYaml", "toJson", "trim", "nindent", "indent", "int",
        "int64", "float64", "|",
    ];
    actions(value)[0]
        .split_whitespace()
        .skip(1)
        .all(|w| harmless.contains(&w) || w.parse::<usize>().is_ok())
}

/// Every `define` of the chart's templates (helpers), by name.
pub(super) fn defines(templates: &Templates) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let texts = templates
        .iter()
        .filter(|(name, _)| name.as_str() != CHART_VALUES && name.as_str() != RELEASE_CONFIG)
        .map(|(_, text)| text);
    for text in texts {
        let mut rest = text.as_str();
        while let Some(start) = rest.find("define \"") {
            let after = &rest[start + 8..];
            let Some(name_end) = after.find('"') else {
                break;
            };
            let name = &after[..name_end];
            let Some(open_end) = after.find("}}") else {
                break;
            };
            let body = &after[open_end + 2..];
            // The body runs to the `end` that closes the define, counting nested blocks.
            let mut depth = 1usize;
            let mut cursor = 0;
            let mut end_at = body.len();
            while let Some(open) = body[cursor..].find("{{") {
                let at = cursor + open;
                let Some(close) = body[at..].find("}}") else {
                    break;
                };
                let inner = body[at + 2..at + close].trim_matches('-').trim();
                let word = inner.split_whitespace().next().unwrap_or_default();
                match word {
                    "if" | "with" | "range" | "define" | "block" => depth += 1,
                    "end" => {
                        depth -= 1;
                        if depth == 0 {
                            end_at = at;
                            break;
                        }
                    }
                    _ => {}
                }
                cursor = at + close + 2;
            }
            out.insert(name.to_string(), body[..end_at].to_string());
            rest = &body[end_at.min(body.len())..];
        }
    }
    out
}
