use super::*;
use crate::learned::RuleUse;

const DAY: i64 = 86_400;
/// 2026-12-01T00:00:00Z.
const NOW: i64 = 1_796_083_200;

fn entry(writer: &str, sa: Option<&str>, manager: &str, kind: &str, path: &str) -> LearnedEntry {
    LearnedEntry {
        writer: writer.into(),
        service_account: sa.map(str::to_string),
        field_manager: Some(manager.into()),
        operation: "UPDATE".into(),
        subresource: None,
        release: "shop/shop".into(),
        group: "apps".into(),
        kind: kind.into(),
        path: path.into(),
        from_pod: true,
        decision: "warn".into(),
        count: 4,
        objects: vec!["web".into()],
        distinct_objects: 1,
        first_seen: NOW - 6 * DAY,
        last_seen: NOW - DAY,
    }
}

fn sa(name: &str) -> String {
    format!("system:serviceaccount:ops:{name}")
}

/// The week's evidence of the brief: two controllers in pods, a person's `kubectl patch`, a
/// token used from outside a pod, a Secret written by a controller, and a path a rule covers.
fn evidence() -> Vec<Learned> {
    let scaler = entry(
        &sa("scaler"),
        Some("ops/scaler"),
        "scaler",
        "Deployment",
        "/spec/replicas",
    );
    let mut scaler_sub = scaler.clone();
    scaler_sub.subresource = Some("scale".into());
    scaler_sub.objects = vec!["api".into()];
    let mut annotator = entry(
        &sa("annotator"),
        Some("ops/annotator"),
        "annotator",
        "Deployment",
        "/spec/template/spec/containers/[name=web]/image",
    );
    annotator.objects = vec!["web".into(), "worker".into()];
    annotator.distinct_objects = 25;
    let mut human = entry(
        "alice@example.com",
        None,
        "kubectl-patch",
        "Deployment",
        "/spec/replicas",
    );
    human.count = 1;
    let mut stolen = entry(
        &sa("scaler"),
        Some("ops/scaler"),
        "scaler",
        "Deployment",
        "/spec/replicas",
    );
    stolen.from_pod = false;
    let mut secret = entry(
        &sa("rotator"),
        Some("ops/rotator"),
        "rotator",
        "Secret",
        "/data",
    );
    secret.group = String::new();
    secret.objects = vec!["db-password".into()];
    let covered = entry(
        &sa("scaler"),
        Some("ops/scaler"),
        "scaler",
        "Deployment",
        "/spec/paused",
    );
    vec![Learned {
        namespace: "shop".into(),
        entries: vec![
            scaler, scaler_sub, annotator, human, stolen, secret, covered,
        ],
        rule_uses: BTreeMap::from([
            (
                "old-rule".to_string(),
                RuleUse {
                    count: 9,
                    last_used: NOW - 40 * DAY,
                },
            ),
            (
                "paused".to_string(),
                RuleUse {
                    count: 3,
                    last_used: NOW - DAY,
                },
            ),
        ]),
    }]
}

fn rule(id: &str, sa: &str, kind: &str, paths: &[&str], until: Option<&str>) -> WriterRule {
    WriterRule {
        id: id.into(),
        writers: Writers {
            service_accounts: vec![sa.into()],
            ..Writers::default()
        },
        objects: Objects {
            release: ReleaseMatch {
                namespace: Some("shop".into()),
                name: Some("shop".into()),
                selector: None,
            },
            group: "apps".into(),
            kind: kind.into(),
            names: Vec::new(),
        },
        paths: paths.iter().map(|p| p.to_string()).collect(),
        until: until.map(str::to_string),
        reason: "test".into(),
        accepted_by: None,
    }
}

fn rules() -> Vec<WriterRule> {
    vec![
        rule(
            "paused",
            "ops/scaler",
            "Deployment",
            &["/spec/paused"],
            None,
        ),
        rule(
            "old-rule",
            "ops/gone",
            "Deployment",
            &["/spec/replicas"],
            None,
        ),
        rule(
            "ended",
            "ops/scaler",
            "Deployment",
            &["/spec/replicas"],
            Some("2026-11-01T00:00:00Z"),
        ),
    ]
}

const TEMPLATE: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: {{ .Values.replicaCount }}\n";

fn charts() -> BTreeMap<String, ChartFiles> {
    let manifest = "---\n# Source: shop/templates/deployment.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n";
    BTreeMap::from([(
        "shop/shop".to_string(),
        ChartFiles {
            chart: "shop".into(),
            manifest: manifest.into(),
            templates: BTreeMap::from([(
                "templates/deployment.yaml".to_string(),
                TEMPLATE.to_string(),
            )]),
            crds: Vec::new(),
        },
    )])
}

