//! Which values key a locked field comes from: the chart template that rendered the object
//! (the manifest's `# Source:`), the template line that writes the field, and the
//! `.Values.x.y` it reads. A denial can then say "values: web.replicas" and give the
//! `helm upgrade --set` that makes the change the right way.
//!
//! Templates are read as YAML with Go template actions in it, line by line, not executed:
//! - a line `key: {{ .Values.x }}` (with `default`, `quote`, pipelines) traces to `x`;
//! - `{{ with .Values.a }}` ... `{{ .b }}` traces to `a.b`; `{{ range .Values.l }}` to `l`;
//! - a key followed by `{{ toYaml .Values.r | nindent N }}` traces the fields under it to
//!   `r.<rest of the path>`;
//! - `{{ include "name" . }}` is followed into `{{ define "name" }}` (as a value, or spliced
//!   under a key), a few levels deep;
//! - `{{ $k }}: {{ $v }}` inside `{{ range $k, $v := .Values.m }}` traces to `m.<key>`.
//!
//! What cannot be followed (a field computed in a helper from several values, `tpl`, a
//! template that builds YAML as text) still names the template and, when found, its line.

use std::collections::BTreeMap;

/// Where a field of a rendered object was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// The template file, as the manifest's `# Source:` names it.
    pub template: String,
    /// 1-based line of the template that writes the field (or the key it is spliced under).
    pub line: Option<usize>,
    /// Values keys the field is read from, in `--set` syntax (`web.replicas`,
    /// `tolerations[0].key`); empty when none could be followed.
    pub keys: Vec<String>,
}

impl std::fmt::Display for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.keys.as_slice(), self.line) {
            ([], Some(line)) => write!(f, "set in {} line {line}", self.template),
            ([], None) => write!(f, "set in {}", self.template),
            (keys, _) => write!(f, "values: {}", keys.join(", ")),
        }
    }
}

/// The chart's templates by name as Helm stores them (`templates/deployment.yaml`,
/// `templates/_helpers.tpl`).
pub type Templates = BTreeMap<String, String>;

/// Traces `path` (a JSON pointer into the object, `/spec/replicas`; list items by index or as
/// `[name=web]`) in the template `source` (the manifest's `# Source:`, which starts with the
/// chart's name).
/// `kind` picks the document of a template file that renders several.
pub fn trace(templates: &Templates, source: &str, kind: &str, path: &str) -> Trace {
    let template = source.to_string();
    let name = source
        .split_once('/')
        .map(|(_, rest)| rest)
        .unwrap_or(source);
    let Some(text) = templates.get(name) else {
        return Trace {
            template,
            line: None,
            keys: Vec::new(),
        };
    };
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let defines = defines(templates);
    let found = documents(text, kind).into_iter().find_map(|(offset, doc)| {
        find(doc, &segments, &defines, &[], 0).map(|(line, keys)| (line + offset, keys))
    });
    Trace {
        template,
        line: found.as_ref().map(|(line, _)| *line),
        keys: found.map(|(_, keys)| keys).unwrap_or_default(),
    }
}

