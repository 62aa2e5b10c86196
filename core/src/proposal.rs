//! What `kubectl locker learn` proposes from what was learned ([`crate::learned`]): writer rules
//! never wider than what was seen, the writers it will not propose a rule for, and the rules in
//! force that no write uses any more or that have expired (issue 68).
//!
//! - A rule is proposed per (service account, field manager, release, group, kind) of the
//!   writes a pod made with a service account's token: its paths are exactly the locked paths
//!   written, its `objects.names` exactly the objects written (never empty), its writer narrowed
//!   to the field manager seen. Paths a rule in force already covers are not proposed again.
//! - Humans (a writer that is not a service account, or a `kubectl...` field manager) are not
//!   proposed: they are shown the `helm upgrade` that makes their change the right way.
//! - A service account's token used from outside a pod is flagged, never proposed: a stolen
//!   token looks like that.
//! - A rule in force no write has used for the `unused_for` period is proposed for removal; a
//!   rule past its `until` is listed as expired (it matches nothing).
//!
//! A proposal's id is deterministic: the same evidence gives the same id in any order and
//! across restarts, and two proposals never share one. Nothing is accepted unless named
//! ([`accept`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::chart::ChartFiles;
use crate::learned::{Learned, LearnedEntry};
use crate::release::ReleaseKey;
use crate::writer_rule::{Objects, ReleaseMatch, RuleObject, RuleWriter, WriterRule, Writers};

/// Default of `--unused-for`: 30 days.
pub const DEFAULT_UNUSED_FOR: i64 = 30 * 24 * 3600;

/// What proposals are computed from.
#[derive(Clone, Copy, Debug)]
pub struct LearnInput<'a> {
    /// Each namespace's evidence, read from the locker's own namespace only.
    pub learned: &'a [Learned],
    /// The rules in force now (the writers ConfigMap, `--config`, HelmReleases).
    pub rules: &'a [WriterRule],
    /// The chart files of the releases written to, by `namespace/name`: which values key a
    /// human's change is made with.
    pub charts: &'a BTreeMap<String, ChartFiles>,
    /// Unix seconds.
    pub now: i64,
    /// Only evidence last seen within this many seconds; `None`: all of it.
    pub since: Option<i64>,
    /// A rule no write used for this many seconds is proposed for removal.
    pub unused_for: i64,
}

/// Everything `learn` shows, each list in a stable order.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Proposals {
    pub proposed: Vec<Proposal>,
    /// Humans, and deletes: never proposed.
    pub not_proposed: Vec<NotProposed>,
    /// A service account's token used from outside a pod: never proposed.
    pub flagged: Vec<Flagged>,
    /// Rules in force no write used for the period.
    pub unused: Vec<UnusedRule>,
    /// Rules in force past their `until`: they match nothing.
    pub expired: Vec<ExpiredRule>,
}

/// A proposed rule and what it was learned from.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Proposal {
    pub rule: WriterRule,
    pub evidence: Evidence,
}

/// What writes a proposal, or a listed writer, was seen making.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Evidence {
    /// Writes seen.
    pub count: u64,
    /// `UPDATE`, `CREATE`, `DELETE`; `UPDATE/scale` for a subresource.
    pub operations: Vec<String>,
    /// The objects' names kept with the evidence.
    pub objects: Vec<String>,
    /// How many distinct objects were written, as the recorder counted them (at least
    /// `objects.len()`; more means names were not kept and the rule does not cover those).
    pub distinct_objects: u64,
    /// Unix seconds.
    pub first_seen: i64,
    pub last_seen: i64,
}

/// A writer no rule is proposed for, and what to do instead.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotProposed {
    pub writer: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_manager: Option<String>,
    /// `namespace/name`.
    pub release: String,
    pub group: String,
    pub kind: String,
    pub paths: Vec<String>,
    pub evidence: Evidence,
    /// Why it is not proposed.
    pub why: String,
    /// What makes the change the right way (the `helm upgrade`, when the values key is known).
    pub instead: String,
}

/// A service account's token used from outside a pod.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Flagged {
    pub writer: String,
    /// `namespace/name`.
    pub service_account: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_manager: Option<String>,
    pub release: String,
    pub group: String,
    pub kind: String,
    pub paths: Vec<String>,
    pub evidence: Evidence,
    pub warning: String,
}