fn run(
    learned: &[Learned],
    rules: &[WriterRule],
    charts: &BTreeMap<String, ChartFiles>,
) -> Proposals {
    propose(&LearnInput {
        learned,
        rules,
        charts,
        now: NOW,
        since: None,
        unused_for: DEFAULT_UNUSED_FOR,
    })
}

fn proposed<'p>(p: &'p Proposals, sa: &str, kind: &str) -> &'p Proposal {
    p.proposed
        .iter()
        .find(|p| p.rule.writers.service_accounts == [sa] && p.rule.objects.kind == kind)
        .unwrap_or_else(|| panic!("no proposal for {sa} {kind}: {p:#?}"))
}

#[test]
fn controllers_in_pods_are_proposed_no_wider_than_seen() {
    let p = run(&evidence(), &rules(), &charts());
    assert_eq!(p.proposed.len(), 3, "{:#?}", p.proposed);
    let scaler = proposed(&p, "ops/scaler", "Deployment");
    assert_eq!(scaler.rule.paths, ["/spec/replicas"]);
    assert_eq!(scaler.rule.objects.names, ["api", "web"]);
    assert_eq!(scaler.rule.writers.field_manager.as_deref(), Some("scaler"));
    assert_eq!(
        scaler.rule.objects.release.namespace.as_deref(),
        Some("shop")
    );
    assert_eq!(scaler.rule.objects.release.name.as_deref(), Some("shop"));
    assert_eq!(scaler.evidence.count, 8);
    assert_eq!(scaler.evidence.operations, ["UPDATE", "UPDATE/scale"]);
    assert_eq!(
        (scaler.evidence.first_seen, scaler.evidence.last_seen),
        (NOW - 6 * DAY, NOW - DAY)
    );
    assert!(scaler.rule.reason.starts_with("learned: 8 write(s) (UPDATE, UPDATE/scale) by ops/scaler (field manager scaler) to Deployment.apps api, web of release shop/shop from 2026-11-25T00:00:00Z to 2026-11-30T00:00:00Z"), "{}", scaler.rule.reason);
    assert!(scaler.rule.accepted_by.is_none() && scaler.rule.until.is_none());
    assert!(
        scaler.rule.id.starts_with("shop-deployment-scaler-"),
        "{}",
        scaler.rule.id
    );
    // More objects written than names kept: the rule names those kept, and says so.
    let annotator = proposed(&p, "ops/annotator", "Deployment");
    assert_eq!(annotator.rule.objects.names, ["web", "worker"]);
    assert_eq!(annotator.evidence.distinct_objects, 25);
    assert!(
        annotator
            .rule
            .reason
            .contains("2 of 25 objects written are named"),
        "{}",
        annotator.rule.reason
    );
    assert!(render_text(&p, NOW).contains("2 of 25 objects written are named"));
}

#[test]
fn a_secret_is_proposed_by_its_data_and_never_a_value() {
    let p = run(&evidence(), &rules(), &charts());
    let secret = proposed(&p, "ops/rotator", "Secret");
    assert_eq!(secret.rule.paths, ["/data"]);
    assert_eq!(secret.rule.objects.group, "");
    assert_eq!(secret.rule.objects.names, ["db-password"]);
    assert!(secret.rule.id.starts_with("shop-secret-rotator-"));
}

#[test]
fn a_path_a_rule_in_force_covers_is_not_proposed_again_but_an_expired_rule_covers_nothing() {
    let p = run(&evidence(), &rules(), &charts());
    let scaler = proposed(&p, "ops/scaler", "Deployment");
    // `paused` covers /spec/paused; `ended` (expired) would cover /spec/replicas.
    assert!(!scaler.rule.paths.contains(&"/spec/paused".to_string()));
    assert!(scaler.rule.paths.contains(&"/spec/replicas".to_string()));
    // Control: without the rule, the path is proposed.
    let p = run(&evidence(), &[], &charts());
    let scaler = proposed(&p, "ops/scaler", "Deployment");
    assert_eq!(scaler.rule.paths, ["/spec/paused", "/spec/replicas"]);
    // A rule for another service account covers nothing of this one's.
    let other = [rule("x", "ops/other", "Deployment", &["/spec/*"], None)];
    let p = run(&evidence(), &other, &charts());
    assert_eq!(
        proposed(&p, "ops/scaler", "Deployment").rule.paths,
        ["/spec/paused", "/spec/replicas"]
    );
    // `*` matches one segment.
    let star = [rule("y", "ops/scaler", "Deployment", &["/spec/*"], None)];
    let p = run(&evidence(), &star, &charts());
    assert!(p
        .proposed
        .iter()
        .all(|p| p.rule.writers.service_accounts != ["ops/scaler"]));
}

