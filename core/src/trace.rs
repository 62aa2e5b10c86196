//! Which values key a locked field comes from: the chart template that rendered the object
//! (the manifest's `# Source:`), the template line that writes the field, and the
//! `.Values.x.y` it reads. A denial can then say "values: web.replicas" and give the
//! `helm upgrade --set` that makes the change the right way.
//!
//! Templates are read as YAML with Go template actions in it, line by line, not executed:
//! - a line `key: {{ .Values.x }}` (with `default`, `quote`, pipelines) traces to `x`;
//! - `{{ with .Values.a }}` ... `{{ .b }}` traces to `a.b`;
//! - a key followed by `{{ toYaml .Values.r | nindent N }}` traces the fields under it to
//!   `r.<rest of the path>`;
//! - `{{ include "name" . }}` is followed into `{{ define "name" }}` (as a value, or spliced
//!   under a key), a few levels deep;
//! - `{{ $k }}: {{ $v }}` inside `{{ range $k, $v := .Values.m }}` traces to `m.<key>`.
//!
//! A key is named only when the trace is certain (a wrong key is worse than none):
//! - a list item is tied to a template line by its position only when every item before it
//!   in the template, and itself, always renders (no `if`, `with`, `range`, `toYaml` or
//!   `include` in the list before it); otherwise by its literal `name:` when the rendered
//!   object is known, or not at all;
//! - an item whose position is not certain still names the key when every item its list can
//!   hold writes the field from the same keys, none read through a `range` item (`host:
//!   {{ $.Values.host }}` in each rule a `range` writes): which item it is does not matter;
//! - items a `toYaml` block writes into a list are counted from the block's certain start;
//! - a value read through a `range` item (`{{ .value }}` in `range .Values.env`) names no key;
//! - when the release's values are known (the chart's defaults and the release's config, see
//!   [`CHART_VALUES`]), a key that is not in them, or whose value there is not the field's
//!   rendered value where the template writes it as is, is not named.
//!
//! What cannot be followed (a field computed in a helper from several values, `tpl`, a
//! template that builds YAML as text, an item whose position is uncertain) names the template
//! and, when certain, its line.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::chart::{ChartFiles, Templates, CHART_VALUES, RELEASE_CONFIG};

/// Where a field of a rendered object was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// The template file, as the manifest's `# Source:` names it.
    pub template: String,
    /// 1-based line of the template that writes the field (or the key it is spliced under).
    pub line: Option<usize>,
    /// Values keys the field is read from, in `--set` syntax (`web.replicas`,
    /// `tolerations[0].key`); empty when none could be followed for certain.
    pub keys: Vec<String>,
    /// `--set key=<new value>` writes the new value: one key, and the field is its value as
    /// written, or through `default` while the key is set. Not through `printf`, `include`,
    /// `sha256sum`...
    pub exact: bool,
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

/// Traces `path` (a JSON pointer into the object, `/spec/replicas`; list items by index or as
/// `[name=web]`) in the template `source` (the manifest's `# Source:`, which starts with the
/// chart's name).
/// `kind` picks the document of a template file that renders several.
pub fn trace(templates: &Templates, source: &str, kind: &str, path: &str) -> Trace {
    trace_in(templates, source, kind, path, None, true)
}

/// [`trace`] of a changed field, knowing the object as the chart rendered it (`rendered`)
/// and the chart's value of the field (`chart`): list items are also matched by their
/// `name`, and the keys are checked against the field's value. The path's list indexes are
/// the request's: when the rendered object's value there is not `chart`, the request moved
/// items and no index is trusted.
pub fn trace_change(
    templates: &Templates,
    source: &str,
    kind: &str,
    path: &str,
    rendered: Option<&Value>,
    chart: &Value,
) -> Trace {
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let (_, at_path) = wants(&segments, rendered, true);
    let moved = match at_path {
        Some(value) => value != chart,
        None => !chart.is_null(),
    };
    if !moved {
        trace_in(templates, source, kind, path, rendered, true)
    } else {
        trace_in(templates, source, kind, path, None, false)
    }
}

fn template_name(source: &str) -> &str {
    source
        .split_once('/')
        .map(|(_, rest)| rest)
        .unwrap_or(source)
}

/// What the search carries: the helpers, the release's values if known.
struct Ctx {
    defines: BTreeMap<String, String>,
    values: Option<Value>,
}

/// What a search found: the line, the keys, and whether the field's value is the key's
/// value as is (a single key, written with no more than `quote`, `toYaml`...).
struct Found {
    line: Option<usize>,
    keys: Vec<String>,
    exact: bool,
}