/// A rule in force proposed for removal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnusedRule {
    pub id: String,
    /// Writes it let through, as recorded.
    pub uses: u64,
    /// Unix seconds; `None`: no use recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_used: Option<i64>,
    pub why: String,
}

/// A rule in force past its `until`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpiredRule {
    pub id: String,
    pub until: String,
}

/// What `learn` proposes from the evidence: see the module documentation.
pub fn propose(input: &LearnInput<'_>) -> Proposals {
    let cutoff = input.since.map(|s| input.now.saturating_sub(s));
    let entries: Vec<&LearnedEntry> = input
        .learned
        .iter()
        .flat_map(|l| &l.entries)
        .filter(|e| cutoff.is_none_or(|c| e.last_seen >= c))
        .collect();
    let (in_force, expired) = split_expired(input.rules, input.now);

    let mut proposed: BTreeMap<GroupKey, Group> = BTreeMap::new();
    let mut humans: BTreeMap<GroupKey, Group> = BTreeMap::new();
    let mut deletes: BTreeMap<GroupKey, Group> = BTreeMap::new();
    let mut flagged: BTreeMap<GroupKey, Group> = BTreeMap::new();
    for entry in entries {
        let key = GroupKey::of(entry);
        let into = match classify(entry) {
            Class::Flagged => &mut flagged,
            Class::Human => &mut humans,
            Class::Delete => &mut deletes,
            Class::Controller if in_force.iter().any(|r| covers(r, entry)) => continue,
            Class::Controller => &mut proposed,
        };
        into.entry(key).or_default().add(entry);
    }

    let mut proposals: Vec<Proposal> = proposed
        .into_iter()
        .map(|(key, group)| proposal(&key, group))
        .collect();
    proposals.sort_by(|a, b| a.rule.id.cmp(&b.rule.id));

    let mut not_proposed: Vec<NotProposed> = humans
        .into_iter()
        .map(|(key, group)| {
            let instead = helm_upgrade(&key, &group, input.charts);
            listed(key, group, "a person's change (not a controller in a pod): make it in the chart's values, where Helm keeps it".into(), instead)
        })
        .collect();
    not_proposed.extend(deletes.into_iter().map(|(key, group)| {
        listed(
            key,
            group,
            "a delete: a writer rule lets paths change, never an object go".into(),
            "remove it from the chart (or uninstall the release) and run helm upgrade".into(),
        )
    }));

    let flagged = flagged
        .into_iter()
        .map(|(key, group)| Flagged {
            warning: format!(
                "the token of service account {} was used from outside a pod: a stolen token looks like this. Find who holds it; no rule is proposed",
                key.service_account.as_deref().unwrap_or_default()
            ),
            writer: key.writer,
            service_account: key.service_account.unwrap_or_default(),
            field_manager: key.field_manager,
            release: key.release,
            group: key.group,
            kind: key.kind,
            paths: group.paths.into_iter().collect(),
            evidence: group.evidence,
        })
        .collect();

    Proposals {
        proposed: proposals,
        not_proposed,
        flagged,
        unused: unused(&in_force, input),
        expired,
    }
}

/// Why [`accept`] took nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AcceptError {
    #[error("no proposal has the id {}: kubectl locker learn lists the proposals", .0.join(", "))]
    Unknown(Vec<String>),
    #[error("name the proposals to accept: kubectl locker learn accept ID...")]
    NoneNamed,
}

/// The proposals named by `ids`, exactly those (an unknown id is an error naming it), as the
/// rules to write, with who accepted them, an optional end and an optional reason (put before
/// the evidence's sentence).
pub fn accept(
    proposals: &Proposals,
    ids: &[String],
    accepted_by: &str,
    until: Option<&str>,
    reason: Option<&str>,
) -> Result<Vec<WriterRule>, AcceptError> {
    if ids.is_empty() {
        return Err(AcceptError::NoneNamed);
    }
    let unknown: Vec<String> = ids
        .iter()
        .filter(|id| !proposals.proposed.iter().any(|p| &p.rule.id == *id))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        return Err(AcceptError::Unknown(unknown));
    }
    let named: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
    Ok(proposals
        .proposed
        .iter()
        .filter(|p| named.contains(p.rule.id.as_str()))
        .map(|p| {
            let mut rule = p.rule.clone();
            rule.accepted_by = (!accepted_by.is_empty()).then(|| accepted_by.to_string());
            rule.until = until.map(str::to_string);
            if let Some(reason) = reason.filter(|r| !r.trim().is_empty()) {
                rule.reason = format!("{reason} ({})", rule.reason);
            }
            rule
        })
        .collect())
}

