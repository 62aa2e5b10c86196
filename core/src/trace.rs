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
//!   [`CHART_VALUES`](crate::chart::CHART_VALUES)), a key that is not in them, or whose value
//!   there is not the field's rendered value where the template writes it as is, is not named.
//!
//! What cannot be followed (a field computed in a helper from several values, `tpl`, a
//! template that builds YAML as text, an item whose position is uncertain) names the template
//! and, when certain, its line.
//!
//! This file holds what the crate calls: [`trace_change`], the denial's advice and the keys an
//! object reads. Beneath it: `search` (the line that writes a field), `yaml_lines`
//! (a template as YAML lines), `actions` (Go template actions and their scopes), `path` (what
//! is looked for) and `values` (the release's values).

mod actions;
mod path;
mod search;
mod values;
mod yaml_lines;

use serde_json::Value;

use crate::chart::{ChartFiles, Templates};
use actions::{defines, push_unique, refs};
use path::wants;
use search::{find, Ctx};
use values::{checked, lookup, merged_values, same_scalar};
use yaml_lines::{documents, yaml_lines};

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
/// chart's name); `kind` picks the document of a template file that renders several.
///
/// The field is a changed one: knowing the object as the chart rendered it (`rendered`) and
/// the chart's value of the field (`chart`), list items are also matched by their `name`, and
/// the keys are checked against the field's value. The path's list indexes are the request's:
/// when the rendered object's value there is not `chart`, the request moved items and no index
/// is trusted.
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

/// The values keys a locked path of an object the chart renders is read from, with no change
/// and no value in hand (what `learn` tells a person to `--set`); empty when not certain.
pub(crate) fn path_keys(files: &ChartFiles, kind: &str, name: &str, path: &str) -> Vec<String> {
    let Some((source, object)) = rendered_object(&files.manifest, kind, name) else {
        return Vec::new();
    };
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let chart = wants(&segments, Some(&object), true)
        .1
        .cloned()
        .unwrap_or(Value::Null);
    trace_change(&files.templates, &source, kind, path, Some(&object), &chart).keys
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
            crate::ownership::push_segment(path, key);
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

#[cfg(test)]
mod tests;