fn trace_in(
    templates: &Templates,
    source: &str,
    kind: &str,
    path: &str,
    rendered: Option<&Value>,
    trust_index: bool,
) -> Trace {
    let template = source.to_string();
    let Some(text) = templates.get(template_name(source)) else {
        return Trace {
            template,
            line: None,
            keys: Vec::new(),
            exact: false,
        };
    };
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let (want, value) = wants(&segments, rendered, trust_index);
    let ctx = Ctx {
        defines: defines(templates),
        values: merged_values(templates),
    };
    let found = documents(text, kind).into_iter().find_map(|(offset, doc)| {
        find(doc, &want, &segments, &ctx, &[], 0).map(|mut f| {
            f.line = f.line.map(|l| l + offset);
            f
        })
    });
    let Some(found) = found else {
        return Trace {
            template,
            line: None,
            keys: Vec::new(),
            exact: false,
        };
    };
    let keys = checked(found.keys, found.exact, ctx.values.as_ref(), value);
    let exact = match (keys.as_slice(), ctx.values.as_ref(), value) {
        ([key], Some(values), Some(rendered)) => {
            found.exact || lookup(values, key).is_some_and(|v| same_scalar(rendered, v))
        }
        // Values unknown (a chart without values.yaml): as traced.
        ([_], None, _) => true,
        ([_], _, None) => found.exact,
        _ => false,
    };
    Trace {
        template,
        line: found.line,
        keys,
        exact,
    }
}

/// One segment of the traced path.
#[derive(Clone, Debug)]
enum Want {
    Key(String),
    /// A list item: its position (when trusted), or the fields that identify it.
    Item {
        index: Option<usize>,
        fields: Vec<(String, String)>,
    },
}