/// The chart values snippet of accepted rules, for Git: `writers:` and the list.
pub fn values_snippet(rules: &[WriterRule]) -> String {
    #[derive(Serialize)]
    struct Values<'a> {
        writers: &'a [WriterRule],
    }
    serde_saphyr::to_string(&Values { writers: rules }).unwrap_or_default()
}

/// One rule as the writers ConfigMap holds it (the value of its key `<id>.yaml`).
pub fn rule_yaml(rule: &WriterRule) -> String {
    serde_saphyr::to_string(rule).unwrap_or_default()
}

/// Whether a rule is past its `until` at `now` (a `until` that is not an RFC 3339 time counts
/// as past: such a rule matches nothing either).
pub fn rule_expired(rule: &WriterRule, now: i64) -> bool {
    rule.until
        .as_deref()
        .is_some_and(|u| crate::author::unix_seconds(u).is_none_or(|t| t <= now))
}

/// The rules in force that cover a release (`namespace`, `name`), selector-only rules
/// included (their labels are not checked here), sorted by id.
pub fn rules_of_release<'r>(
    rules: &'r [WriterRule],
    namespace: &str,
    name: &str,
) -> Vec<&'r WriterRule> {
    let mut found: Vec<&WriterRule> = rules
        .iter()
        .filter(|r| release_matches(&r.objects.release, &format!("{namespace}/{name}")))
        .collect();
    found.sort_by(|a, b| a.id.cmp(&b.id));
    found
}

/// `learn`'s text report.
pub fn render_text(proposals: &Proposals, now: i64) -> String {
    let mut out = String::new();
    let ago = |t: i64| format_age(now.saturating_sub(t));
    if proposals.proposed.is_empty() {
        out.push_str("Proposed rules: none.\n");
    } else {
        out.push_str("Proposed rules (accept with: kubectl locker learn accept ID...):\n");
    }
    for p in &proposals.proposed {
        let r = &p.rule;
        let e = &p.evidence;
        out.push_str(&format!(
            "\n  {}\n    writer:   {}{}\n    objects:  {} {} of release {}\n    paths:    {}\n    seen:     {} write(s) ({}), first {} ago, last {} ago{}\n",
            r.id,
            r.writers.service_accounts.join(", "),
            r.writers
                .field_manager
                .as_deref()
                .map(|m| format!(" (field manager {m})"))
                .unwrap_or_default(),
            kind_of(&r.objects.group, &r.objects.kind),
            r.objects.names.join(", "),
            release_of(&r.objects.release),
            r.paths.join(", "),
            e.count,
            e.operations.join(", "),
            ago(e.first_seen),
            ago(e.last_seen),
            names_not_kept(e),
        ));
    }
    if !proposals.not_proposed.is_empty() {
        out.push_str("\nNot proposed:\n");
    }
    for n in &proposals.not_proposed {
        out.push_str(&format!(
            "\n  {}{} -> {} {} of release {}\n    paths:    {}\n    seen:     {} write(s), last {} ago\n    why:      {}\n    instead:  {}\n",
            n.writer,
            n.field_manager
                .as_deref()
                .map(|m| format!(" (field manager {m})"))
                .unwrap_or_default(),
            kind_of(&n.group, &n.kind),
            n.evidence.objects.join(", "),
            n.release,
            n.paths.join(", "),
            n.evidence.count,
            ago(n.evidence.last_seen),
            n.why,
            n.instead,
        ));
    }
    if !proposals.flagged.is_empty() {
        out.push_str("\nFlagged (never proposed):\n");
    }
    for f in &proposals.flagged {
        out.push_str(&format!(
            "\n  {} -> {} {} of release {}\n    paths:    {}\n    seen:     {} write(s) from outside a pod, first {} ago, last {} ago\n    warning:  {}\n",
            f.writer,
            kind_of(&f.group, &f.kind),
            f.evidence.objects.join(", "),
            f.release,
            f.paths.join(", "),
            f.evidence.count,
            ago(f.evidence.first_seen),
            ago(f.evidence.last_seen),
            f.warning,
        ));
    }
    if !proposals.unused.is_empty() {
        out.push_str(
            "\nProposed for removal (remove from the writers: values, or the writers ConfigMap):\n",
        );
    }
    for u in &proposals.unused {
        out.push_str(&format!("  {}: {}\n", u.id, u.why));
    }
    if !proposals.expired.is_empty() {
        out.push_str("\nExpired (they match nothing; remove them):\n");
    }
    for x in &proposals.expired {
        out.push_str(&format!("  {}: until {}\n", x.id, x.until));
    }
    out
}

