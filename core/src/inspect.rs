//! `helm-locker inspect`: what each release locks, as text or JSON.

use serde::Serialize;

use std::collections::BTreeMap;

use crate::chart::ChartFiles;
use crate::index::Index;
use crate::release::ReleaseKey;

/// The chart files of the revisions at hand (read from the same release files), by release and
/// revision: with them each object says which template renders it and which values it reads.
pub type Charts = BTreeMap<(ReleaseKey, u64), ChartFiles>;

/// (template, values keys) of an object, when its chart is at hand.
fn traced(
    charts: &Charts,
    release: &ReleaseKey,
    revision: u64,
    kind: &str,
    name: &str,
) -> Option<(String, Vec<String>)> {
    let files = charts.get(&(release.clone(), revision))?;
    let source = crate::trace::source_of(&files.manifest, kind, name)?;
    let values = crate::trace::values_read(&files.templates, &source, kind);
    Some((source, values))
}

#[derive(Serialize)]
pub struct InspectOutput {
    pub(crate) releases: Vec<InspectRelease>,
}

#[derive(Serialize)]
pub(crate) struct InspectRelease {
    pub name: String,
    pub namespace: String,
    pub revision: u64,
    pub status: String,
    pub objects: Vec<InspectObject>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InspectObject {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    /// The chart template that renders it (`null` when the chart was not read).
    pub template: Option<String>,
    /// The values keys its fields are read from.
    pub values: Vec<String>,
    /// The object lies outside the release's namespace (another namespace, or cluster-scoped):
    /// a CREATE of it is locked only when it names the release in its annotations. Like every
    /// object, it is locked only while it carries the release's `meta.helm.sh` annotations.
    pub outside_release_namespace: bool,
}

/// Whether `object` lies outside its release's namespace.
fn outside(object: &crate::locked::LockedObject) -> bool {
    object.namespace.as_deref() != Some(object.release.namespace.as_str())
}

pub fn inspect(index: &Index, charts: &Charts) -> InspectOutput {
    let releases = index
        .releases()
        .into_iter()
        .map(|state| {
            let newest = state.newest();
            InspectRelease {
                name: state.key.name.clone(),
                namespace: state.key.namespace.clone(),
                revision: newest.map_or(0, |r| r.revision),
                status: state.status().to_string(),
                objects: state
                    .objects
                    .iter()
                    .flatten()
                    .map(|o| {
                        let revision = newest.map_or(0, |r| r.revision);
                        let (template, values) =
                            match traced(charts, &state.key, revision, &o.kind, &o.name) {
                                Some((template, values)) => (Some(template), values),
                                None => (None, Vec::new()),
                            };
                        InspectObject {
                            api_version: o.api_version(),
                            kind: o.kind.to_string(),
                            namespace: o.namespace.as_deref().map(str::to_string),
                            name: o.name.to_string(),
                            template,
                            values,
                            outside_release_namespace: outside(o),
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    InspectOutput { releases }
}

pub fn render_text(index: &Index, charts: &Charts) -> String {
    let mut out = String::new();
    for state in index.releases() {
        let Some(newest) = state.newest() else {
            continue;
        };
        let locked = if newest.status == crate::release::Status::Deployed {
            "locked"
        } else {
            "not locked"
        };
        out.push_str(&format!(
            "{} revision {} {} chart {} ({locked})\n",
            state.key,
            newest.revision,
            newest.status,
            if newest.chart.is_empty() {
                "?"
            } else {
                &newest.chart
            }
        ));
        for object in state.objects.iter().flatten() {
            let id = match &object.namespace {
                Some(ns) => format!("{ns}/{}", object.name),
                None => object.name.to_string(),
            };
            let traced = traced(
                charts,
                &state.key,
                newest.revision,
                &object.kind,
                &object.name,
            )
            .map(|(template, values)| match values.as_slice() {
                [] => format!("  ({template})"),
                values => format!("  ({template}; values: {})", values.join(", ")),
            })
            .unwrap_or_default();
            let outside = if outside(object) {
                "  [outside the release's namespace]"
            } else {
                ""
            };
            out.push_str(&format!(
                "  {} {} {id}{traced}{outside}\n",
                object.api_version(),
                object.kind
            ));
        }
        if state.objects.is_none() {
            out.push_str("  (objects unknown: the newest revision's Secret is gone)\n");
        }
        for skipped in &state.skipped {
            out.push_str(&format!(
                "  skipped document {}{}: {}\n",
                skipped.document,
                skipped
                    .source
                    .as_ref()
                    .map(|s| format!(" ({s})"))
                    .unwrap_or_default(),
                skipped.reason
            ));
        }
    }
    if index
        .releases()
        .iter()
        .any(|s| s.objects.iter().flatten().any(|o| outside(o)))
    {
        out.push_str("Objects are locked only while they carry their release's meta.helm.sh/release-name and -namespace annotations; outside the release's namespace a CREATE is locked only when it names the release (docs/trust.md).\n");
    }
    for conflict in index.conflicts() {
        out.push_str(&format!(
            "conflict: {} is rendered by {} and {}; the release its meta.helm.sh/release-name and -namespace annotations name owns it ({} when they name neither)\n",
            conflict.object,
            conflict.winner,
            conflict
                .losers
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            conflict.winner
        ));
    }
    out
}
