//! `kubectl locker diff [RELEASE]`: drift between the live objects and their chart, per object
//! and per path, with an exit status for CI.

use serde::Serialize;
use serde_json::Value;

use super::{Live, LiveObjects, ObjectId};
use crate::core::{drift, Config, Index, LockedObject, ReleaseState, Schema, Status};

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FieldDrift {
    pub path: String,
    pub chart: Value,
    /// `null` when the live object lacks the field.
    pub live: Option<Value>,
}

/// A locked path whose live value a writer rule gives to its writer, who holds it: the
/// reverter leaves it, so it is not drift.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HeldField {
    pub path: String,
    /// The id of the writer rule that holds it.
    pub rule: String,
    pub chart: Value,
    pub live: Option<Value>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ObjectDrift {
    pub release: String,
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    /// `drifted`, `held` (only paths writer rules hold differ), `missing` (deleted) or
    /// `unreadable`.
    pub state: String,
    pub error: Option<String>,
    pub fields: Vec<FieldDrift>,
    /// Why the fields were compared without the API server's answer for the chart's object
    /// (a dry-run create these credentials may not make, or that failed): some may differ only
    /// in what the API server fills in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compared_without_server: Option<String>,
    /// Paths that differ from the chart and that a writer rule's writer holds: not drift.
    pub held: Vec<HeldField>,
}

/// The paths of `live` that writer rules hold on `object`, each with its rule's id: the same
/// answer the reverter gets ([`Index::rule_holders`]), with Helm's apply manager as the
/// reverter sees it on a release Helm applies server-side.
pub(crate) fn rule_holders(
    index: &Index,
    config: &Config,
    object: &LockedObject,
    live: &Value,
    now: i64,
) -> Vec<(String, String)> {
    let apply_method = index
        .release(&object.release)
        .and_then(|s| s.newest())
        .and_then(|r| r.apply_method.as_deref());
    let writer = crate::core::helm_writer_seen(Some(live), apply_method, None);
    let helm_apply = match &writer {
        crate::core::HelmWriter::Apply(helm) => Some(helm.as_str()),
        crate::core::HelmWriter::Update(_) => None,
    };
    index.rule_holders(config, object, live, helm_apply, now)
}

/// The rule holding `path` (an index path), if one of `holders` is it or above it.
pub(crate) fn held_by<'h>(holders: &'h [(String, String)], path: &str) -> Option<&'h str> {
    holders.iter().find_map(|(held, rule)| {
        let under = path == held
            || path
                .strip_prefix(held.as_str())
                .is_some_and(|rest| rest.starts_with('/'));
        under.then_some(rule.as_str())
    })
}