// --- grouping -------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct GroupKey {
    service_account: Option<String>,
    writer: String,
    field_manager: Option<String>,
    release: String,
    group: String,
    kind: String,
}

impl GroupKey {
    fn of(entry: &LearnedEntry) -> GroupKey {
        GroupKey {
            service_account: entry.service_account.clone(),
            writer: entry.writer.clone(),
            field_manager: entry.field_manager.clone(),
            release: entry.release.clone(),
            group: entry.group.clone(),
            kind: entry.kind.clone(),
        }
    }
}

#[derive(Debug, Default)]
struct Group {
    paths: BTreeSet<String>,
    objects: BTreeSet<String>,
    operations: BTreeSet<String>,
    evidence: Evidence,
}

impl Group {
    fn add(&mut self, entry: &LearnedEntry) {
        let first = self.evidence.count == 0;
        if !entry.path.is_empty() {
            self.paths.insert(entry.path.clone());
        }
        self.objects.extend(entry.objects.iter().cloned());
        self.operations.insert(match &entry.subresource {
            Some(sub) => format!("{}/{sub}", entry.operation),
            None => entry.operation.clone(),
        });
        let e = &mut self.evidence;
        e.count = e.count.saturating_add(entry.count);
        e.distinct_objects = e.distinct_objects.max(entry.distinct_objects);
        e.first_seen = if first {
            entry.first_seen
        } else {
            e.first_seen.min(entry.first_seen)
        };
        e.last_seen = e.last_seen.max(entry.last_seen);
        e.objects = self.objects.iter().cloned().collect();
        e.operations = self.operations.iter().cloned().collect();
        e.distinct_objects = e.distinct_objects.max(e.objects.len() as u64);
    }
}

enum Class {
    Controller,
    Human,
    Delete,
    Flagged,
}

fn classify(entry: &LearnedEntry) -> Class {
    let kubectl = entry
        .field_manager
        .as_deref()
        .is_some_and(|m| m.starts_with("kubectl"));
    match &entry.service_account {
        Some(_) if !entry.from_pod => Class::Flagged,
        None => Class::Human,
        Some(_) if kubectl => Class::Human,
        Some(_) if entry.path.is_empty() || entry.operation == "DELETE" => Class::Delete,
        Some(_) => Class::Controller,
    }
}

fn proposal(key: &GroupKey, group: Group) -> Proposal {
    let (namespace, name) = split_release(&key.release);
    let rule = WriterRule {
        id: String::new(),
        writers: Writers {
            service_accounts: key.service_account.iter().cloned().collect(),
            field_manager: key.field_manager.clone(),
            ..Writers::default()
        },
        objects: Objects {
            release: ReleaseMatch {
                namespace: Some(namespace.to_string()),
                name: Some(name.to_string()),
                selector: None,
            },
            group: key.group.clone(),
            kind: key.kind.clone(),
            names: group.objects.iter().cloned().collect(),
        },
        paths: group.paths.iter().cloned().collect(),
        until: None,
        reason: reason(key, &group.evidence),
        accepted_by: None,
    };
    let id = proposal_id(
        &rule,
        name,
        key.service_account.as_deref().unwrap_or_default(),
    );
    Proposal {
        rule: WriterRule { id, ..rule },
        evidence: group.evidence,
    }
}

