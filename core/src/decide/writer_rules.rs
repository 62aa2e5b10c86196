//! Writer rules in the decision: a denial, warning or repair whose changed paths active rules
//! give this writer is allowed with a warning naming them, or narrowed to the paths they do not
//! give ([`crate::writer_rule`] says what a rule matches and covers).

use crate::ownership::{repair_patch, Change};

use super::message::message;
use super::{Allowed, Decision, Locked};

/// Writer rules ([`crate::writer_rule`]) on a denial, warning or repair: when active rules
/// that name this writer and this object cover every changed path ([`Locked::keyed_paths`]), the
/// write is allowed, with a warning naming the rules ([`Allowed::ByRule`]); when they cover
/// some, the decision stands for the others only, and its message names only those (a message
/// of its own, [`Locked::wording`] `None`, stands whole). A delete, and a co-owner's or
/// creator's denial (no changed value: the harm is the next `helm upgrade`'s conflict, which no
/// rule prevents), are never covered. `labels`: the release's newest revision's; `now` in Unix
/// seconds.
pub fn allow_by_rules(
    decision: Decision,
    rules: &[&crate::writer_rule::WriterRule],
    writer: &crate::writer_rule::RuleWriter<'_>,
    labels: &std::collections::BTreeMap<String, String>,
    now: i64,
) -> Decision {
    let (Decision::Deny(l) | Decision::Warn(l) | Decision::Repair(l, _)) = &decision else {
        return decision;
    };
    if l.delete || l.changes.is_empty() || l.keyed_paths.len() != l.changes.len() {
        return decision;
    }
    let group = l
        .target
        .api_version
        .rsplit_once('/')
        .map_or("", |(group, _)| group);
    let object = crate::writer_rule::RuleObject {
        release: &l.release,
        labels,
        group,
        kind: &l.target.kind,
        name: &l.target.name,
    };
    let mut matching: Vec<&crate::writer_rule::WriterRule> = rules
        .iter()
        .copied()
        .filter(|r| r.is_active(now) && r.matches_writer(writer) && r.matches_object(&object))
        .collect();
    if matching.is_empty() {
        return decision;
    }
    matching.sort_by(|a, b| a.id.cmp(&b.id));
    let covering: Vec<Option<&crate::writer_rule::WriterRule>> = l
        .keyed_paths
        .iter()
        .map(|p| matching.iter().copied().find(|r| r.covers_path(p)))
        .collect();
    if covering.iter().all(Option::is_some) {
        let mut used: Vec<&crate::writer_rule::WriterRule> =
            covering.into_iter().flatten().collect();
        used.dedup_by(|a, b| a.id == b.id);
        let mut ids: Vec<String> = used.iter().map(|r| r.id.clone()).collect();
        ids.sort();
        ids.dedup();
        let why: Vec<String> = matching
            .iter()
            .filter(|r| ids.contains(&r.id))
            .map(|r| format!("{}: {}", r.id, r.reason))
            .collect();
        let warning = format!(
            "{} belongs to Helm release {}; writer rule {} lets {} change {} ({}). The next helm upgrade may set them back.",
            l.object,
            l.release,
            ids.join(", "),
            writer.username,
            l.keyed_paths.join(", "),
            why.join("; ")
        );
        return Decision::Allow(Allowed::ByRule {
            release: l.release.clone(),
            rules: ids,
            user: writer.username.to_string(),
            paths: l.keyed_paths.clone(),
            warning,
        });
    }
    let Some(wording) = l.wording else {
        return decision;
    };
    if covering.iter().all(Option::is_none) {
        return decision;
    }
    let narrow = |l: &Locked| {
        let (changes, keyed_paths): (Vec<Change>, Vec<String>) = l
            .changes
            .iter()
            .zip(&l.keyed_paths)
            .zip(&covering)
            .filter(|(_, rule)| rule.is_none())
            .map(|((c, k), _)| (c.clone(), k.clone()))
            .unzip();
        let message = message(
            &l.object, &l.release, l.revision, l.status, false, &changes, wording,
        );
        Locked {
            changes,
            keyed_paths,
            message,
            ..l.clone()
        }
    };
    match &decision {
        Decision::Deny(l) => Decision::Deny(narrow(l)),
        Decision::Warn(l) => Decision::Warn(narrow(l)),
        Decision::Repair(l, _) => {
            let l = narrow(l);
            let patch = repair_patch(&l.changes);
            Decision::Repair(l, patch)
        }
        Decision::Allow(_) => decision,
    }
}
