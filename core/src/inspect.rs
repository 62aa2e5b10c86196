//! `helm-locker inspect`: what each release locks, as text or JSON.

use serde::Serialize;

use crate::index::Index;

#[derive(Serialize)]
pub struct InspectOutput {
    pub releases: Vec<InspectRelease>,
}

#[derive(Serialize)]
pub struct InspectRelease {
    pub name: String,
    pub namespace: String,
    pub revision: u64,
    pub status: String,
    pub objects: Vec<InspectObject>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InspectObject {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

pub fn inspect(index: &Index) -> InspectOutput {
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
                    .map(|o| InspectObject {
                        api_version: o.api_version(),
                        kind: o.kind.to_string(),
                        namespace: o.namespace.as_deref().map(str::to_string),
                        name: o.name.clone(),
                    })
                    .collect(),
            }
        })
        .collect();
    InspectOutput { releases }
}

pub fn render_text(index: &Index) -> String {
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
                None => object.name.clone(),
            };
            out.push_str(&format!(
                "  {} {} {id}\n",
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