/// `<release>-<kind>-<service account name>`, lowercased, `[a-z0-9-]`, then `-` and 8 hex
/// digits of the SHA-256 of what the rule lets through: at most 63 characters.
fn proposal_id(rule: &WriterRule, release: &str, service_account: &str) -> String {
    let sa_name = service_account.rsplit('/').next().unwrap_or_default();
    let raw = format!("{release}-{}-{sa_name}", rule.objects.kind).to_ascii_lowercase();
    let mut base = String::new();
    for c in raw.chars() {
        let c = if c.is_ascii_alphanumeric() { c } else { '-' };
        if !(c == '-' && (base.is_empty() || base.ends_with('-'))) {
            base.push(c);
        }
    }
    let content = serde_json::json!([
        rule.writers,
        rule.objects.release.namespace,
        rule.objects.release.name,
        rule.objects.group,
        rule.objects.kind,
        rule.objects.names,
        rule.paths,
    ]);
    let digest = ring::digest::digest(&ring::digest::SHA256, content.to_string().as_bytes());
    let hash: String = digest.as_ref()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    base.truncate(63 - 9);
    let base = base.trim_end_matches('-');
    if base.is_empty() {
        format!("rule-{hash}")
    } else {
        format!("{base}-{hash}")
    }
}

fn reason(key: &GroupKey, e: &Evidence) -> String {
    format!(
        "learned: {} write(s) ({}) by {}{} to {} {} of release {} from {} to {}{}",
        e.count,
        e.operations.join(", "),
        key.service_account.as_deref().unwrap_or(&key.writer),
        key.field_manager
            .as_deref()
            .map(|m| format!(" (field manager {m})"))
            .unwrap_or_default(),
        kind_of(&key.group, &key.kind),
        e.objects.join(", "),
        key.release,
        rfc3339(e.first_seen),
        rfc3339(e.last_seen),
        names_not_kept(e),
    )
}

fn names_not_kept(e: &Evidence) -> String {
    let kept = e.objects.len() as u64;
    if e.distinct_objects > kept {
        format!(
            "; {} of {} objects written are named (the others' names were not kept, and the rule does not cover them)",
            kept, e.distinct_objects
        )
    } else {
        String::new()
    }
}

fn listed(key: GroupKey, group: Group, why: String, instead: String) -> NotProposed {
    NotProposed {
        writer: key.writer,
        field_manager: key.field_manager,
        release: key.release,
        group: key.group,
        kind: key.kind,
        paths: group.paths.into_iter().collect(),
        evidence: group.evidence,
        why,
        instead,
    }
}

/// The `helm upgrade` that makes a person's change the right way: each path's values key,
/// from the release's chart files, when it can be traced.
fn helm_upgrade(key: &GroupKey, group: &Group, charts: &BTreeMap<String, ChartFiles>) -> String {
    const FALLBACK: &str = "change it in the chart's values and run helm upgrade";
    let (namespace, name) = split_release(&key.release);
    let Some(files) = charts.get(&key.release) else {
        return FALLBACK.into();
    };
    let mut sets: Vec<String> = Vec::new();
    let mut untraced: Vec<&str> = Vec::new();
    for path in &group.paths {
        let keys = group
            .objects
            .iter()
            .find_map(|object| {
                let keys = crate::trace::path_keys(files, &key.kind, object, path);
                (!keys.is_empty()).then_some(keys)
            })
            .unwrap_or_default();
        match keys.as_slice() {
            [] => untraced.push(path),
            keys => sets.extend(keys.iter().map(|k| format!("--set {k}=<value>"))),
        }
    }
    sets.dedup();
    if sets.is_empty() {
        return FALLBACK.into();
    }
    let chart = if files.chart.is_empty() {
        "<chart>".to_string()
    } else {
        format!("<{} chart>", files.chart)
    };
    let mut out = format!(
        "helm upgrade {name} {chart} -n {namespace} --reuse-values {}",
        sets.join(" ")
    );
    if !untraced.is_empty() {
        out.push_str(&format!(
            " (for {}: change it in the chart's values)",
            untraced.join(", ")
        ));
    }
    out
}

// --- rules in force -------------------------------------------------------------------------

fn split_expired(rules: &[WriterRule], now: i64) -> (Vec<&WriterRule>, Vec<ExpiredRule>) {
    let mut in_force = Vec::new();
    let mut expired = Vec::new();
    for rule in rules {
        if rule_expired(rule, now) {
            expired.push(ExpiredRule {
                id: rule.id.clone(),
                until: rule.until.clone().unwrap_or_default(),
            });
        } else {
            in_force.push(rule);
        }
    }
    expired.sort_by(|a, b| a.id.cmp(&b.id));
    (in_force, expired)
}

