//! `kubectl locker why TYPE/NAME`: which release locks an object, and each locked path with
//! the chart's value and the live value.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::{lock_state, Live};
use crate::core::{locked_values, ChartFiles, Config, Index, LockedObject, Schema};

/// The object asked about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Wanted {
    pub group: String,
    pub kind: String,
    /// `None` for a cluster-scoped kind.
    pub namespace: Option<String>,
    pub name: String,
}

impl Wanted {
    fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Owner {
    pub name: String,
    pub namespace: String,
    pub revision: u64,
    pub status: String,
    pub locked: bool,
    pub mode: String,
    /// Why the release is not locked (`null` when it is).
    pub reason: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LockedField {
    pub path: String,
    pub chart: Value,
    /// `null` when the live object lacks the field.
    pub live: Option<Value>,
    pub differs: bool,
    /// Where the chart sets it: `values: replicaCount`, or `set in shop/templates/x.yaml line 9`
    /// (`null` when the chart's templates were not read).
    pub from: Option<String>,
    /// The writer rule whose writer holds the path (`null`: none): a write by that writer is
    /// let through and the reverter leaves the value, so a difference here is not drift.
    pub held_by: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WhyReport {
    pub object: String,
    /// The release that locks the object (`null`: none renders it).
    pub release: Option<Owner>,
    /// Other releases that render the same object (they do not own it).
    pub other_releases: Vec<String>,
    /// `found`, `missing`, `unreadable: ...`, or `not read` when no release renders it.
    pub live: String,
    /// Each locked path (empty when the live object cannot be compared).
    pub fields: Vec<LockedField>,
}

/// Every release claiming the object; the first is the owner, as the webhook and the reverter
/// decide ([`crate::core::Claims::owner`]): the release the live object's Helm annotations name,
/// else the release of the object's own namespace.
pub(crate) fn claims<'i>(
    index: &'i Index,
    wanted: &Wanted,
    live: Option<&Value>,
) -> Vec<&'i Arc<LockedObject>> {
    let claims = index.find(
        &wanted.group,
        &wanted.kind,
        wanted.namespace.as_deref(),
        &wanted.name,
    );
    claims.map_or_else(Vec::new, |claims| {
        claims.by_owner(|| live.and_then(crate::core::live_owner))
    })
}

/// `chart`: the owning revision's chart files, to say which values key sets each field. `now`
/// (Unix seconds) decides which writer rules are in force.
pub(crate) fn why(
    index: &Index,
    config: &Config,
    schema: &Schema,
    wanted: &Wanted,
    live: &Live,
    chart: Option<&ChartFiles>,
    now: i64,
) -> WhyReport {
    let live_value = match live {
        Live::Found(value) => Some(value),
        _ => None,
    };
    let claims = claims(index, wanted, live_value);
    let live_state = match live {
        Live::Found(_) => "found".to_string(),
        Live::Missing => "missing".to_string(),
        Live::Unreadable(e) => format!("unreadable: {e}"),
    };
    let Some(object) = claims.first() else {
        return WhyReport {
            object: wanted.describe(),
            release: None,
            other_releases: vec![],
            live: "not read".into(),
            fields: vec![],
        };
    };
    let owner = index.release(&object.release).map(|state| {
        let lock = lock_state(index, config, state);
        let newest = state.newest();
        Owner {
            name: state.key.name.clone(),
            namespace: state.key.namespace.clone(),
            revision: newest.map_or(0, |r| r.revision),
            status: state.status().to_string(),
            locked: lock.locked,
            mode: lock.mode,
            reason: lock.reason,
        }
    });
    let fields = match live_value {
        Some(value) => {
            let ignore = index.ignored_paths(config, object);
            let ignore: Vec<&str> = ignore.iter().map(String::as_str).collect();
            // Traced like a denial's hint: list items matched by name and every values key
            // checked against the chart's value, so a key is named only when it is certain.
            let rendered = chart.and_then(|c| {
                crate::core::rendered_object(&c.manifest, &object.kind, &object.name)
                    .map(|(source, rendered)| (c, source, rendered))
            });
            let holders = super::diff::rule_holders(index, config, object, value, now);
            locked_values(schema, object, value, &ignore)
                .into_iter()
                .map(|v| LockedField {
                    held_by: super::diff::held_by(&holders, &v.path).map(str::to_string),
                    from: rendered.as_ref().map(|(c, source, rendered)| {
                        crate::core::trace_change(
                            &c.templates,
                            source,
                            &object.kind,
                            &v.path,
                            Some(rendered),
                            &v.chart,
                        )
                        .to_string()
                    }),
                    path: v.path,
                    chart: v.chart,
                    live: v.live,
                    differs: v.differs,
                })
                .collect()
        }
        None => vec![],
    };
    WhyReport {
        object: object.describe(),
        release: owner,
        other_releases: claims[1..].iter().map(|c| c.release.to_string()).collect(),
        live: live_state,
        fields,
    }
}

pub(crate) fn render_text(report: &WhyReport) -> String {
    let Some(release) = &report.release else {
        return format!(
            "{}: no Helm release locks it (no deployed release's manifest renders it; hooks and crds/ are never locked).\n",
            report.object
        );
    };
    let key = format!("{}/{}", release.namespace, release.name);
    let mut out = if release.locked {
        format!(
            "{} is locked by Helm release {key} (revision {}, {}, mode {}).\n",
            report.object, release.revision, release.status, release.mode
        )
    } else {
        format!(
            "{} belongs to Helm release {key} (revision {}, {}), which is not locked: {}.\n",
            report.object,
            release.revision,
            release.status,
            release.reason.as_deref().unwrap_or("unknown")
        )
    };
    for other in &report.other_releases {
        out.push_str(&format!(
            "Release {other} renders it too; the release its meta.helm.sh annotations name owns it.\n"
        ));
    }
    if report.live != "found" {
        out.push_str(&format!("The live object is {}.\n", report.live));
        return out;
    }
    let traced = report.fields.iter().any(|f| f.from.is_some());
    let ruled = report.fields.iter().any(|f| f.held_by.is_some());
    let mut header: Vec<String> = vec!["  PATH".into(), "CHART".into(), "LIVE".into()];
    if traced {
        header.push("FROM".into());
    }
    if ruled {
        header.push("HELD BY".into());
    }
    let mut rows = vec![header];
    for field in &report.fields {
        let mark = match (field.differs, &field.held_by) {
            (true, Some(_)) => "~",
            (true, None) => "*",
            (false, _) => " ",
        };
        let mut row = vec![
            format!("{mark} {}", field.path),
            super::show(Some(&field.chart)),
            super::show(field.live.as_ref()),
        ];
        if traced {
            row.push(field.from.clone().unwrap_or_default());
        }
        if ruled {
            row.push(
                field
                    .held_by
                    .as_ref()
                    .map(|id| format!("writer rule {id}"))
                    .unwrap_or_default(),
            );
        }
        rows.push(row);
    }
    out.push_str(&super::table(&rows));
    let differing = report
        .fields
        .iter()
        .filter(|f| f.differs && f.held_by.is_none())
        .count();
    out.push_str(&format!(
        "{differing} of {} locked fields differ from the chart (*). Change them with helm upgrade of {key}.\n",
        report.fields.len()
    ));
    let held = report
        .fields
        .iter()
        .filter(|f| f.differs && f.held_by.is_some())
        .count();
    if held > 0 {
        out.push_str(&format!(
            "{held} differ and are held by writer rules (~): their writers may change them, and the reverter leaves them (not drift).\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Status;
    use crate::plugin::tests::{index, live_deployment};

    fn deploy(name: &str) -> Wanted {
        Wanted {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespace: Some("shop".into()),
            name: name.into(),
        }
    }

    #[test]
    fn why_names_the_release_and_each_locked_path_with_both_values() {
        let index = index(Status::Deployed);
        let live = Live::Found(live_deployment(7, "nginx:1.25"));
        let report = why(
            &index,
            &Config::default(),
            &Schema::builtin(),
            &deploy("web"),
            &live,
            None,
            0,
        );
        let release = report.release.as_ref().unwrap();
        assert_eq!((release.name.as_str(), release.locked), ("shop", true));
        let replicas = report
            .fields
            .iter()
            .find(|f| f.path == "/spec/replicas")
            .unwrap();
        assert_eq!(
            (&replicas.chart, &replicas.live, replicas.differs),
            (&serde_json::json!(3), &Some(serde_json::json!(7)), true)
        );
        let image = report
            .fields
            .iter()
            .find(|f| f.path == "/spec/template/spec/containers/0/image")
            .unwrap();
        assert!(!image.differs);
        let text = render_text(&report);
        assert!(text.starts_with("Deployment shop/web is locked by Helm release shop/shop (revision 2, deployed, mode deny)."), "{text}");
        assert!(text.contains("* /spec/replicas"), "{text}");
        assert!(text.contains("1 of "), "{text}");
        assert!(!text.contains("FROM"), "no chart read, no column: {text}");
        // With the revision's chart files, each field says where the chart sets it.
        let chart = ChartFiles {
            chart: "shop".into(),
            manifest: "---\n# Source: shop/templates/web.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n".into(),
            templates: [(
                "templates/web.yaml".to_string(),
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: {{ .Values.replicas }}\n".to_string(),
            )]
            .into(),
            ..ChartFiles::default()
        };
        let traced = why(
            &index,
            &Config::default(),
            &Schema::builtin(),
            &deploy("web"),
            &live,
            Some(&chart),
            0,
        );
        let replicas = traced
            .fields
            .iter()
            .find(|f| f.path == "/spec/replicas")
            .unwrap();
        assert_eq!(replicas.from.as_deref(), Some("values: replicas"));
        let text = render_text(&traced);
        assert!(
            text.contains("FROM") && text.contains("values: replicas"),
            "{text}"
        );
    }

    #[test]
    fn an_object_no_release_renders_is_not_locked() {
        let index = index(Status::Deployed);
        let report = why(
            &index,
            &Config::default(),
            &Schema::builtin(),
            &deploy("other"),
            &Live::Found(live_deployment(1, "x")),
            None,
            0,
        );
        assert!(report.release.is_none() && report.fields.is_empty());
        assert!(render_text(&report).contains("no Helm release locks it"));
        // Cluster-scoped: found without a namespace, not with one.
        let role = |namespace: Option<&str>| Wanted {
            group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            namespace: namespace.map(str::to_string),
            name: "reader".into(),
        };
        let found = why(
            &index,
            &Config::default(),
            &Schema::builtin(),
            &role(None),
            &Live::Missing,
            None,
            0,
        );
        assert_eq!(found.release.unwrap().name, "shop");
        assert!(render_text(&why(
            &index,
            &Config::default(),
            &Schema::builtin(),
            &role(None),
            &Live::Missing,
            None,
            0,
        ))
        .contains("The live object is missing."));
    }

    #[test]
    fn a_superseded_newest_revision_owns_but_does_not_lock() {
        let index = index(Status::Superseded);
        let report = why(
            &index,
            &Config::default(),
            &Schema::builtin(),
            &deploy("web"),
            &Live::Found(live_deployment(3, "nginx:1.25")),
            None,
            0,
        );
        let text = render_text(&report);
        assert!(
            text.contains(
                "belongs to Helm release shop/shop (revision 2, superseded), which is not locked"
            ),
            "{text}"
        );
        assert!(report.fields.iter().all(|f| !f.differs));
    }

    /// As the reverter sees it: a path the rule's writer holds differs, but is not drift.
    #[test]
    fn a_path_a_writer_rule_holds_is_named_with_its_rule() {
        let index = index(Status::Deployed);
        let config: Config = serde_saphyr::from_str(
            "writers:\n- id: web-scaler\n  writers: {serviceAccounts: [ops/scaler], fieldManager: scaler}\n  objects: {group: apps, kind: Deployment}\n  paths: [/spec/replicas]\n  reason: r\n",
        )
        .unwrap();
        let mut deployment = live_deployment(7, "nginx:1.25");
        deployment["metadata"]["managedFields"] = serde_json::json!([{"manager": "scaler",
            "operation": "Update", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:replicas": {}}}}]);
        let report = why(
            &index,
            &config,
            &Schema::builtin(),
            &deploy("web"),
            &Live::Found(deployment),
            None,
            0,
        );
        let replicas = report
            .fields
            .iter()
            .find(|f| f.path == "/spec/replicas")
            .unwrap();
        assert_eq!(replicas.held_by.as_deref(), Some("web-scaler"));
        let text = render_text(&report);
        assert!(text.contains("~ /spec/replicas"), "{text}");
        assert!(text.contains("writer rule web-scaler"), "{text}");
        assert!(text.contains("0 of "), "{text}");
        assert!(
            text.contains("1 differ and are held by writer rules"),
            "{text}"
        );
    }
}