/// The documents of a template file (split at `---`) that write `kind: <kind>`, with the number
/// of lines before each; the whole file when none says so (a kind set by an action).
fn documents<'a>(text: &'a str, kind: &str) -> Vec<(usize, &'a str)> {
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

/// The manifest's `# Source:` of the object of kind `kind` named `name`.
pub fn source_of(manifest: &str, kind: &str, name: &str) -> Option<String> {
    crate::manifest::split_documents(manifest).find_map(|doc| {
        let parsed = crate::manifest::parse_manifest(doc);
        parsed
            .objects
            .iter()
            .any(|o| o.kind == kind && o.name == name)
            .then(|| {
                doc.lines()
                    .find_map(|l| l.trim().strip_prefix("# Source:"))
                    .map(|s| s.trim().to_string())
            })
            .flatten()
    })
}

/// Where the chart sets each denied field and how to change it the right way, appended to a
/// denial: `In the chart: /spec/replicas comes from values web.replicas. To change it the right
/// way: helm upgrade shop <chart> -n shop --reuse-values --set web.replicas=7`. `None` when
/// nothing could be traced. `hide_values` (a Secret) leaves the values out of the command.
pub fn advice(
    files: &crate::release::ChartFiles,
    release: &crate::release::ReleaseKey,
    kind: &str,
    name: &str,
    changes: &[crate::ownership::Change],
    hide_values: bool,
) -> Option<String> {
    let source = source_of(&files.manifest, kind, name)?;
    let mut wheres = Vec::new();
    let mut sets = Vec::new();
    for change in changes.iter().take(5) {
        let trace = trace(&files.templates, &source, kind, &change.path);
        match trace.keys.as_slice() {
            [] => wheres.push(format!("{} is {}", change.path, trace)),
            keys => {
                wheres.push(format!(
                    "{} comes from values {}",
                    change.path,
                    keys.join(", ")
                ));
                if let ([key], Some(value), false) = (keys, &change.requested, hide_values) {
                    if let Some(value) = set_value(value) {
                        sets.push(format!("--set {key}={value}"));
                    }
                }
            }
        }
    }
    if wheres.is_empty() {
        return None;
    }
    let mut out = format!("In the chart: {}.", wheres.join("; "));
    if !sets.is_empty() {
        let chart = if files.chart.is_empty() {
            "<chart>".to_string()
        } else {
            format!("<{} chart>", files.chart)
        };
        out.push_str(&format!(
            " To change it the right way: helm upgrade {} {chart} -n {} --reuse-values {}",
            release.name,
            release.namespace,
            sets.join(" ")
        ));
    }
    Some(out)
}

/// A scalar as `--set` takes it; lists and maps are not given on the command line.
fn set_value(value: &serde_json::Value) -> Option<String> {
    let text = match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::Bool(b) => b.to_string(),
        _ => return None,
    };
    // --set splits on commas; a shell splits on spaces.
    let text = text.replace(',', "\\,");
    Some(
        if text.contains(|c: char| c.is_whitespace() || "'\"$`".contains(c)) {
            format!("'{}'", text.replace('\'', "'\\''"))
        } else {
            text
        },
    )
}

/// Every values key the fields of the object of kind `kind` in template `source` are read from
/// (what `helm-locker inspect` lists per object), in the order the template reads them.
pub fn values_read(templates: &Templates, source: &str, kind: &str) -> Vec<String> {
    let name = source
        .split_once('/')
        .map(|(_, rest)| rest)
        .unwrap_or(source);
    let Some(text) = templates.get(name) else {
        return Vec::new();
    };
    let defines = defines(templates);
    let mut keys = Vec::new();
    for (_, doc) in documents(text, kind) {
        for line in yaml_lines(doc, &[]) {
            for key in refs(line.value, &line.scopes, &defines, 0, &[]) {
                push_unique(&mut keys, key);
            }
        }
    }
    keys
}

/// A values key in scope: `with .Values.a` makes `.b` mean `a.b`.
#[derive(Clone, Debug)]
enum Scope {
    /// `with`: the dot is this key (`None`: not a values key).
    With(Option<String>),
    /// `range`: the dot is an item of this key; `$k`/`$v` name its keys and values.
    Range {
        key: Option<String>,
        key_var: Option<String>,
        value_var: Option<String>,
    },
    /// `if`, `define`, `block`, anything else closed by `end`.
    Other,
}

/// One line of a template as YAML: its key path (list items as `*`) and what it writes.
struct Line<'a> {
    number: usize,
    indent: usize,
    /// Keys from the document's root; a key written by an action is `{{`.
    path: Vec<String>,
    /// The text after `key:` (or after `- `), actions included.
    value: &'a str,
    scopes: Vec<Scope>,
}

const MAX_INCLUDE_DEPTH: usize = 4;

