//! `kubectl locker status`: each release, locked or why not, and its drift now.

use serde::Serialize;

use super::{lock_state, Live, LiveObjects, ObjectId};
use crate::core::{drift, rule_expired, rules_of_release, Config, Index, Schema, WriterRule};
use crate::events::Reason;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReleaseStatus {
    pub name: String,
    pub namespace: String,
    pub revision: u64,
    pub status: String,
    pub chart: String,
    pub locked: bool,
    pub mode: String,
    /// Why the release is not locked (`null` when it is).
    pub reason: Option<String>,
    /// Objects of the newest revision (`null` when unknown).
    pub objects: Option<usize>,
    /// Locked fields whose live value differs from the chart's, over every object.
    pub drifted_fields: usize,
    /// Objects of the chart the API server no longer has.
    pub missing_objects: usize,
    /// Objects that could not be read (not counted above).
    pub unreadable_objects: usize,
    /// Live objects the release renders that do not carry its `meta.helm.sh` annotations:
    /// Helm neither made nor adopted them, so they are neither locked nor reverted (not
    /// counted above).
    pub unproven_objects: usize,
    /// Objects the reverter leaves drifted because the newest revision's author may not write
    /// them, or is not known (its `AuthorLacksRights` and `UnknownAuthor` Warning Events).
    pub refused_objects: usize,
    /// Objects whose fields the reverter stopped reverting in a fight with another writer
    /// (`RevertFight` Warning Events).
    pub fights: usize,
}

#[derive(Debug, Serialize)]
pub(crate) struct StatusReport {
    pub releases: Vec<ReleaseStatus>,
    /// LockExceptions open now.
    pub exceptions: Vec<ExceptionStatus>,
    /// The writer rules in force that cover each release ([`add_writer_rules`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub writer_rules: Vec<WriterRuleStatus>,
}

/// A writer rule that covers a release.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WriterRuleStatus {
    /// `namespace/name` of the release it covers.
    pub release: String,
    pub id: String,
    /// Service accounts, users, `group:` groups, `manager:` the field manager.
    pub writers: Vec<String>,
    /// `Kind.group` and the names (all of the kind when none).
    pub objects: String,
    pub paths: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Past its `until`: it matches nothing.
    pub expired: bool,
}

/// An open LockException and its time left.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExceptionStatus {
    /// `namespace/name`.
    pub name: String,
    pub release: String,
    pub users: Vec<String>,
    pub groups: Vec<String>,
    /// The paths it opens (all when empty).
    pub paths: Vec<String>,
    pub reason: String,
    pub seconds_left: i64,
}

/// Every release of the index (sorted by namespace and name) with its lock state and drift,
/// and the LockExceptions open at `now` (Unix seconds).
pub(crate) fn status(
    index: &Index,
    config: &Config,
    schema: &Schema,
    live: &LiveObjects,
    now: i64,
) -> StatusReport {
    let exceptions = index
        .all_exceptions()
        .into_iter()
        .filter(|e| e.is_open(now))
        .map(|e| ExceptionStatus {
            name: e.name.clone(),
            release: e.release.to_string(),
            users: e.users.clone(),
            groups: e.groups.clone(),
            paths: e.paths.clone(),
            reason: e.reason.clone(),
            seconds_left: e.remaining(now),
        })
        .collect();
    let releases = index
        .releases()
        .into_iter()
        .map(|state| {
            let newest = state.newest();
            let lock = lock_state(index, config, state);
            let (mut drifted_fields, mut missing_objects, mut unreadable_objects) = (0, 0, 0);
            let mut unproven_objects = 0;
            for object in state.objects.iter().flatten() {
                match live.get(&ObjectId::of(object)) {
                    Some(Live::Found(value))
                        if !crate::core::live_owner(value)
                            .is_some_and(|owner| owner.is(&state.key)) =>
                    {
                        unproven_objects += 1;
                    }
                    Some(Live::Found(value)) => {
                        let ignore = index.ignored_paths(config, object);
                        let ignore: Vec<&str> = ignore.iter().map(String::as_str).collect();
                        drifted_fields += drift(schema, object, value, &ignore).len();
                    }
                    Some(Live::Missing) => missing_objects += 1,
                    Some(Live::Unreadable(_)) | None => unreadable_objects += 1,
                }
            }
            ReleaseStatus {
                name: state.key.name.clone(),
                namespace: state.key.namespace.clone(),
                revision: newest.map_or(0, |r| r.revision),
                status: state.status().to_string(),
                chart: newest.map(|r| r.chart.clone()).unwrap_or_default(),
                locked: lock.locked,
                mode: lock.mode,
                reason: lock.reason,
                objects: state.objects.as_ref().map(Vec::len),
                drifted_fields,
                missing_objects,
                unreadable_objects,
                unproven_objects,
                refused_objects: 0,
                fights: 0,
            }
        })
        .collect();
    StatusReport {
        releases,
        exceptions,
        writer_rules: Vec::new(),
    }
}