/// Whether a rule in force already lets this write through, by the rule's own matching
/// ([`WriterRule::matches_writer`], [`WriterRule::matches_object`], [`WriterRule::covers_path`]:
/// what admission asks), so the two cannot disagree. Conservative where the evidence lacks what
/// admission sees: a rule whose release is chosen by a selector (labels not known here) or
/// whose writers are groups (the request's groups are not kept) covers nothing here, and one
/// naming objects covers a write only when every object written is named and among them.
fn covers(rule: &WriterRule, entry: &LearnedEntry) -> bool {
    if entry.service_account.is_none() || rule.objects.release.selector.is_some() {
        return false;
    }
    let (namespace, name) = split_release(&entry.release);
    let release = ReleaseKey::new(namespace, name);
    let labels = BTreeMap::new();
    let writer = RuleWriter {
        username: &entry.writer,
        groups: Vec::new(),
        field_manager: entry.field_manager.as_deref(),
    };
    let object = |name: &'_ str| {
        rule.matches_object(&RuleObject {
            release: &release,
            labels: &labels,
            group: &entry.group,
            kind: &entry.kind,
            name,
        })
    };
    let objects = if rule.objects.names.is_empty() {
        object("")
    } else {
        !entry.objects.is_empty()
            && entry.distinct_objects <= entry.objects.len() as u64
            && entry.objects.iter().all(|n| object(n))
    };
    rule.matches_writer(&writer) && objects && rule.covers_path(&entry.path)
}

fn release_matches(release: &ReleaseMatch, key: &str) -> bool {
    let (namespace, name) = split_release(key);
    release.namespace.as_deref().is_none_or(|n| n == namespace)
        && release.name.as_deref().is_none_or(|n| n == name)
}

fn unused(in_force: &[&WriterRule], input: &LearnInput<'_>) -> Vec<UnusedRule> {
    // The oldest evidence: how long the recorder has been watching, at least.
    let oldest = input
        .learned
        .iter()
        .flat_map(|l| {
            l.entries
                .iter()
                .map(|e| e.first_seen)
                .chain(l.rule_uses.values().map(|u| u.last_used))
        })
        .min();
    let period = format_age(input.unused_for);
    let mut out: Vec<UnusedRule> = in_force
        .iter()
        .filter_map(|rule| {
            let uses: Vec<_> = input
                .learned
                .iter()
                .filter_map(|l| l.rule_uses.get(&rule.id))
                .collect();
            let count = uses.iter().map(|u| u.count).fold(0u64, u64::saturating_add);
            let last_used = uses.iter().map(|u| u.last_used).max();
            let why = match last_used {
                Some(last) if input.now.saturating_sub(last) >= input.unused_for => format!(
                    "no write has used it for {} ({count} use(s), the last at {})",
                    format_age(input.now.saturating_sub(last)),
                    rfc3339(last)
                ),
                Some(_) => return None,
                None => {
                    let watched = oldest.map(|o| input.now.saturating_sub(o))?;
                    if watched < input.unused_for {
                        return None;
                    }
                    format!(
                        "no write has used it in the {} of evidence (at least {period})",
                        format_age(watched)
                    )
                }
            };
            Some(UnusedRule {
                id: rule.id.clone(),
                uses: count,
                last_used,
                why,
            })
        })
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

// --- words ----------------------------------------------------------------------------------

fn split_release(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

fn kind_of(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

fn release_of(release: &ReleaseMatch) -> String {
    format!(
        "{}/{}",
        release.namespace.as_deref().unwrap_or("*"),
        release.name.as_deref().unwrap_or("*")
    )
}

/// A duration as `3d`, `5h`, `12m` or `40s` (its largest unit).
fn format_age(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        s if s >= 86_400 => format!("{}d", s / 86_400),
        s if s >= 3_600 => format!("{}h", s / 3_600),
        s if s >= 60 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// Unix seconds as RFC 3339 in UTC (`2026-12-01T00:00:00Z`).
fn rfc3339(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let rest = seconds.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests;