#[test]
fn a_person_is_not_proposed_and_is_shown_the_helm_upgrade() {
    let p = run(&evidence(), &rules(), &charts());
    assert_eq!(p.not_proposed.len(), 1, "{:#?}", p.not_proposed);
    let alice = &p.not_proposed[0];
    assert_eq!(alice.writer, "alice@example.com");
    assert_eq!(alice.field_manager.as_deref(), Some("kubectl-patch"));
    assert_eq!(alice.paths, ["/spec/replicas"]);
    assert_eq!(
        alice.instead,
        "helm upgrade shop <shop chart> -n shop --reuse-values --set replicaCount=<value>"
    );
    assert!(p.proposed.iter().all(|p| p
        .rule
        .writers
        .service_accounts
        .iter()
        .all(|s| !s.contains("alice"))));
    // Without the chart's files: the general advice.
    let p = run(&evidence(), &rules(), &BTreeMap::new());
    assert_eq!(
        p.not_proposed[0].instead,
        "change it in the chart's values and run helm upgrade"
    );
    // A service account run through kubectl is a person at work too.
    let mut by_hand = entry(
        &sa("deployer"),
        Some("ops/deployer"),
        "kubectl-edit",
        "Deployment",
        "/spec/replicas",
    );
    by_hand.objects = vec!["web".into()];
    let learned = [Learned {
        namespace: "shop".into(),
        entries: vec![by_hand],
        ..Learned::default()
    }];
    let p = run(&learned, &[], &charts());
    assert!(p.proposed.is_empty());
    assert_eq!(p.not_proposed[0].writer, sa("deployer"));
}

#[test]
fn a_token_used_from_outside_a_pod_is_flagged_never_proposed() {
    let p = run(&evidence(), &rules(), &charts());
    assert_eq!(p.flagged.len(), 1);
    let f = &p.flagged[0];
    assert_eq!(f.service_account, "ops/scaler");
    assert!(
        f.warning.contains("a stolen token looks like this"),
        "{}",
        f.warning
    );
    // Its writes do not widen the proposal of the same account in a pod (4 of its 8 writes
    // were from the pod's token via the subresource, 4 on the object: none from outside).
    assert_eq!(proposed(&p, "ops/scaler", "Deployment").evidence.count, 8);
    // Control: the same writes only from outside a pod propose nothing.
    let mut alone = entry(
        &sa("scaler"),
        Some("ops/scaler"),
        "scaler",
        "Deployment",
        "/spec/replicas",
    );
    alone.from_pod = false;
    let learned = [Learned {
        namespace: "shop".into(),
        entries: vec![alone],
        ..Learned::default()
    }];
    let p = run(&learned, &[], &charts());
    assert!(p.proposed.is_empty() && p.flagged.len() == 1);
}

#[test]
fn a_delete_is_not_proposed() {
    let mut delete = entry(
        &sa("cleaner"),
        Some("ops/cleaner"),
        "cleaner",
        "Deployment",
        "",
    );
    delete.operation = "DELETE".into();
    let learned = [Learned {
        namespace: "shop".into(),
        entries: vec![delete],
        ..Learned::default()
    }];
    let p = run(&learned, &[], &charts());
    assert!(p.proposed.is_empty());
    assert!(p.not_proposed[0].why.starts_with("a delete"));
}

#[test]
fn unused_and_expired_rules_are_listed() {
    let p = run(&evidence(), &rules(), &charts());
    assert_eq!(p.unused.len(), 1, "{:#?}", p.unused);
    assert_eq!(p.unused[0].id, "old-rule");
    assert_eq!(
        (p.unused[0].uses, p.unused[0].last_used),
        (9, Some(NOW - 40 * DAY))
    );
    assert_eq!(
        p.expired,
        [ExpiredRule {
            id: "ended".into(),
            until: "2026-11-01T00:00:00Z".into()
        }]
    );
    // A rule with no use recorded: proposed for removal only once the evidence is older than
    // the period (here 40 days of it), not after a week.
    let never = [rule(
        "never",
        "ops/x",
        "Deployment",
        &["/spec/replicas"],
        None,
    )];
    assert_eq!(run(&evidence(), &never, &charts()).unused[0].id, "never");
    let week: Vec<Learned> = evidence()
        .into_iter()
        .map(|l| Learned {
            rule_uses: BTreeMap::new(),
            ..l
        })
        .collect();
    assert!(run(&week, &never, &charts()).unused.is_empty());
    // A rule used yesterday stays.
    assert!(p.unused.iter().all(|u| u.id != "paused"));
}