/// The writer rules (from the writers ConfigMap, `--config`) that cover each release of the
/// report, in its order, expired ones marked.
pub(crate) fn add_writer_rules(report: &mut StatusReport, rules: &[WriterRule], now: i64) {
    for r in &report.releases {
        for rule in rules_of_release(rules, &r.namespace, &r.name) {
            let w = &rule.writers;
            let writers = w
                .service_accounts
                .iter()
                .chain(&w.users)
                .cloned()
                .chain(w.groups.iter().map(|g| format!("group:{g}")))
                .chain(w.field_manager.iter().map(|m| format!("manager:{m}")))
                .collect();
            let o = &rule.objects;
            let kind = if o.group.is_empty() {
                o.kind.clone()
            } else {
                format!("{}.{}", o.kind, o.group)
            };
            let objects = if o.names.is_empty() {
                format!("{kind} (all)")
            } else {
                format!("{kind} {}", o.names.join(","))
            };
            report.writer_rules.push(WriterRuleStatus {
                release: format!("{}/{}", r.namespace, r.name),
                id: rule.id.clone(),
                writers,
                objects,
                paths: rule.paths.clone(),
                until: rule.until.clone(),
                expired: rule_expired(rule, now),
            });
        }
    }
}

/// What the reverter said about the releases, from its Warning Events: refusals
/// (`AuthorLacksRights`, `UnknownAuthor`, on the newest revision's Secret, naming the object as
/// the related one) and fights (`RevertFight`, on the object). Events expire (an hour by
/// default): older ones are not counted.
pub(crate) fn add_notices(
    report: &mut StatusReport,
    index: &Index,
    events: &[k8s_openapi::api::core::v1::Event],
) {
    use std::collections::{BTreeMap, BTreeSet};
    let mut refused: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    let mut fights: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for event in events {
        let involved = &event.involved_object;
        let namespace = involved.namespace.clone().unwrap_or_default();
        let name = involved.name.clone().unwrap_or_default();
        match event.reason.as_deref().and_then(Reason::named) {
            Some(Reason::AuthorLacksRights | Reason::UnknownAuthor) => {
                // Only the newest revision's Secret speaks for the release now.
                let Some(state) = index.releases().into_iter().find(|s| {
                    s.newest().is_some_and(|r| {
                        r.secret.namespace == namespace
                            && r.secret.name == name
                            && involved.kind.as_deref() == Some(r.secret.driver.kind())
                    })
                }) else {
                    continue;
                };
                let object = event
                    .related
                    .as_ref()
                    .map(|r| format!("{:?}/{:?}/{:?}", r.kind, r.namespace, r.name))
                    .unwrap_or_default();
                refused
                    .entry((state.key.namespace.clone(), state.key.name.clone()))
                    .or_default()
                    .insert(object);
            }
            Some(Reason::RevertFight) => {
                let api_version = involved.api_version.as_deref().unwrap_or_default();
                let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
                let kind = involved.kind.clone().unwrap_or_default();
                let ns = (!namespace.is_empty()).then_some(namespace.as_str());
                if let Some(object) = index.lookup(group, &kind, ns, &name) {
                    fights
                        .entry((
                            object.release.namespace.clone(),
                            object.release.name.clone(),
                        ))
                        .or_default()
                        .insert(format!("{kind}/{namespace}/{name}"));
                }
            }
            _ => {}
        }
    }
    for release in &mut report.releases {
        let key = (release.namespace.clone(), release.name.clone());
        release.refused_objects = refused.get(&key).map_or(0, BTreeSet::len);
        release.fights = fights.get(&key).map_or(0, BTreeSet::len);
    }
}