/// (line, keys) of the line writing `segments` in `text`.
fn find(
    text: &str,
    segments: &[&str],
    defines: &BTreeMap<String, String>,
    outer: &[Scope],
    depth: usize,
) -> Option<(usize, Vec<String>)> {
    let lines = yaml_lines(text, outer);
    let want: Vec<String> = segments.iter().map(|s| segment_pattern(s)).collect();
    // The line that writes the field itself.
    for line in &lines {
        if matches_path(&line.path, &want) {
            let keys = refs(line.value, &line.scopes, defines, depth, segments);
            if !keys.is_empty() || !line.value.trim().is_empty() {
                return Some((line.number, keys));
            }
        }
    }
    // A key above the field whose content is spliced in (`toYaml`, `include`), deepest first.
    for len in (0..want.len()).rev() {
        for (i, line) in lines.iter().enumerate() {
            if !matches_path(&line.path, &want[..len]) {
                continue;
            }
            let rest = &segments[len..];
            // A flow collection written on the key's line: `limits: {cpu: "0.5"}`.
            let value = line.value.trim_start();
            if (value.starts_with('{') && !value.starts_with("{{")) || value.starts_with('[') {
                let keys = refs(line.value, &line.scopes, defines, depth, segments);
                return Some((line.number, keys));
            }
            // Inline: `key: {{ toYaml .Values.x | nindent 8 }}`; or on the lines below it.
            let mut splices = vec![(line.value, &line.scopes)];
            splices.extend(
                lines[i + 1..]
                    .iter()
                    .take_while(|l| l.indent > line.indent)
                    .filter(|l| l.path.last().map(String::as_str) == Some(SPLICE))
                    .map(|l| (l.value, &l.scopes)),
            );
            for (value, scopes) in splices {
                if let Some(keys) = spliced(value, scopes, rest, defines, depth) {
                    return Some((line.number, keys));
                }
            }
        }
    }
    None
}

/// The key a line gets when it is only an action that writes YAML (`{{ toYaml . | nindent 4 }}`).
const SPLICE: &str = "{{splice}}";

fn segment_pattern(segment: &str) -> String {
    let segment = segment.replace("~1", "/").replace("~0", "~");
    if segment.parse::<usize>().is_ok() || segment.starts_with('[') {
        "*".into()
    } else {
        segment
    }
}

fn matches_path(line: &[String], want: &[String]) -> bool {
    line.len() == want.len()
        && line
            .iter()
            .zip(want)
            .all(|(have, want)| have == want || have == "{{" || (have == "*" && want == "*"))
}

/// Values keys a value text reads.
fn refs(
    value: &str,
    scopes: &[Scope],
    defines: &BTreeMap<String, String>,
    depth: usize,
    segments: &[&str],
) -> Vec<String> {
    let mut keys = Vec::new();
    for action in actions(value) {
        for key in action_refs(action, scopes) {
            push_unique(&mut keys, key);
        }
        // A key written by `{{ $k }}` in `range $k, $v := .Values.m`: the key is the field's.
        if let Some(field) = segments.last() {
            for scope in scopes.iter().rev() {
                if let Scope::Range {
                    key: Some(map),
                    key_var: Some(k),
                    value_var,
                } = scope
                {
                    let uses = |var: &str| action.split_whitespace().any(|w| w == var);
                    if uses(k) || value_var.as_deref().is_some_and(uses) {
                        keys.retain(|key| key != map);
                        push_unique(&mut keys, join_key(map, &[field]));
                    }
                    break;
                }
            }
        }
        if depth < MAX_INCLUDE_DEPTH {
            if let Some(body) = included(action).and_then(|name| defines.get(name)) {
                for key in refs(body, &[], defines, depth + 1, segments) {
                    push_unique(&mut keys, key);
                }
            }
        }
    }
    keys
}