/// The path as [`Want`]s, and the rendered value at it (when `rendered` is given).
fn wants<'v>(
    segments: &[&str],
    rendered: Option<&'v Value>,
    trust_index: bool,
) -> (Vec<Want>, Option<&'v Value>) {
    let mut node = rendered;
    let mut out = Vec::new();
    for segment in segments {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        let is_map = node.is_some_and(Value::is_object);
        if let (Ok(n), false) = (segment.parse::<usize>(), is_map) {
            let item = node.and_then(|v| v.get(n));
            let fields = item
                .and_then(|i| i.get("name"))
                .and_then(Value::as_str)
                .map(|name| vec![("name".to_string(), name.to_string())])
                .unwrap_or_default();
            out.push(Want::Item {
                index: trust_index.then_some(n),
                fields,
            });
            node = item;
        } else if let Some(inner) = segment.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            let fields: Vec<(String, String)> = inner
                .split(',')
                .filter_map(|pair| pair.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            node = node.and_then(Value::as_array).and_then(|items| {
                items.iter().find(|item| {
                    !fields.is_empty()
                        && fields
                            .iter()
                            .all(|(k, v)| item.get(k).and_then(scalar_text).as_deref() == Some(v))
                })
            });
            out.push(Want::Item {
                index: None,
                fields,
            });
        } else {
            node = node.and_then(|v| v.get(&segment));
            out.push(Want::Key(segment));
        }
    }
    (out, node)
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
pub(crate) fn source_of(manifest: &str, kind: &str, name: &str) -> Option<String> {
    rendered_object(manifest, kind, name).map(|(source, _)| source)
}

/// The manifest's `# Source:` of the object of kind `kind` named `name`, and the object as
/// the chart rendered it.
/// The `# Source:` template and the object as the chart rendered it, of the manifest's
/// `kind`/`name`: what [`trace_change`] needs beside the path.
pub fn rendered_object(manifest: &str, kind: &str, name: &str) -> Option<(String, Value)> {
    crate::manifest::split_documents(manifest).find_map(|doc| {
        let parsed = crate::manifest::parse_manifest(doc);
        let object = parsed
            .objects
            .iter()
            .find(|o| o.kind == kind && o.name == name)?;
        let source = doc
            .lines()
            .find_map(|l| l.trim().strip_prefix("# Source:"))
            .map(|s| s.trim().to_string())?;
        Some((source, object.content.unpack().to_json()))
    })
}

/// Where the chart sets each denied field and how to change it the right way, appended to a
/// denial: `In the chart: /spec/replicas comes from values web.replicas. To change it the right
/// way: helm upgrade shop <chart> -n shop --reuse-values --set web.replicas=7`. `None` when
/// nothing could be traced. `hide_values` (a Secret) leaves the values out of the command.
pub(crate) fn advice(
    files: &ChartFiles,
    release: &crate::release::ReleaseKey,
    kind: &str,
    name: &str,
    changes: &[crate::ownership::Change],
    hide_values: bool,
) -> Option<String> {
    let (source, object) = rendered_object(&files.manifest, kind, name)?;
    let mut wheres = Vec::new();
    let mut sets = Vec::new();
    for change in changes.iter().take(5) {
        // An atomic list or map is one change: the leaf that differs inside it, when there is
        // one, is what the template writes from a value.
        let leaf = changed_leaf(change);
        let change = leaf.as_ref().unwrap_or(change);
        let trace = trace_change(
            &files.templates,
            &source,
            kind,
            &change.path,
            Some(&object),
            &change.chart,
        );
        match trace.keys.as_slice() {
            [] => wheres.push(format!("{} is {}", change.path, trace)),
            keys => {
                wheres.push(format!(
                    "{} comes from values {}",
                    change.path,
                    keys.join(", ")
                ));
                if let ([key], Some(value), false, true) =
                    (keys, &change.requested, hide_values, trace.exact)
                {
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

/// The one scalar that differs inside a change of a list or map (an atomic list's item field:
/// `/spec/rules` -> `/spec/rules/0/host`), as a change of its own; `None` when the change is of
/// a scalar, when items or keys are added or removed, or when more than one leaf differs.
fn changed_leaf(change: &crate::ownership::Change) -> Option<crate::ownership::Change> {
    fn leaves(
        chart: &Value,
        requested: &Value,
        path: &mut String,
        out: &mut Vec<(String, Value, Value)>,
    ) -> bool {
        let len = path.len();
        let mut descend = |key: &str, a: &Value, b: &Value, out: &mut Vec<_>| {
            path.push('/');
            path.push_str(&key.replace('~', "~0").replace('/', "~1"));
            let ok = leaves(a, b, path, out);
            path.truncate(len);
            ok
        };
        match (chart, requested) {
            (Value::Object(a), Value::Object(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .all(|(k, v)| b.get(k).is_some_and(|w| descend(k, v, w, out)))
            }
            (Value::Array(a), Value::Array(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .enumerate()
                        .all(|(i, (v, w))| descend(&i.to_string(), v, w, out))
            }
            (Value::Object(_) | Value::Array(_), _) | (_, Value::Object(_) | Value::Array(_)) => {
                false
            }
            (a, b) => {
                if a != b {
                    out.push((path.clone(), a.clone(), b.clone()));
                }
                true
            }
        }
    }
    let requested = change.requested.as_ref()?;
    if !(change.chart.is_array() || change.chart.is_object()) {
        return None;
    }
    let mut found = Vec::new();
    if !leaves(&change.chart, requested, &mut String::new(), &mut found) {
        return None;
    }
    match found.as_slice() {
        [(path, chart, requested)] => Some(crate::ownership::Change {
            path: format!("{}{path}", change.path),
            chart: chart.clone(),
            requested: Some(requested.clone()),
        }),
        _ => None,
    }
}

/// A scalar as `--set` takes it; lists and maps are not given on the command line.
fn set_value(value: &Value) -> Option<String> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
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
pub(crate) fn values_read(templates: &Templates, source: &str, kind: &str) -> Vec<String> {
    let Some(text) = templates.get(template_name(source)) else {
        return Vec::new();
    };
    let defines = defines(templates);
    let mut keys = Vec::new();
    for (_, doc) in documents(text, kind) {
        for line in yaml_lines(doc, &[]).lines {
            for (key, _) in refs(line.value, &line.scopes, &defines, 0, None) {
                push_unique(&mut keys, key);
            }
        }
    }
    keys
}

/// The release's values as Helm merges them: the config over the chart's defaults (maps key
/// by key, a `null` in the config deletes the key). `None` when neither is known.
fn merged_values(templates: &Templates) -> Option<Value> {
    let read = |name: &str| {
        templates
            .get(name)
            .and_then(|text| serde_json::from_str::<Value>(text).ok())
    };
    let (defaults, config) = (read(CHART_VALUES), read(RELEASE_CONFIG));
    if defaults.is_none() && config.is_none() {
        return None;
    }
    let mut merged = match defaults {
        Some(Value::Object(map)) => Value::Object(map),
        _ => Value::Object(Default::default()),
    };
    if let Some(config) = config {
        coalesce(&mut merged, config);
    }
    Some(merged)
}

fn coalesce(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (k, v) in over {
                match (base.get_mut(&k), v) {
                    (_, Value::Null) => {
                        base.remove(&k);
                    }
                    (Some(existing @ Value::Object(_)), v @ Value::Object(_)) => {
                        coalesce(existing, v)
                    }
                    (_, v) => {
                        base.insert(k, v);
                    }
                }
            }
        }
        (base, over) => *base = over,
    }
}

/// The value of a key in `--set` syntax (`a.b\.c[1].d`).
fn lookup<'v>(values: &'v Value, key: &str) -> Option<&'v Value> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = key.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => current.extend(chars.next()),
            '.' => parts.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    parts.push(current);
    let mut node = values;
    for part in parts {
        let (name, indexes) = match part.find('[') {
            Some(at) if part.ends_with(']') => (&part[..at], &part[at..]),
            _ => (part.as_str(), ""),
        };
        if !name.is_empty() || indexes.is_empty() {
            node = node.as_object()?.get(name)?;
        }
        for index in indexes.split(['[', ']']).filter(|s| !s.is_empty()) {
            node = node.as_array()?.get(index.parse::<usize>().ok()?)?;
        }
    }
    Some(node)
}

/// A scalar as text (`3`, `true`, `web`); `None` for lists and maps.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null => Some(String::new()),
        _ => None,
    }
}

fn same_scalar(a: &Value, b: &Value) -> bool {
    match (scalar_text(a), scalar_text(b)) {
        (Some(a), Some(b)) => {
            a == b || matches!((a.parse::<f64>(), b.parse::<f64>()), (Ok(x), Ok(y)) if x == y)
        }
        _ => false,
    }
}

/// The keys that the release's values confirm: each exists in them, and where the field's
/// value is the key's value as is (`exact`), it is that value.
fn checked(
    keys: Vec<String>,
    exact: bool,
    values: Option<&Value>,
    rendered: Option<&Value>,
) -> Vec<String> {
    let Some(values) = values else {
        return keys;
    };
    let single = keys.len() == 1;
    keys.into_iter()
        .filter(|key| {
            let Some(value) = lookup(values, key) else {
                return false;
            };
            let Some(rendered) = rendered else {
                return true;
            };
            let (rendered_scalar, value_scalar) = (
                scalar_text(rendered).is_some(),
                scalar_text(value).is_some(),
            );
            if rendered_scalar != value_scalar {
                // A list or map for a scalar field (or the other way round): not its key.
                return false;
            }
            if !rendered_scalar {
                return true;
            }
            if exact && single {
                return same_scalar(rendered, value);
            }
            // Read through a function (`default .Chart.Name .Values.nameOverride`, `printf`,
            // `sha256sum`): the key is certain only when its value shows in the field's, so an
            // empty `nameOverride` under a chart-named label, or a config under its checksum,
            // is not named.
            match (scalar_text(rendered), scalar_text(value)) {
                (Some(rendered), Some(value)) => !value.is_empty() && rendered.contains(&value),
                _ => false,
            }
        })
        .collect()
}

/// A values key in scope: `with .Values.a` makes `.b` mean `a.b`.
#[derive(Clone, Debug)]
enum Scope {
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

/// One line of a template as YAML: its key path (list items as `*`) and what it writes.
struct Line<'a> {
    number: usize,
    indent: usize,
    /// Keys from the document's root; a key written by an action is `{{`.
    path: Vec<String>,
    /// The [`Node`] of each key and item of `path`.
    nodes: Vec<usize>,
    /// The text after `key:` (or after `- `), actions included.
    value: &'a str,
    scopes: Vec<Scope>,
    /// For a line that splices YAML in (`{{ toYaml . | nindent 8 }}`): where it lands.
    splice: Option<Splice>,
}

/// Where a splice lands in the key above it (which may hold a list).
#[derive(Clone, Copy, Debug)]
struct Splice {
    /// The [`Node`] it lands under.
    parent: usize,
    /// Its place among the items and splices under `parent`.
    seq: usize,
    /// How many items surely come before it; `None` when uncertain.
    before: Option<usize>,
    /// Inside a block (`if`, `with`, `range`) opened under `parent`: it may not render.
    conditional: bool,
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
struct Doc<'a> {
    lines: Vec<Line<'a>>,
    nodes: Vec<Node>,
}

impl Doc<'_> {
    fn matches(&self, line: &Line<'_>, want: &[Want]) -> bool {
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
    fn matches_any_item(&self, line: &Line<'_>, want: &[Want]) -> bool {
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
    fn cover_their_lists(&self, lines: &[&Line<'_>], want: &[Want]) -> bool {
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

    fn is_last(&self, splice: &Splice) -> bool {
        splice.seq + 1 == self.nodes[splice.parent].producers
    }
}

const MAX_INCLUDE_DEPTH: usize = 4;

/// The line writing `want` in `text`, and the keys it reads.
fn find(
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
            let mut splices = vec![(
                line.value,
                &line.scopes,
                Splice {
                    parent: usize::MAX,
                    seq: 0,
                    before: Some(0),
                    conditional: false,
                },
                true,
            )];
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
                        Some((l.value, &l.scopes, splice, doc.is_last(&splice)))
                    }),
            );
            for (value, scopes, splice, last) in splices {
                if let Some((keys, exact)) =
                    spliced(value, scopes, rest, rest_segments, splice, last, ctx, depth)
                {
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

/// The key a line gets when it is only an action that writes YAML (`{{ toYaml . | nindent 4 }}`).
const SPLICE: &str = "{{splice}}";

/// Whether a value text is one action that writes its key's value as is:
/// `{{ .Values.x }}`, `"{{ .Values.x | quote }}"`.
fn as_is(value: &str) -> bool {
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

/// Values keys a value text reads, each with whether `--set` addresses it as the field's
/// own (`false`: read through a `range` item). `field`: the traced key, for `{{ $k }}:` in a
/// `range` over a map.
fn refs(
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

/// The keys for `rest` under a value that splices YAML in: `toYaml X` gives `X.rest`, an
/// `include` is searched for `rest`. A list item is counted from where the splice starts.
#[allow(clippy::too_many_arguments)]
fn spliced(
    value: &str,
    scopes: &[Scope],
    rest: &[Want],
    rest_segments: &[&str],
    at: Splice,
    last: bool,
    ctx: &Ctx,
    depth: usize,
) -> Option<(Vec<String>, bool)> {
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

fn push_unique<T: PartialEq>(keys: &mut Vec<T>, key: T) {
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
fn resolve_ref(word: &str, scopes: &[Scope]) -> Option<(String, bool)> {
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
fn yaml_lines<'a>(text: &'a str, outer: &[Scope]) -> Doc<'a> {
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

/// Every `define` of the chart's templates (helpers), by name.
fn defines(templates: &Templates) -> BTreeMap<String, String> {
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
        let files = crate::chart::ChartFiles {
            chart: "shop".into(),
            manifest: manifest.into(),
            templates: shop(),
            ..Default::default()
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
        let files =
            crate::chart::decode_chart_files(secret["data"]["release"].as_str().unwrap()).unwrap();
        assert_eq!(files.chart, "shop");
        // The release's values come along, and the hints below are checked against them.
        assert!(files.templates.contains_key(CHART_VALUES));
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

    /// A chart shaped like the public charts whose hints were wrong: containers under `if`,
    /// env lists that mix `range` items with literal ones, `toYaml` lists after literal
    /// items, an `if` that drops a port before the traced one, `range` over a list.
    const POD: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: graf
spec:
  replicas: {{ .Values.replicas }}
  template:
    spec:
      containers:
        {{- if .Values.sidecar.enabled }}
        - name: sidecar
          image: {{ .Values.sidecar.image }}
          env:
            - name: METHOD
              value: {{ .Values.sidecar.watchMethod }}
          securityContext:
            {{- toYaml .Values.sidecar.securityContext | nindent 12 }}
        {{- end }}
        - name: grafana
          image: {{ .Values.image }}
          env:
            {{- range $key, $value := .Values.env }}
            - name: {{ $key }}
              value: {{ $value | quote }}
            {{- end }}
            - name: GF_PATHS_DATA
              value: {{ .Values.paths.data }}
            - name: GF_LOG_LEVEL
              value: {{ .Values.log.level }}
            {{- range .Values.extraEnv }}
            - name: {{ .name }}
              value: {{ .value | quote }}
            {{- end }}
          ports:
            {{- if .Values.metrics.enabled }}
            - name: metrics
              containerPort: {{ .Values.metrics.port }}
            {{- end }}
            - name: http
              containerPort: {{ .Values.service.port }}
          volumeMounts:
            - name: data
              mountPath: /var/lib/grafana
            {{- with .Values.extraMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          securityContext:
            {{- toYaml .Values.securityContext | nindent 12 }}
        {{- with .Values.extraContainers }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
"#;

    const INGRESS: &str = r#"apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: graf
spec:
  rules:
    - host: {{ .Values.host | quote }}
      http:
        paths:
          - path: /
            pathType: Prefix
"#;

    fn graf(values: Option<serde_json::Value>) -> Templates {
        let mut t = chart(&[
            ("templates/deployment.yaml", POD),
            ("templates/ingress.yaml", INGRESS),
        ]);
        if let Some(values) = values {
            t.insert(CHART_VALUES.into(), values.to_string());
        }
        t
    }

    fn graf_values() -> serde_json::Value {
        serde_json::json!({
            "replicas": 1,
            "image": "grafana:11",
            "host": "grafana.example.com",
            "sidecar": {"enabled": true, "image": "k8s-sidecar", "watchMethod": "WATCH",
                        "securityContext": {"runAsUser": 65534}},
            "env": {"GF_FEATURE": "on"},
            "paths": {"data": "/var/lib/grafana"},
            "log": {"level": "info"},
            "extraEnv": [{"name": "EXTRA", "value": "1"}],
            "metrics": {"enabled": true, "port": 9090},
            "service": {"port": 3000},
            "extraMounts": [{"name": "dash", "mountPath": "/dash"}],
            "securityContext": {"runAsUser": 472},
            "extraContainers": [{"name": "proxy", "image": "envoy", "args": ["--v=2"]}]
        })
    }

    /// The object as the chart renders with [`graf_values`].
    fn graf_rendered() -> serde_json::Value {
        serde_json::json!({"spec": {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "sidecar", "image": "k8s-sidecar",
             "env": [{"name": "METHOD", "value": "WATCH"}],
             "securityContext": {"runAsUser": 65534}},
            {"name": "grafana", "image": "grafana:11",
             "env": [{"name": "GF_FEATURE", "value": "on"},
                     {"name": "GF_PATHS_DATA", "value": "/var/lib/grafana"},
                     {"name": "GF_LOG_LEVEL", "value": "info"},
                     {"name": "EXTRA", "value": "1"}],
             "ports": [{"name": "metrics", "containerPort": 9090},
                       {"name": "http", "containerPort": 3000}],
             "volumeMounts": [{"name": "data", "mountPath": "/var/lib/grafana"},
                              {"name": "dash", "mountPath": "/dash"}],
             "securityContext": {"runAsUser": 472}},
            {"name": "proxy", "image": "envoy", "args": ["--v=2"]}
        ]}}}})
    }

    fn graf_trace(templates: &Templates, path: &str) -> Trace {
        trace(
            templates,
            "graf/templates/deployment.yaml",
            "Deployment",
            path,
        )
    }

    /// With the rendered object: the field's chart value is read from it.
    fn graf_change(templates: &Templates, path: &str) -> Trace {
        let rendered = graf_rendered();
        let (_, chart) = wants(
            &path.split('/').skip(1).collect::<Vec<_>>(),
            Some(&rendered),
            true,
        );
        let chart = chart.cloned().unwrap_or_default();
        trace_change(
            templates,
            "graf/templates/deployment.yaml",
            "Deployment",
            path,
            Some(&rendered),
            &chart,
        )
    }

    /// grafana's GF_LOG_LEVEL was said to come from `sidecar.dashboards.watchMethod`: the
    /// first `value:` of any env list, where containers and env items are conditional.
    #[test]
    fn items_after_a_conditional_or_a_range_are_not_matched_by_position() {
        for templates in [graf(None), graf(Some(graf_values()))] {
            let level = graf_trace(&templates, "/spec/template/spec/containers/1/env/2/value");
            assert!(level.keys.is_empty(), "{level:?}");
            assert!(!level.to_string().contains("watchMethod"), "{level}");
            // An item `range` writes: the key is an item of `env`, not `env`.
            let ranged = graf_trace(&templates, "/spec/template/spec/containers/1/env/0/value");
            assert!(ranged.keys.is_empty(), "{ranged:?}");
            // `range` over a list: never `extraEnv.value`, a key that does not exist.
            let extra = graf_trace(&templates, "/spec/template/spec/containers/1/env/3/value");
            assert!(extra.keys.is_empty(), "{extra:?}");
            // An `if` drops the metrics port before the http one.
            let port = graf_trace(
                &templates,
                "/spec/template/spec/containers/1/ports/1/containerPort",
            );
            assert!(port.keys.is_empty(), "{port:?}");
            // What is certain still is: a field of the document, a literal first item.
            assert_eq!(graf_trace(&templates, "/spec/replicas").keys, ["replicas"]);
        }
    }

    /// Knowing the rendered object, an item with a literal `name:` is found by it wherever
    /// it lands, and its key is checked against the values.
    #[test]
    fn items_with_a_literal_name_are_found_by_it() {
        let templates = graf(Some(graf_values()));
        let level = graf_change(&templates, "/spec/template/spec/containers/1/env/2/value");
        assert_eq!(level.keys, ["log.level"], "{level:?}");
        let port = graf_change(
            &templates,
            "/spec/template/spec/containers/1/ports/1/containerPort",
        );
        assert_eq!(port.keys, ["service.port"], "{port:?}");
        let method = graf_change(&templates, "/spec/template/spec/containers/0/env/0/value");
        assert_eq!(method.keys, ["sidecar.watchMethod"], "{method:?}");
        // Items written by `range` have no literal name: still nothing.
        let ranged = graf_change(&templates, "/spec/template/spec/containers/1/env/0/value");
        assert!(ranged.keys.is_empty(), "{ranged:?}");
        let extra = graf_change(&templates, "/spec/template/spec/containers/1/env/3/value");
        assert!(extra.keys.is_empty(), "{extra:?}");
    }

    /// `volumeMounts[0].args`, `securityContext[0].args`: a `toYaml` deeper under a list
    /// was taken for the list's own items.
    #[test]
    fn to_yaml_lists_count_from_where_they_start() {
        let templates = graf(Some(graf_values()));
        let args = graf_trace(&templates, "/spec/template/spec/containers/2/args/0");
        assert!(
            !args
                .keys
                .iter()
                .any(|k| k.contains("volumeMounts") || k.contains("securityContext")),
            "{args:?}"
        );
        // The containers before `extraContainers` are conditional: its first item's
        // position is not certain.
        assert!(args.keys.is_empty(), "{args:?}");
        // A mount after the literal one comes from `extraMounts[0]`, not `extraMounts[1]`.
        for t in [graf(None), graf(Some(graf_values()))] {
            let mount = graf_change(
                &t,
                "/spec/template/spec/containers/1/volumeMounts/1/mountPath",
            );
            assert_eq!(mount.keys, ["extraMounts[0].mountPath"], "{mount:?}");
            let literal = graf_change(
                &t,
                "/spec/template/spec/containers/1/volumeMounts/0/mountPath",
            );
            assert!(literal.keys.is_empty(), "{literal:?}");
            assert_eq!(literal.line, Some(43));
        }
        // The rendered object names the container: its securityContext is the chart's.
        let security = graf_change(
            &templates,
            "/spec/template/spec/containers/1/securityContext/runAsUser",
        );
        assert_eq!(security.keys, ["securityContext.runAsUser"], "{security:?}");
        let sidecar = graf_change(
            &templates,
            "/spec/template/spec/containers/0/securityContext/runAsUser",
        );
        assert_eq!(
            sidecar.keys,
            ["sidecar.securityContext.runAsUser"],
            "{sidecar:?}"
        );
        // With no list before it, `extraContainers` items are tied to their index.
        let only = chart(&[(
            "templates/d.yaml",
            "kind: Deployment\nspec:\n  containers:\n    {{- toYaml .Values.extraContainers | nindent 4 }}\n  securityContext:\n    {{- toYaml .Values.securityContext | nindent 4 }}\n",
        )]);
        let t = trace(
            &only,
            "c/templates/d.yaml",
            "Deployment",
            "/spec/containers/0/args",
        );
        assert_eq!(t.keys, ["extraContainers[0].args"]);
    }

    /// A field of an atomic list item (an Ingress rule's host) still names its key.
    #[test]
    fn a_field_in_an_atomic_item_names_its_key_when_certain() {
        let templates = graf(Some(graf_values()));
        let rendered = serde_json::json!({"spec": {"rules": [{"host": "grafana.example.com",
            "http": {"paths": [{"path": "/", "pathType": "Prefix"}]}}]}});
        let t = trace_change(
            &templates,
            "graf/templates/ingress.yaml",
            "Ingress",
            "/spec/rules/0/host",
            Some(&rendered),
            &serde_json::json!("grafana.example.com"),
        );
        assert_eq!(t.keys, ["host"], "{t:?}");
        let plain = trace(
            &templates,
            "graf/templates/ingress.yaml",
            "Ingress",
            "/spec/rules/0/host",
        );
        assert_eq!(plain.keys, ["host"]);
    }

    /// A host changed inside an atomic list (an Ingress's `rules`, no merge key): the denial
    /// follows the one changed leaf to the value it is written from.
    #[test]
    fn a_value_inside_an_atomic_list_names_its_key_and_the_set() {
        let templates = graf(Some(graf_values()));
        let manifest = "---\n# Source: graf/templates/ingress.yaml\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: graf\nspec:\n  rules:\n  - host: grafana.example.com\n    http:\n      paths:\n      - path: /\n        pathType: Prefix\n";
        let files = crate::chart::ChartFiles {
            chart: "graf".into(),
            manifest: manifest.into(),
            templates,
            ..Default::default()
        };
        let release = crate::release::ReleaseKey::new("mon", "graf");
        let rule = |host: &str| serde_json::json!([{"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix"}]}}]);
        let change = crate::ownership::Change {
            path: "/spec/rules".into(),
            chart: rule("grafana.example.com"),
            requested: Some(rule("evil.example.com")),
        };
        let advice = advice(
            &files,
            &release,
            "Ingress",
            "graf",
            std::slice::from_ref(&change),
            false,
        )
        .unwrap();
        assert!(
            advice.contains("/spec/rules/0/host comes from values host"),
            "{advice}"
        );
        assert!(
            advice.ends_with("--reuse-values --set host=evil.example.com"),
            "{advice}"
        );
        // Two leaves changed, or an item added: the list as a whole, as before.
        let mut two = rule("evil.example.com");
        two[0]["http"]["paths"][0]["path"] = serde_json::json!("/x");
        let added = serde_json::json!([rule("a")[0], rule("b")[0]]);
        for requested in [two, added] {
            let whole = crate::ownership::Change {
                requested: Some(requested),
                ..change.clone()
            };
            assert_eq!(changed_leaf(&whole), None);
        }
    }

    /// A key not in the release's values, or whose value there is not the field's, is not
    /// named; the release's config counts over the chart's defaults.
    #[test]
    fn hints_are_checked_against_the_release_values() {
        let mut values = graf_values();
        values["log"] = serde_json::json!({});
        let templates = graf(Some(values));
        let level = graf_change(&templates, "/spec/template/spec/containers/1/env/2/value");
        assert!(level.keys.is_empty(), "{level:?}");
        // The chart renders 1 replica; values that say 4 are not what rendered it.
        let mut four = graf(Some(graf_values()));
        four.insert(RELEASE_CONFIG.into(), r#"{"replicas": 4}"#.into());
        assert!(graf_change(&four, "/spec/replicas").keys.is_empty());
        // The config is what rendered it.
        let mut one = graf(Some(serde_json::json!({"replicas": 4})));
        one.insert(RELEASE_CONFIG.into(), r#"{"replicas": 1}"#.into());
        assert_eq!(graf_change(&one, "/spec/replicas").keys, ["replicas"]);
        // A scalar field is not a map's key, a `null` in the config deletes a default.
        let mut gone = graf(Some(graf_values()));
        gone.insert(RELEASE_CONFIG.into(), r#"{"image": null}"#.into());
        let image = graf_change(&gone, "/spec/template/spec/containers/1/image");
        assert!(image.keys.is_empty(), "{image:?}");
        let mut map = graf(Some(graf_values()));
        map.insert(RELEASE_CONFIG.into(), r#"{"image": {"tag": "11"}}"#.into());
        let image = graf_change(&map, "/spec/template/spec/containers/1/image");
        assert!(image.keys.is_empty(), "{image:?}");
        // Keys in --set syntax are looked up as --set reads them.
        let v = serde_json::json!({"a": {"b.c": [1, {"d": 2}]}});
        assert_eq!(lookup(&v, "a.b\\.c[1].d"), Some(&serde_json::json!(2)));
        assert_eq!(lookup(&v, "a.b\\.c[2]"), None);
    }

    /// A key read through a function is named only when its value shows in the field's, and
    /// `--set` is offered only where setting the key writes the field (found on public charts
    /// on a cluster: an empty `nameOverride` under a chart-named label, a config key under the
    /// config's checksum, both with a `--set` that would have renamed or broken the release).
    #[test]
    fn a_key_read_through_a_function_is_named_only_when_its_value_shows() {
        const TEMPLATE: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels:\n    app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride }}\nspec:\n  replicas: {{ .Values.replicaCount | default 1 }}\n  template:\n    metadata:\n      annotations:\n        checksum/config: {{ .Values.config.file | sha256sum }}\n    spec:\n      containers:\n      - name: web\n        image: {{ printf \"%s:%s\" .Values.image.repository .Values.image.tag }}\n";
        let mut templates = chart(&[("templates/deployment.yaml", TEMPLATE)]);
        templates.insert(
            CHART_VALUES.into(),
            serde_json::json!({"nameOverride": "", "replicaCount": 3, "config": {"file": "a: 1"},
                               "image": {"repository": "nginx", "tag": "1.25"}})
            .to_string(),
        );
        let rendered = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app.kubernetes.io/name": "web"}},
            "spec": {"replicas": 3, "template": {"metadata": {"annotations": {"checksum/config": "9f2c"}},
                     "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}}});
        let at = |path: &str| {
            let chart = rendered.pointer(path).cloned().unwrap();
            trace_change(
                &templates,
                "web/templates/deployment.yaml",
                "Deployment",
                path,
                Some(&rendered),
                &chart,
            )
        };
        let label = at("/metadata/labels/app.kubernetes.io~1name");
        assert!(label.keys.is_empty(), "{label:?}");
        let checksum = at("/spec/template/metadata/annotations/checksum~1config");
        assert!(checksum.keys.is_empty(), "{checksum:?}");
        let replicas = at("/spec/replicas");
        assert_eq!(
            (replicas.keys.as_slice(), replicas.exact),
            (&["replicaCount".to_string()][..], true)
        );
        let image = at("/spec/template/spec/containers/0/image");
        assert_eq!(image.keys, ["image.repository", "image.tag"]);
        assert!(!image.exact);
    }

    /// The request's list indexes are not the chart's when the request moved items: no
    /// position is trusted then.
    #[test]
    fn a_request_that_moves_items_gets_no_positional_key() {
        let templates = graf(Some(graf_values()));
        let rendered = graf_rendered();
        // The request put a new env var first: its env/3 is the chart's GF_LOG_LEVEL.
        let t = trace_change(
            &templates,
            "graf/templates/deployment.yaml",
            "Deployment",
            "/spec/template/spec/containers/1/volumeMounts/1/mountPath",
            Some(&rendered),
            &serde_json::json!("/var/lib/grafana"),
        );
        assert!(t.keys.is_empty(), "{t:?}");
    }

    /// An Ingress host read from `$.Values.host` in every rule a `range` writes: whichever rule
    /// it is, the key is `host`. Where the rules' items do not all write it from the same key
    /// (a literal rule, a `toYaml` splice, a `range` item's own field), no key is named.
    #[test]
    fn a_root_value_written_in_every_item_of_a_list_names_its_key_at_any_position() {
        const HEAD: &str =
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web\nspec:\n";
        let named = |body: &str, path: &str| {
            let templates = chart(&[("templates/ingress.yaml", &format!("{HEAD}{body}"))]);
            trace(&templates, "c/templates/ingress.yaml", "Ingress", path).keys
        };
        let ranged = "  rules:\n  {{- range .Values.paths }}\n  - host: {{ $.Values.host | quote }}\n    http:\n      paths:\n      - path: {{ . }}\n  {{- end }}\n";
        let withed = "  rules:\n  {{- with .Values.host }}\n  - host: {{ . }}\n  {{- end }}\n";
        let under_with = "  {{- with .Values.ingress }}\n  rules:\n  - host: {{ $.Values.host }}\n    http:\n      paths:\n      - path: {{ .path }}\n  {{- end }}\n";
        for path in ["/spec/rules/0/host", "/spec/rules/3/host"] {
            assert_eq!(named(ranged, path), ["host"], "{path}");
            assert_eq!(named(withed, path), ["host"], "{path}");
        }
        assert_eq!(named(under_with, "/spec/rules/0/host"), ["host"]);
        assert!(
            named(under_with, "/spec/rules/1/host").is_empty(),
            "no second rule is written"
        );
        let none: [&str; 4] = [
            // A literal rule besides the ranged ones.
            "  rules:\n  - host: static.example.com\n  {{- range .Values.paths }}\n  - host: {{ $.Values.host }}\n  {{- end }}\n",
            // Rules spliced in from values.
            "  rules:\n    {{- range .Values.paths }}\n    - host: {{ $.Values.host }}\n    {{- end }}\n    {{- with .Values.extraRules }}\n    {{- toYaml . | nindent 4 }}\n    {{- end }}\n",
            "  rules:\n  {{- range .Values.paths }}\n  - host: {{ $.Values.host }}\n  {{- end }}\n  {{- toYaml .Values.extraRules | nindent 2 }}\n",
            // Each rule's own host: `hosts[i].host`, with i not certain.
            "  rules:\n  {{- range .Values.hosts }}\n  - host: {{ .host }}\n  {{- end }}\n",
        ];
        for body in none {
            assert!(named(body, "/spec/rules/1/host").is_empty(), "{body}");
        }
        // With the release's values: named only when the value matches the rendered host.
        let mut templates = chart(&[("templates/ingress.yaml", &format!("{HEAD}{ranged}"))]);
        templates.insert(
            CHART_VALUES.into(),
            r#"{"host": "shop.example.com", "paths": ["/a", "/b"]}"#.into(),
        );
        let rendered = serde_json::json!({"spec": {"rules": [
            {"host": "shop.example.com", "http": {"paths": [{"path": "/a"}]}},
            {"host": "shop.example.com", "http": {"paths": [{"path": "/b"}]}}]}});
        let change = |chart: &str| {
            trace_change(
                &templates,
                "c/templates/ingress.yaml",
                "Ingress",
                "/spec/rules/1/host",
                Some(&rendered),
                &serde_json::json!(chart),
            )
        };
        let t = change("shop.example.com");
        assert_eq!(
            (t.keys.as_slice(), t.exact),
            (&["host".to_string()][..], true)
        );
    }
}