pub(crate) fn render_text(report: &StatusReport) -> String {
    if report.releases.is_empty() {
        return "No Helm releases found.\n".into();
    }
    let mut rows = vec![[
        "NAMESPACE",
        "RELEASE",
        "REVISION",
        "STATUS",
        "LOCKED",
        "MODE",
        "OBJECTS",
        "DRIFTED",
        "WHY NOT LOCKED",
    ]
    .map(String::from)
    .to_vec()];
    for r in &report.releases {
        let mut drift = r.drifted_fields.to_string();
        if r.missing_objects > 0 {
            drift.push_str(&format!(" +{} missing", r.missing_objects));
        }
        if r.unreadable_objects > 0 {
            drift.push_str(&format!(" ({} unreadable)", r.unreadable_objects));
        }
        if r.unproven_objects > 0 {
            drift.push_str(&format!(" ({} not the release's)", r.unproven_objects));
        }
        if r.refused_objects > 0 {
            drift.push_str(&format!(
                " ({} not reverted: the revision's author may not write them or is not known)",
                r.refused_objects
            ));
        }
        if r.fights > 0 {
            drift.push_str(&format!(" ({} left to another writer)", r.fights));
        }
        rows.push(vec![
            r.namespace.clone(),
            r.name.clone(),
            r.revision.to_string(),
            r.status.clone(),
            if r.locked { "yes" } else { "no" }.into(),
            r.mode.clone(),
            r.objects.map_or("?".into(), |n| n.to_string()),
            drift,
            r.reason.clone().unwrap_or_default(),
        ]);
    }
    let mut out = super::table(&rows);
    if !report.exceptions.is_empty() {
        let mut rows = vec![["EXCEPTION", "RELEASE", "FOR", "PATHS", "LEFT", "REASON"]
            .map(String::from)
            .to_vec()];
        for e in &report.exceptions {
            let who: Vec<String> = e
                .users
                .iter()
                .cloned()
                .chain(e.groups.iter().map(|g| format!("group:{g}")))
                .collect();
            rows.push(vec![
                e.name.clone(),
                e.release.clone(),
                who.join(","),
                if e.paths.is_empty() {
                    "*".into()
                } else {
                    e.paths.join(",")
                },
                humantime::format_duration(std::time::Duration::from_secs(
                    e.seconds_left.max(0) as u64
                ))
                .to_string(),
                e.reason.clone(),
            ]);
        }
        out.push('\n');
        out.push_str(&super::table(&rows));
    }
    if !report.writer_rules.is_empty() {
        let mut rows = vec![[
            "WRITER RULE",
            "RELEASE",
            "WRITERS",
            "OBJECTS",
            "PATHS",
            "UNTIL",
        ]
        .map(String::from)
        .to_vec()];
        for w in &report.writer_rules {
            let until = match (&w.until, w.expired) {
                (Some(until), true) => format!("{until} (expired)"),
                (Some(until), false) => until.clone(),
                (None, _) => "-".into(),
            };
            rows.push(vec![
                w.id.clone(),
                w.release.clone(),
                w.writers.join(","),
                w.objects.clone(),
                w.paths.join(","),
                until,
            ]);
        }
        out.push('\n');
        out.push_str(&super::table(&rows));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Status;
    use crate::plugin::tests::{index, live, live_deployment};

    #[test]
    fn the_writer_rules_of_each_release_are_listed_expired_ones_marked() {
        let index = index(Status::Deployed);
        let live = live(&index, live_deployment(3, "nginx:1.25"));
        let mut report = status(&index, &Config::default(), &Schema::builtin(), &live, 0);
        let rule = |id: &str, ns: &str, until: Option<&str>| -> WriterRule {
            serde_saphyr::from_str(&format!(
                "id: {id}\nwriters: {{serviceAccounts: [ops/scaler], fieldManager: scaler}}\nobjects: {{release: {{namespace: {ns}, name: shop}}, group: apps, kind: Deployment, names: [web]}}\npaths: [/spec/replicas]\nreason: r\n{}",
                until.map(|u| format!("until: \"{u}\"\n")).unwrap_or_default()
            ))
            .unwrap()
        };
        let rules = [
            rule("scaler", "shop", None),
            rule("old", "shop", Some("2020-01-01T00:00:00Z")),
            rule("elsewhere", "bank", None),
        ];
        add_writer_rules(&mut report, &rules, 1_800_000_000);
        let ids: Vec<&str> = report.writer_rules.iter().map(|w| w.id.as_str()).collect();
        assert_eq!(ids, ["old", "scaler"]);
        assert!(report.writer_rules[0].expired && !report.writer_rules[1].expired);
        let text = render_text(&report);
        assert!(text.contains("WRITER RULE"), "{text}");
        assert!(text.contains("2020-01-01T00:00:00Z (expired)"), "{text}");
        assert!(
            text.contains("ops/scaler,manager:scaler  Deployment.apps web  /spec/replicas"),
            "{text}"
        );
        // No rules: the report is as before, and its JSON has no writerRules.
        let plain = status(&index, &Config::default(), &Schema::builtin(), &live, 0);
        assert!(!render_text(&plain).contains("WRITER RULE"));
        assert!(serde_json::to_value(&plain)
            .unwrap()
            .get("writerRules")
            .is_none());
    }

    #[test]
    fn a_deployed_release_is_locked_and_its_drift_counted() {
        let index = index(Status::Deployed);
        let schema = Schema::builtin();
        let clean = status(
            &index,
            &Config::default(),
            &schema,
            &live(&index, live_deployment(3, "nginx:1.25")),
            0,
        );
        let r = &clean.releases[0];
        assert_eq!((r.locked, r.objects, r.drifted_fields), (true, Some(3), 0));
        let drifted = status(
            &index,
            &Config::default(),
            &schema,
            &live(&index, live_deployment(7, "nginx:1.27")),
            0,
        );
        assert_eq!(drifted.releases[0].drifted_fields, 2);
        let text = render_text(&drifted);
        assert!(
            text.starts_with("NAMESPACE  RELEASE  REVISION  STATUS"),
            "{text}"
        );
        assert!(
            text.contains("shop       shop     2         deployed  yes     deny  3        2"),
            "{text}"
        );
    }

    /// An object the release renders that does not carry its annotations is not the release's:
    /// shown apart, its differences not counted as drift.
    #[test]
    fn an_object_without_the_releases_annotations_is_shown_not_counted() {
        let index = index(Status::Deployed);
        let mut theirs = live_deployment(7, "nginx:1.27");
        theirs["metadata"]["annotations"] = serde_json::json!({"meta.helm.sh/release-name": "other", "meta.helm.sh/release-namespace": "shop"});
        let report = status(
            &index,
            &Config::default(),
            &Schema::builtin(),
            &live(&index, theirs),
            0,
        );
        let r = &report.releases[0];
        assert_eq!((r.drifted_fields, r.unproven_objects), (0, 1));
        assert!(
            render_text(&report).contains("0 (1 not the release's)"),
            "{}",
            render_text(&report)
        );
    }

    /// Open LockExceptions are listed with their time left; closed ones are not.
    #[test]
    fn open_exceptions_are_listed_with_their_time_left() {
        let mut index = index(Status::Deployed);
        let exception = |name: &str, until| crate::core::Exception {
            name: format!("shop/{name}"),
            release: crate::core::ReleaseKey::new("shop", "shop"),
            users: vec!["oncall".into()],
            groups: vec!["sre".into()],
            objects: vec![],
            paths: vec!["/spec/replicas".into()],
            reason: "INC-42".into(),
            opened: 0,
            until,
        };
        index.replace_exceptions([exception("open", 1_800), exception("closed", 500)]);
        let report = status(
            &index,
            &Config::default(),
            &Schema::builtin(),
            &LiveObjects::new(),
            600,
        );
        assert_eq!(report.exceptions.len(), 1);
        assert_eq!(
            (
                report.exceptions[0].name.as_str(),
                report.exceptions[0].seconds_left
            ),
            ("shop/open", 1_200)
        );
        let text = render_text(&report);
        assert!(
            text.contains("shop/open  shop/shop  oncall,group:sre  /spec/replicas  20m   INC-42"),
            "{text}"
        );
    }

    #[test]
    fn pending_releases_say_why_they_are_not_locked() {
        let schema = Schema::builtin();
        for (status_now, why) in [
            (Status::PendingUpgrade, "Helm is at work (pending-upgrade)"),
            (Status::Uninstalling, "Helm is at work (uninstalling)"),
        ] {
            let index = index(status_now);
            let mut objects = live(&index, live_deployment(3, "nginx:1.25"));
            objects.retain(|id, _| id.kind != "ConfigMap");
            let report = status(&index, &Config::default(), &schema, &objects, 0);
            let r = &report.releases[0];
            assert!(!r.locked);
            assert!(r.reason.as_deref().unwrap().contains(why), "{:?}", r.reason);
            assert_eq!(r.unreadable_objects, 1);
            assert!(render_text(&report).contains(why));
        }
    }

    #[test]
    fn the_recorded_failed_upgrade_stays_locked() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/cluster-capture/releases/03-after-upgrade-after-drift.json");
        let loaded = crate::source::files::load(&[path]);
        let index = Index::from_secrets(loaded.secrets);
        let report = status(
            &index,
            &Config::default(),
            &Schema::builtin(),
            &LiveObjects::new(),
            0,
        );
        let shop = report.releases.iter().find(|r| r.name == "shop").unwrap();
        assert_eq!(
            (shop.revision, shop.status.as_str(), shop.locked),
            (3, "failed", true)
        );
        assert_eq!(shop.reason, None);
    }

    /// The reverter's refusals and fights show as the release's, from its Warning Events;
    /// refusals about an older revision's Secret and events of other objects do not.
    #[test]
    fn refusals_and_fights_are_shown_from_the_reverters_events() {
        use k8s_openapi::api::core::v1::{Event, ObjectReference};
        let index = index(Status::Deployed);
        let reference = |api_version: &str, kind: &str, name: &str| ObjectReference {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
            namespace: Some("shop".into()),
            name: Some(name.into()),
            ..Default::default()
        };
        let event =
            |reason: &str, involved: ObjectReference, related: Option<ObjectReference>| Event {
                reason: Some(reason.into()),
                involved_object: involved,
                related,
                ..Default::default()
            };
        let secret = |revision: u64| {
            reference(
                "v1",
                "Secret",
                &format!("sh.helm.release.v1.shop.v{revision}"),
            )
        };
        let events = [
            event(
                "AuthorLacksRights",
                secret(2),
                Some(reference("apps/v1", "Deployment", "web")),
            ),
            // The same object again, and an older revision: not counted twice, nor at all.
            event(
                "AuthorLacksRights",
                secret(2),
                Some(reference("apps/v1", "Deployment", "web")),
            ),
            event(
                "UnknownAuthor",
                secret(1),
                Some(reference("v1", "ConfigMap", "cfg")),
            ),
            event(
                "RevertFight",
                reference("apps/v1", "Deployment", "web"),
                None,
            ),
            event(
                "RevertFight",
                reference("apps/v1", "Deployment", "not-the-charts"),
                None,
            ),
        ];
        let mut report = status(
            &index,
            &Config::default(),
            &Schema::builtin(),
            &live(&index, live_deployment(3, "nginx:1.25")),
            0,
        );
        add_notices(&mut report, &index, &events);
        let r = &report.releases[0];
        assert_eq!((r.refused_objects, r.fights), (1, 1));
        let text = render_text(&report);
        assert!(
            text.contains("(1 not reverted: the revision's author may not write them or is not known) (1 left to another writer)"),
            "{text}"
        );
    }
}