/// What the API server answered it would store each drifted object's chart object as (a dry-run
/// create: [`crate::core::stored_form_body`]), or why it did not answer.
pub(crate) type StoredForms = std::collections::HashMap<ObjectId, Result<Value, String>>;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Skipped {
    pub release: String,
    pub status: String,
    pub reason: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DiffReport {
    /// Whether any compared object drifted or is missing.
    pub drift: bool,
    pub releases: usize,
    pub objects: usize,
    /// Objects that drifted, are missing, or could not be read; in sync ones are left out.
    pub differences: Vec<ObjectDrift>,
    /// Releases not compared: Helm is at work, or their newest revision is not deployed.
    pub skipped: Vec<Skipped>,
}

impl DiffReport {
    /// 0 no drift, 1 drift, 2 something could not be read (and no drift was found).
    pub(crate) fn exit_status(&self) -> u8 {
        if self.drift {
            1
        } else if self.differences.iter().any(|d| d.state == "unreadable") {
            2
        } else {
            0
        }
    }
}

/// Releases whose newest revision is deployed are compared (whatever the policy's mode: drift is
/// drift); the others are skipped with the reason.
pub(crate) fn compared(state: &ReleaseState) -> Result<(), String> {
    let Some(newest) = state.newest() else {
        return Err("no revision".into());
    };
    if newest.status.is_helm_at_work() {
        return Err(format!("Helm is at work ({})", newest.status));
    }
    if newest.status != Status::Deployed {
        return Err(format!(
            "its newest revision {} is {}: its chart is not what was meant to be live",
            newest.revision, newest.status
        ));
    }
    if state.objects.is_none() {
        return Err("its newest revision's Secret is gone".into());
    }
    Ok(())
}

/// `stored`: the API server's answers for objects that differ locally ([`StoredForms`]); a path
/// where its answer equals live is no drift. An object without an entry is compared locally.
/// `now` (Unix seconds) decides which writer rules are still in force.
pub(crate) fn diff(
    index: &Index,
    config: &Config,
    schema: &Schema,
    live: &LiveObjects,
    stored: &StoredForms,
    now: i64,
) -> DiffReport {
    let mut report = DiffReport {
        drift: false,
        releases: 0,
        objects: 0,
        differences: vec![],
        skipped: vec![],
    };
    for state in index.releases() {
        if let Err(reason) = compared(state) {
            report.skipped.push(Skipped {
                release: state.key.to_string(),
                status: state.status().to_string(),
                reason,
            });
            continue;
        }
        report.releases += 1;
        for object in state.objects.iter().flatten() {
            report.objects += 1;
            let entry = |state: &str,
                         error: Option<String>,
                         fields: Vec<FieldDrift>,
                         held: Vec<HeldField>| ObjectDrift {
                release: object.release.to_string(),
                api_version: object.api_version(),
                kind: object.kind.to_string(),
                namespace: object.namespace.as_deref().map(str::to_string),
                name: object.name.to_string(),
                state: state.into(),
                error,
                fields,
                compared_without_server: None,
                held,
            };
            match live.get(&ObjectId::of(object)) {
                Some(Live::Found(value)) => {
                    let ignore = index.ignored_paths(config, object);
                    let ignore: Vec<&str> = ignore.iter().map(String::as_str).collect();
                    let mut changes = drift(schema, object, value, &ignore);
                    let mut without = None;
                    if !changes.is_empty() {
                        match stored.get(&ObjectId::of(object)) {
                            Some(Ok(stored)) => changes.retain(|c| {
                                !crate::core::differing_from_stored(
                                    vec![c.path.clone()],
                                    stored,
                                    value,
                                )
                                .is_empty()
                            }),
                            Some(Err(why)) => without = Some(why.clone()),
                            None => {}
                        }
                    }
                    let holders = rule_holders(index, config, object, value, now);
                    let (mut fields, mut held) = (Vec::new(), Vec::new());
                    for c in changes {
                        match held_by(&holders, &c.path) {
                            Some(rule) => held.push(HeldField {
                                path: c.path,
                                rule: rule.to_string(),
                                chart: c.chart,
                                live: c.requested,
                            }),
                            None => fields.push(FieldDrift {
                                path: c.path,
                                chart: c.chart,
                                live: c.requested,
                            }),
                        }
                    }
                    if !fields.is_empty() {
                        report.drift = true;
                        let mut drifted = entry("drifted", None, fields, held);
                        drifted.compared_without_server = without;
                        report.differences.push(drifted);
                    } else if !held.is_empty() {
                        report.differences.push(entry("held", None, fields, held));
                    }
                }
                Some(Live::Missing) => {
                    report.drift = true;
                    report
                        .differences
                        .push(entry("missing", None, vec![], vec![]));
                }
                Some(Live::Unreadable(e)) => {
                    report
                        .differences
                        .push(entry("unreadable", Some(e.clone()), vec![], vec![]))
                }
                None => report.differences.push(entry(
                    "unreadable",
                    Some("not read".into()),
                    vec![],
                    vec![],
                )),
            }
        }
    }
    report
}

pub(crate) fn render_text(report: &DiffReport) -> String {
    let mut out = String::new();
    for d in &report.differences {
        let id = match &d.namespace {
            Some(ns) => format!("{} {ns}/{}", d.kind, d.name),
            None => format!("{} {}", d.kind, d.name),
        };
        match d.state.as_str() {
            "drifted" | "held" => {
                match &d.compared_without_server {
                    None => out.push_str(&format!("{id} (release {}):\n", d.release)),
                    Some(why) => out.push_str(&format!(
                        "{id} (release {}), compared without the API server ({why}):\n",
                        d.release
                    )),
                }
                for f in &d.fields {
                    out.push_str(&format!(
                        "  {}: chart {}, live {}\n",
                        f.path,
                        super::show(Some(&f.chart)),
                        super::show(f.live.as_ref())
                    ));
                }
                for h in &d.held {
                    out.push_str(&format!(
                        "  {}: held by writer rule {} (not drift): chart {}, live {}\n",
                        h.path,
                        h.rule,
                        super::show(Some(&h.chart)),
                        super::show(h.live.as_ref())
                    ));
                }
            }
            "missing" => out.push_str(&format!(
                "{id} (release {}): missing, deleted from the cluster\n",
                d.release
            )),
            _ => out.push_str(&format!(
                "{id} (release {}): could not be read: {}\n",
                d.release,
                d.error.as_deref().unwrap_or("unknown")
            )),
        }
    }
    for s in &report.skipped {
        out.push_str(&format!("skipped release {}: {}\n", s.release, s.reason));
    }
    let drifted = report
        .differences
        .iter()
        .filter(|d| d.state == "drifted" || d.state == "missing")
        .count();
    let unreadable = report
        .differences
        .iter()
        .filter(|d| d.state == "unreadable")
        .count();
    let fields: usize = report.differences.iter().map(|d| d.fields.len()).sum();
    let releases = match report.releases {
        1 => "1 release".to_string(),
        n => format!("{n} releases"),
    };
    if report.drift {
        out.push_str(&format!(
            "Drift: {drifted} of {} objects ({fields} fields) differ from their chart in {releases} compared.\n",
            report.objects
        ));
    } else {
        out.push_str(&format!(
            "No drift: {} objects of {releases} compared match their chart.\n",
            report.objects - unreadable
        ));
    }
    let held: usize = report.differences.iter().map(|d| d.held.len()).sum();
    if held > 0 {
        out.push_str(&format!(
            "{held} field(s) differ from their chart and are held by writer rules: the reverter leaves them.\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::tests::{index, live, live_deployment};

    #[test]
    fn no_drift_exits_0_and_drift_exits_1_with_both_values() {
        let index = index(Status::Deployed);
        let schema = Schema::builtin();
        let clean = diff(
            &index,
            &Config::default(),
            &schema,
            &live(&index, live_deployment(3, "nginx:1.25")),
            &StoredForms::new(),
            0,
        );
        assert_eq!(
            (clean.drift, clean.exit_status(), clean.objects),
            (false, 0, 3)
        );
        assert!(render_text(&clean).contains("No drift: 3 objects of 1 release compared"));
        let drifted = diff(
            &index,
            &Config::default(),
            &schema,
            &live(&index, live_deployment(7, "nginx:1.25")),
            &StoredForms::new(),
            0,
        );
        assert_eq!(drifted.exit_status(), 1);
        let d = &drifted.differences[0];
        assert_eq!(
            (d.kind.as_str(), d.state.as_str()),
            ("Deployment", "drifted")
        );
        assert_eq!(d.fields[0].path, "/spec/replicas");
        let text = render_text(&drifted);
        assert!(
            text.contains(
                "Deployment shop/web (release shop/shop):\n  /spec/replicas: chart 3, live 7\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_path_the_api_server_stores_as_live_is_no_drift_and_without_its_answer_it_says_so() {
        let index = index(Status::Deployed);
        let schema = Schema::builtin();
        let objects = live(&index, live_deployment(7, "nginx:1.25"));
        let (id, value) = objects
            .iter()
            .find_map(|(id, l)| match l {
                Live::Found(v) if id.kind == "Deployment" => Some((id.clone(), v.clone())),
                _ => None,
            })
            .unwrap();
        // The API server answers it would store the chart's Deployment with replicas 7 (as if a
        // default it fills in): no drift.
        let stored = StoredForms::from([(id.clone(), Ok(value.clone()))]);
        let report = diff(&index, &Config::default(), &schema, &objects, &stored, 0);
        assert_eq!(report.exit_status(), 0, "{}", render_text(&report));
        // It answers the chart's 3: drift, as before.
        let mut three = value.clone();
        three["spec"]["replicas"] = serde_json::json!(3);
        let stored = StoredForms::from([(id.clone(), Ok(three))]);
        let report = diff(&index, &Config::default(), &schema, &objects, &stored, 0);
        assert_eq!(report.exit_status(), 1);
        // The dry run refused: the local answer, said to be so.
        let stored =
            StoredForms::from([(id, Err("its dry-run create was refused: forbidden".into()))]);
        let report = diff(&index, &Config::default(), &schema, &objects, &stored, 0);
        assert_eq!(report.exit_status(), 1);
        let text = render_text(&report);
        assert!(
            text.contains("Deployment shop/web (release shop/shop), compared without the API server (its dry-run create was refused: forbidden):\n  /spec/replicas: chart 3, live 7\n"),
            "{text}"
        );
    }

    #[test]
    fn a_deleted_object_is_drift_and_an_unreadable_one_an_error() {
        let index = index(Status::Deployed);
        let schema = Schema::builtin();
        let mut objects = live(&index, live_deployment(3, "nginx:1.25"));
        let cm = objects
            .keys()
            .find(|id| id.kind == "ConfigMap")
            .unwrap()
            .clone();
        objects.insert(cm.clone(), Live::Missing);
        let report = diff(
            &index,
            &Config::default(),
            &schema,
            &objects,
            &StoredForms::new(),
            0,
        );
        assert_eq!(report.exit_status(), 1);
        assert!(render_text(&report).contains("ConfigMap shop/cfg (release shop/shop): missing"));
        objects.insert(cm, Live::Unreadable("forbidden".into()));
        let report = diff(
            &index,
            &Config::default(),
            &schema,
            &objects,
            &StoredForms::new(),
            0,
        );
        assert_eq!((report.drift, report.exit_status()), (false, 2));
    }

    #[test]
    fn ignore_rules_leave_paths_out_and_failed_releases_are_skipped() {
        let index = index(Status::Deployed);
        let schema = Schema::builtin();
        let config: Config = serde_saphyr::from_str(
            "ignore:\n- paths: [/spec/replicas]\n  target: {kind: Deployment}\n",
        )
        .unwrap();
        let objects = live(&index, live_deployment(7, "nginx:1.25"));
        assert_eq!(
            diff(&index, &config, &schema, &objects, &StoredForms::new(), 0).exit_status(),
            0
        );
        let failed = crate::plugin::tests::index(Status::Failed);
        let report = diff(
            &failed,
            &Config::default(),
            &schema,
            &objects,
            &StoredForms::new(),
            0,
        );
        assert_eq!((report.exit_status(), report.releases), (0, 0));
        assert!(render_text(&report)
            .contains("skipped release shop/shop: its newest revision 2 is failed"));
    }

    /// A rule's writer holding a locked path is what the reverter leaves: not drift, and named.
    #[test]
    fn a_path_a_writer_rule_holds_is_named_with_its_rule_not_drift() {
        let index = index(Status::Deployed);
        let schema = Schema::builtin();
        let rule = |manager: &str| {
            serde_saphyr::from_str::<Config>(&format!(
                "writers:\n- id: web-scaler\n  writers: {{serviceAccounts: [ops/scaler], fieldManager: {manager}}}\n  objects: {{release: {{namespace: shop, name: shop}}, group: apps, kind: Deployment}}\n  paths: [/spec/replicas]\n  reason: r\n"
            ))
            .unwrap()
        };
        let mut deployment = live_deployment(7, "nginx:1.25");
        deployment["metadata"]["managedFields"] = serde_json::json!([{"manager": "scaler",
            "operation": "Update", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:replicas": {}}}}]);
        let objects = live(&index, deployment);
        let report = diff(
            &index,
            &rule("scaler"),
            &schema,
            &objects,
            &StoredForms::new(),
            0,
        );
        assert_eq!((report.drift, report.exit_status()), (false, 0));
        let d = &report.differences[0];
        assert_eq!(d.state, "held");
        assert!(d.fields.is_empty());
        assert_eq!(
            (d.held[0].path.as_str(), d.held[0].rule.as_str()),
            ("/spec/replicas", "web-scaler")
        );
        let text = render_text(&report);
        assert!(
            text.contains(
                "/spec/replicas: held by writer rule web-scaler (not drift): chart 3, live 7"
            ),
            "{text}"
        );
        assert!(text.contains("No drift: 3 objects"), "{text}");
        // Another manager holds it: the rule gives it to "scaler" only, so it is drift.
        let report = diff(
            &index,
            &rule("hpa"),
            &schema,
            &objects,
            &StoredForms::new(),
            0,
        );
        assert_eq!(report.exit_status(), 1);
        assert!(report.differences[0].held.is_empty());
    }
}