/// The keys for `rest` under a value that splices YAML in: `toYaml X` gives `X.rest`, an
/// `include` is searched for `rest`.
fn spliced(
    value: &str,
    scopes: &[Scope],
    rest: &[&str],
    defines: &BTreeMap<String, String>,
    depth: usize,
) -> Option<Vec<String>> {
    for action in actions(value) {
        let words: Vec<&str> = action.split_whitespace().collect();
        if let Some(at) = words.iter().position(|w| *w == "toYaml" || *w == "toJson") {
            let base = words.get(at + 1).and_then(|arg| resolve(arg, scopes))?;
            return Some(vec![join_key(&base, rest)]);
        }
        if depth < MAX_INCLUDE_DEPTH {
            if let Some(body) = included(action).and_then(|name| defines.get(name)) {
                if let Some((_, keys)) = find(body, rest, defines, scopes, depth + 1) {
                    return Some(keys);
                }
            }
        }
    }
    None
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

fn push_unique(keys: &mut Vec<String>, key: String) {
    if !keys.contains(&key) {
        keys.push(key);
    }
}

/// The template name of `include "name" ...` or `template "name" ...`.
fn included(action: &str) -> Option<&str> {
    let at = action
        .find("include \"")
        .map(|i| i + 9)
        .or_else(|| action.find("template \"").map(|i| i + 10))?;
    let rest = &action[at..];
    Some(&rest[..rest.find('"')?])
}

/// Values keys an action reads: `.Values.a.b`, `$.Values.a`, and `.b` relative to a `with`.
fn action_refs(action: &str, scopes: &[Scope]) -> Vec<String> {
    let mut keys = Vec::new();
    for word in action.split(|c: char| c.is_whitespace() || "()|,".contains(c)) {
        if let Some(key) = resolve(word, scopes) {
            push_unique(&mut keys, key);
        }
    }
    keys
}

/// The values key a template argument denotes, if any.
fn resolve(word: &str, scopes: &[Scope]) -> Option<String> {
    // A variable of a `range` (`$k`, `$v`): an item of the ranged key.
    if word.starts_with('$') && !word.starts_with("$.") && word.len() > 1 {
        return scopes.iter().rev().find_map(|s| match s {
            Scope::Range {
                key,
                key_var,
                value_var,
            } if key_var.as_deref() == Some(word) || value_var.as_deref() == Some(word) => {
                key.clone()
            }
            _ => None,
        });
    }
    let word = word.trim_start_matches('$');
    if let Some(key) = word.strip_prefix(".Values.") {
        return valid_key(key);
    }
    if word == ".Values" {
        return None;
    }
    // Relative to the innermost `with` or `range`.
    let dot = scopes.iter().rev().find_map(|s| match s {
        Scope::With(key) => Some(key.clone()),
        Scope::Range { key, .. } => Some(key.clone()),
        Scope::Other => None,
    })??;
    if word == "." {
        return Some(dot);
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
    valid_key(rest).map(|rest| format!("{dot}.{rest}"))
}

fn valid_key(key: &str) -> Option<String> {
    (!key.is_empty()
        && key
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_alphanumeric() || c == '_')))
    .then(|| key.to_string())
}