#[test]
fn since_keeps_only_recent_evidence() {
    let mut old = evidence();
    old[0]
        .entries
        .iter_mut()
        .for_each(|e| e.last_seen = NOW - 20 * DAY);
    let p = propose(&LearnInput {
        learned: &old,
        rules: &[],
        charts: &BTreeMap::new(),
        now: NOW,
        since: Some(7 * DAY),
        unused_for: DEFAULT_UNUSED_FOR,
    });
    assert!(p.proposed.is_empty() && p.not_proposed.is_empty() && p.flagged.is_empty());
    // Control: within the window they are all there.
    let p = propose(&LearnInput {
        since: Some(30 * DAY),
        learned: &old,
        rules: &[],
        charts: &BTreeMap::new(),
        now: NOW,
        unused_for: DEFAULT_UNUSED_FOR,
    });
    assert_eq!(p.proposed.len(), 3);
}

#[test]
fn ids_are_stable_across_runs_and_reordered_input_and_never_clash() {
    let a = run(&evidence(), &rules(), &charts());
    let b = run(&evidence(), &rules(), &charts());
    let mut reordered = evidence();
    reordered[0].entries.reverse();
    let c = run(&reordered, &rules(), &charts());
    let ids = |p: &Proposals| {
        p.proposed
            .iter()
            .map(|p| p.rule.id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&a), ids(&b));
    assert_eq!(ids(&a), ids(&c));
    assert_eq!(a, c);
    // Same release, kind and account name but other writers or paths: other ids.
    let mut twin = entry(
        &sa("scaler"),
        Some("other/scaler"),
        "scaler",
        "Deployment",
        "/spec/replicas",
    );
    twin.objects = vec!["web".into()];
    let mut learned = evidence();
    learned[0].entries.push(twin);
    let d = run(&learned, &rules(), &charts());
    let all = ids(&d);
    let unique: BTreeSet<_> = all.iter().collect();
    assert_eq!(all.len(), unique.len(), "{all:?}");
    for id in &all {
        assert!(
            id.len() <= 63
                && id
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{id}"
        );
    }
    // A long name is trimmed to 63.
    let mut long = entry(
        &sa("scaler"),
        Some("ops/scaler"),
        "scaler",
        "Deployment",
        "/spec/replicas",
    );
    long.release = format!("shop/{}", "Very_Long.".repeat(10));
    let learned = [Learned {
        namespace: "shop".into(),
        entries: vec![long],
        ..Learned::default()
    }];
    let id = &run(&learned, &[], &charts()).proposed[0].rule.id;
    assert!(
        id.len() <= 63 && id.starts_with("very-long-very-long") && !id.contains("--"),
        "{id}"
    );
}

#[test]
fn only_the_named_proposals_are_accepted_and_the_snippet_reads_back() {
    let p = run(&evidence(), &rules(), &charts());
    let ids: Vec<String> = p
        .proposed
        .iter()
        .take(2)
        .map(|p| p.rule.id.clone())
        .collect();
    let accepted = accept(
        &p,
        &ids,
        "alice@example.com",
        Some("2027-03-01T00:00:00Z"),
        Some("INC-1"),
    )
    .unwrap();
    assert_eq!(accepted.len(), 2);
    for (rule, proposal) in accepted.iter().zip(&p.proposed) {
        assert_eq!(rule.id, proposal.rule.id);
        assert_eq!(rule.accepted_by.as_deref(), Some("alice@example.com"));
        assert_eq!(rule.until.as_deref(), Some("2027-03-01T00:00:00Z"));
        assert_eq!(rule.reason, format!("INC-1 ({})", proposal.rule.reason));
        assert_eq!(rule.paths, proposal.rule.paths);
    }
    #[derive(serde::Deserialize)]
    struct Values {
        writers: Vec<WriterRule>,
    }
    let snippet = values_snippet(&accepted);
    assert!(snippet.starts_with("writers:"), "{snippet}");
    let back: Values = serde_saphyr::from_str(&snippet).unwrap();
    assert_eq!(back.writers, accepted);
    let one: WriterRule = serde_saphyr::from_str(&rule_yaml(&accepted[0])).unwrap();
    assert_eq!(one, accepted[0]);
    // Plain accept: the proposal as it is, with who accepted it.
    let plain = accept(&p, &ids[..1], "bob", None, None).unwrap();
    assert_eq!(
        plain[0],
        WriterRule {
            accepted_by: Some("bob".into()),
            ..p.proposed[0].rule.clone()
        }
    );
    // Nothing is accepted unless named, and an unknown id is an error naming it.
    assert_eq!(
        accept(&p, &[], "bob", None, None),
        Err(AcceptError::NoneNamed)
    );
    let wrong = vec![
        ids[0].clone(),
        "shop-deployment-nobody-00000000".to_string(),
    ];
    let error = accept(&p, &wrong, "bob", None, None).unwrap_err();
    assert_eq!(
        error,
        AcceptError::Unknown(vec!["shop-deployment-nobody-00000000".into()])
    );
    assert!(error
        .to_string()
        .contains("shop-deployment-nobody-00000000"));
}