/// The actions (`{{ ... }}` contents, trim markers and comments dropped) of a text.
fn actions(text: &str) -> Vec<&str> {
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
fn apply_blocks(text: &str, scopes: &mut Vec<Scope>) {
    for action in actions(text) {
        let mut words = action.split_whitespace();
        match words.next() {
            Some("with") => {
                let arg = words.next().unwrap_or_default();
                let key = resolve(arg, scopes);
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

/// The YAML lines of a template with their key paths and scopes.
fn yaml_lines<'a>(text: &'a str, outer: &[Scope]) -> Vec<Line<'a>> {
    let mut out = Vec::new();
    let mut scopes: Vec<Scope> = outer.to_vec();
    // (indent, key) of the open mappings and lists.
    let mut open: Vec<(usize, String)> = Vec::new();
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
                // Its YAML lands at `nindent N`: under the last key shallower than N.
                let at = nindent(trimmed).unwrap_or(raw.len() - trimmed.len());
                let mut path: Vec<String> = open
                    .iter()
                    .filter(|(indent, _)| *indent < at)
                    .map(|(_, k)| k.clone())
                    .collect();
                path.push(SPLICE.into());
                out.push(Line {
                    number: i + 1,
                    indent: at,
                    path,
                    value: trimmed,
                    scopes: scopes.clone(),
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
            open.retain(|(i, k)| *i < indent || (*i == indent && k != "*" && !item));
            open.push((indent, "*".into()));
            item = true;
            indent += 2 + (rest.len() - rest.trim_start().len());
            body = rest.trim_start();
        }
        if !item {
            open.retain(|(i, _)| *i < indent);
        }
        let (key, value) = match split_key(body) {
            Some((key, value)) => (Some(key), value),
            None => (None, body),
        };
        let mut path: Vec<String> = open.iter().map(|(_, k)| k.clone()).collect();
        if let Some(key) = &key {
            path.push(key.clone());
        }
        out.push(Line {
            number: i + 1,
            indent,
            path,
            value,
            scopes: scopes.clone(),
        });
        if let Some(key) = key {
            open.push((indent, key));
        }
        apply_blocks(value, &mut scopes);
    }
    out
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

/// Every `define` of the chart's templates (helpers), by name.
fn defines(templates: &Templates) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for text in templates.values() {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(files: &[(&str, &str)]) -> Templates {
        files
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect()
    }

    const HELPERS: &str = r#"{{- define "shop.fullname" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 }}
{{- end }}
{{- define "shop.labels" -}}
app: {{ include "shop.fullname" . }}
tier: {{ .Values.tier | quote }}
{{- end }}
"#;

    const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "shop.fullname" . }}
  labels:
    {{- include "shop.labels" . | nindent 4 }}
  annotations:
    {{- range $key, $value := .Values.podAnnotations }}
    {{ $key }}: {{ $value | quote }}
    {{- end }}
spec:
  {{- if not .Values.autoscaling.enabled }}
  replicas: {{ .Values.replicaCount | default 1 }}
  {{- end }}
  template:
    spec:
      containers:
        - name: web
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
          {{- with .Values.web }}
          args: ["--port={{ .port }}"]
          {{- end }}
          resources:
            {{- toYaml .Values.resources | nindent 12 }}
      {{- with .Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      terminationGracePeriodSeconds: 30
      securityContext: {runAsNonRoot: true, runAsUser: 1000}
"#;

    fn shop() -> Templates {
        chart(&[
            ("templates/_helpers.tpl", HELPERS),
            ("templates/deployment.yaml", DEPLOYMENT),
        ])
    }

    fn keys(path: &str) -> Vec<String> {
        trace(
            &shop(),
            "shop/templates/deployment.yaml",
            "Deployment",
            path,
        )
        .keys
    }

    #[test]
    fn a_value_on_the_line_with_default_and_pipelines() {
        let t = trace(
            &shop(),
            "shop/templates/deployment.yaml",
            "Deployment",
            "/spec/replicas",
        );
        assert_eq!(t.keys, ["replicaCount"]);
        assert_eq!(t.line, Some(13));
        assert_eq!(t.to_string(), "values: replicaCount");
        assert_eq!(
            keys("/spec/template/spec/containers/0/image"),
            ["image.repository", "image.tag"]
        );
    }

    #[test]
    fn with_makes_relative_keys_absolute() {
        assert_eq!(keys("/spec/template/spec/containers/0/args"), ["web.port"]);
    }

    #[test]
    fn to_yaml_under_a_key_traces_the_rest_of_the_path() {
        assert_eq!(
            keys("/spec/template/spec/containers/0/resources/limits/cpu"),
            ["resources.limits.cpu"]
        );
        assert_eq!(
            keys("/spec/template/spec/tolerations/1/effect"),
            ["tolerations[1].effect"]
        );
    }

    #[test]
    fn include_is_followed_into_its_define() {
        assert_eq!(keys("/metadata/name"), ["nameOverride"]);
        assert_eq!(keys("/metadata/labels/tier"), ["tier"]);
        assert_eq!(keys("/metadata/labels/app"), ["nameOverride"]);
    }

    #[test]
    fn range_over_a_map_traces_each_key() {
        assert_eq!(
            keys("/metadata/annotations/prometheus.io~1scrape"),
            ["podAnnotations.prometheus\\.io/scrape"]
        );
    }

    #[test]
    fn what_cannot_be_followed_names_the_template_and_line() {
        let t = trace(
            &shop(),
            "shop/templates/deployment.yaml",
            "Deployment",
            "/spec/template/spec/terminationGracePeriodSeconds",
        );
        assert!(t.keys.is_empty());
        assert_eq!(t.line, Some(29));
        assert_eq!(
            t.to_string(),
            "set in shop/templates/deployment.yaml line 29"
        );
        let missing = trace(
            &shop(),
            "shop/templates/other.yaml",
            "Deployment",
            "/spec/replicas",
        );
        assert_eq!(missing.to_string(), "set in shop/templates/other.yaml");
    }

    /// The chart's templates as Helm stores them, read from a chart folder.
    fn chart_folder(chart: &str) -> Templates {
        fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut Templates) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, root, out);
                } else {
                    let name = path
                        .strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned();
                    out.insert(name, std::fs::read_to_string(&path).unwrap());
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/e2e/charts")
            .join(chart);
        let mut out = Templates::new();
        walk(&root.join("templates"), &root, &mut out);
        out
    }

    /// The end-to-end tests' charts written the way published charts are: helpers, `toYaml`
    /// blocks, `with`, `range`, nested values (tests/e2e/charts/README.md).
    #[test]
    fn e2e_charts_trace_their_common_knobs() {
        let cases = [
            (
                "webapp",
                "deployment.yaml",
                "/spec/replicas",
                "replicaCount",
            ),
            (
                "webapp",
                "deployment.yaml",
                "/spec/template/spec/containers/0/resources/limits/cpu",
                "resources.limits.cpu",
            ),
            (
                "webapp",
                "deployment.yaml",
                "/spec/template/spec/tolerations/0/key",
                "tolerations[0].key",
            ),
            (
                "webapp",
                "deployment.yaml",
                "/spec/template/spec/nodeSelector/disktype",
                "nodeSelector.disktype",
            ),
            (
                "webapp",
                "deployment.yaml",
                "/spec/template/spec/containers/0/imagePullPolicy",
                "image.pullPolicy",
            ),
            (
                "webapp",
                "deployment.yaml",
                "/spec/template/metadata/annotations/team",
                "podAnnotations.team",
            ),
            (
                "webapp",
                "deployment.yaml",
                "/spec/template/metadata/annotations/prometheus.io~1port",
                "service.httpPort",
            ),
            (
                "metrics-agent",
                "deployment.yaml",
                "/spec/replicas",
                "replicas",
            ),
            (
                "metrics-agent",
                "deployment.yaml",
                "/spec/template/spec/containers/0/image",
                "image.repository",
            ),
            (
                "metrics-agent",
                "deployment.yaml",
                "/spec/template/spec/containers/0/resources/requests/cpu",
                "resources.requests.cpu",
            ),
            (
                "edge-proxy",
                "controller-deployment.yaml",
                "/spec/replicas",
                "controller.replicaCount",
            ),
            (
                "edge-proxy",
                "controller-deployment.yaml",
                "/spec/template/spec/dnsPolicy",
                "controller.dnsPolicy",
            ),
            (
                "edge-proxy",
                "controller-deployment.yaml",
                "/spec/template/spec/terminationGracePeriodSeconds",
                "controller.terminationGracePeriodSeconds",
            ),
            (
                "edge-proxy",
                "controller-deployment.yaml",
                "/spec/template/spec/containers/0/resources/requests/memory",
                "controller.resources.requests.memory",
            ),
            (
                "edge-proxy",
                "controller-deployment.yaml",
                "/spec/template/spec/nodeSelector/kubernetes.io~1os",
                "controller.nodeSelector.kubernetes\\.io/os",
            ),
        ];
        let mut wrong = Vec::new();
        for (chart, file, path, key) in cases {
            let templates = chart_folder(chart);
            let t = trace(
                &templates,
                &format!("{chart}/templates/{file}"),
                "Deployment",
                path,
            );
            if !t.keys.iter().any(|k| k == key) {
                wrong.push(format!("{chart} {path}: {t:?}, expected {key}"));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn advice_names_the_keys_and_gives_the_upgrade() {
        let manifest = "---\n# Source: shop/templates/deployment.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n";
        let files = crate::release::ChartFiles {
            chart: "shop".into(),
            manifest: manifest.into(),
            templates: shop(),
        };
        let release = crate::release::ReleaseKey {
            namespace: "prod".into(),
            name: "shop".into(),
        };
        let change = |path: &str, requested: serde_json::Value| crate::ownership::Change {
            path: path.into(),
            chart: serde_json::Value::Null,
            requested: Some(requested),
        };
        let changes = [
            change("/spec/replicas", serde_json::json!(7)),
            change(
                "/spec/template/spec/containers/0/resources/limits/cpu",
                serde_json::json!("2, or 3"),
            ),
            change(
                "/spec/template/spec/terminationGracePeriodSeconds",
                serde_json::json!(5),
            ),
        ];
        let advice = advice(&files, &release, "Deployment", "web", &changes, false).unwrap();
        assert_eq!(
            advice,
            "In the chart: /spec/replicas comes from values replicaCount; /spec/template/spec/containers/0/resources/limits/cpu comes from values resources.limits.cpu; /spec/template/spec/terminationGracePeriodSeconds is set in shop/templates/deployment.yaml line 29. To change it the right way: helm upgrade shop <shop chart> -n prod --reuse-values --set replicaCount=7 --set resources.limits.cpu='2\\, or 3'"
        );
        // A Secret's values stay out of the message.
        let hidden =
            super::advice(&files, &release, "Deployment", "web", &changes[..1], true).unwrap();
        assert_eq!(
            hidden,
            "In the chart: /spec/replicas comes from values replicaCount."
        );
        // An object the manifest does not render: nothing to say.
        assert_eq!(
            super::advice(&files, &release, "Deployment", "other", &changes, false),
            None
        );
    }

    /// A release recorded from a real cluster: its chart renders several objects from one file.
    #[test]
    fn a_recorded_release_traces_through_a_file_of_several_documents() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/cluster-capture/releases/02-after-upgrade.json"
        ))
        .unwrap();
        let secrets: serde_json::Value = serde_json::from_str(&text).unwrap();
        let secret = secrets["items"]
            .as_array()
            .and_then(|items| items.last())
            .unwrap_or(&secrets);
        let files = crate::release::decode_chart_files(secret["data"]["release"].as_str().unwrap())
            .unwrap();
        assert_eq!(files.chart, "shop");
        let source = source_of(&files.manifest, "ConfigMap", "shop-config").unwrap();
        assert_eq!(source, "shop/templates/app.yaml");
        let t = trace(&files.templates, &source, "ConfigMap", "/data/greeting");
        assert_eq!(t.keys, ["greeting"], "{t:?}");
        let mode = trace(&files.templates, &source, "ConfigMap", "/data/mode");
        assert_eq!((mode.keys.len(), mode.line), (0, Some(11)));
        let name = trace(&files.templates, &source, "Deployment", "/metadata/name");
        assert!(
            name.keys.is_empty() && name.line.is_some_and(|l| l > 15),
            "{name:?}"
        );
    }

    #[test]
    fn every_key_an_object_reads() {
        assert_eq!(
            values_read(&shop(), "shop/templates/deployment.yaml", "Deployment"),
            [
                "nameOverride",
                "tier",
                "podAnnotations",
                "replicaCount",
                "image.repository",
                "image.tag",
                "web.port",
                "resources",
                "tolerations"
            ]
        );
        assert!(values_read(&shop(), "shop/templates/none.yaml", "Deployment").is_empty());
    }
}