#[test]
fn the_report_lists_each_part_and_serializes() {
    let p = run(&evidence(), &rules(), &charts());
    let text = render_text(&p, NOW);
    for part in [
        "Proposed rules (accept with: kubectl locker learn accept ID...):",
        "Not proposed:",
        "alice@example.com (field manager kubectl-patch)",
        "instead:  helm upgrade shop <shop chart> -n shop --reuse-values --set replicaCount=<value>",
        "Flagged (never proposed):",
        "Proposed for removal",
        "old-rule: no write has used it for 40d",
        "Expired (they match nothing; remove them):",
        "ended: until 2026-11-01T00:00:00Z",
    ] {
        assert!(text.contains(part), "{part:?} not in\n{text}");
    }
    let json = serde_json::to_value(&p).unwrap();
    assert!(json["proposed"][0]["rule"]["id"].is_string());
    assert!(json["flagged"][0]["warning"].is_string());
    assert_eq!(
        render_text(&Proposals::default(), NOW),
        "Proposed rules: none.\n"
    );
}

#[test]
fn rules_of_a_release_and_expiry() {
    let all = rules();
    let ids: Vec<&str> = rules_of_release(&all, "shop", "shop")
        .iter()
        .map(|r| r.id.as_str())
        .collect();
    assert_eq!(ids, ["ended", "old-rule", "paused"]);
    assert!(rules_of_release(&all, "other", "shop").is_empty());
    assert!(rule_expired(&all[2], NOW) && !rule_expired(&all[0], NOW));
    let mut bad = all[0].clone();
    bad.until = Some("next tuesday".into());
    assert!(rule_expired(&bad, NOW));
}

#[test]
fn times_are_written_in_rfc3339() {
    assert_eq!(rfc3339(NOW), "2026-12-01T00:00:00Z");
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339(951_782_400 + 3_661), "2000-02-29T01:01:01Z");
}

/// "Covered" is the rule's own matching, the one admission uses: a rule path above the written
/// one covers it (admission lets it through), so it is not proposed again; a path no rule may
/// give (owner references) is never covered, whatever the rule says.
#[test]
fn a_rule_covers_what_admission_lets_through_and_nothing_else() {
    let annotated = |p: &Proposals| {
        p.proposed
            .iter()
            .any(|p| p.rule.writers.service_accounts == ["ops/annotator"])
    };
    assert!(annotated(&run(&evidence(), &[], &charts())));
    let above = [rule(
        "template",
        "ops/annotator",
        "Deployment",
        &["/spec/template"],
        None,
    )];
    assert!(!annotated(&run(&evidence(), &above, &charts())));
    let mut owner = entry(
        &sa("scaler"),
        Some("ops/scaler"),
        "scaler",
        "Deployment",
        "/metadata/ownerReferences",
    );
    owner.objects = vec!["web".into()];
    let never = [rule(
        "owners",
        "ops/scaler",
        "Deployment",
        &["/metadata/ownerReferences"],
        None,
    )];
    let proposed_paths = |rules: &[WriterRule]| {
        let learned = [Learned {
            entries: vec![owner.clone()],
            ..evidence()[0].clone()
        }];
        let p = run(&learned, rules, &charts());
        p.proposed
            .iter()
            .flat_map(|p| p.rule.paths.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        proposed_paths(&never),
        proposed_paths(&[]),
        "a rule never gives owner references away, so it covers no such write"
    );
}
