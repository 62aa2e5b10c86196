//! Scoped writer rules: named writers may change named locked paths of named objects, and
//! nothing else (issue 68).
//!
//! A rule is written by the platform team: in the configuration (`writers:` of `--config`, the
//! chart's `config.writers`), in the `<fullname>-writers` ConfigMap the running replicas watch
//! (one key per rule, what `kubectl locker learn accept --apply` writes), or in a release's own
//! HelmRelease (`spec.writers`, which can only name that release). It is the same YAML in all
//! three places:
//!
//! ```yaml
//! id: shop-web-scaler
//! writers:
//!   serviceAccounts: [ops/scaler]
//!   fieldManager: scaler          # optional: only writes that name this manager
//! objects:
//!   release: {namespace: shop, name: shop}
//!   group: apps
//!   kind: Deployment
//!   names: [shop-web]             # optional: every object of the kind in the release
//! paths: [/spec/replicas]
//! until: "2027-03-01T00:00:00Z"   # optional
//! reason: the scaler sizes shop-web by queue length
//! acceptedBy: alice@example.com   # optional
//! ```

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::label_selector::LabelSelector;
use crate::release::ReleaseKey;

mod held;
mod keyed_path;
pub use held::{rule_held_paths, rule_holders};
pub use keyed_path::keyed_path;

/// One scoped writer rule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriterRule {
    /// Unique among all rules, `[a-z0-9-]`, at most 63 characters: metrics, warnings and Events
    /// name it.
    pub id: String,
    pub writers: Writers,
    pub objects: Objects,
    /// The locked paths the writers may change, as JSON Pointers; a list item is addressed by
    /// its key as the denial messages name it (`/spec/template/spec/containers/[name=web]/image`)
    /// and `*` matches one segment.
    pub paths: Vec<String>,
    /// RFC 3339; past it the rule matches nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Why the rule exists, shown with every write it lets through.
    pub reason: String,
    /// Who accepted it (`kubectl locker learn accept` writes the kubeconfig's user).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_by: Option<String>,
}

/// Whose writes a rule lets through. A rule never matches a human identity unless it names that
/// user in `users`: `groups` match only service accounts and other `system:` identities.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Writers {
    /// `namespace/name`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub service_accounts: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Only writes that name this field manager.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_manager: Option<String>,
}

/// Which locked objects a rule covers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Objects {
    pub release: ReleaseMatch,
    /// API group, `""` for the core group.
    pub group: String,
    pub kind: String,
    /// Object names; empty: every object of the kind in the release.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
}

/// Which releases a rule covers; an unset field matches every release.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct ReleaseMatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Labels of the release's newest revision (its Secret's), `k=v,k!=v,k,!k`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub selector: Option<LabelSelector>,
}

/// Why a rule is refused: the rule's id and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("writer rule {id:?}: {reason}")]
pub struct RuleError {
    pub id: String,
    pub reason: String,
}

/// Who makes a write, as the admission request names them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuleWriter<'a> {
    pub username: &'a str,
    pub groups: Vec<&'a str>,
    /// The request's field manager (`options.fieldManager`), if any.
    pub field_manager: Option<&'a str>,
}

/// Which object a write changes, as a rule is matched against it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleObject<'a> {
    pub release: &'a ReleaseKey,
    /// The labels of the release's newest revision.
    pub labels: &'a BTreeMap<String, String>,
    /// API group, `""` for the core group.
    pub group: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
}

/// Paths no rule ever gives away: Helm's own marks on the object (whose they are decides
/// whether the release's lock reaches it at all) and owner references (adding one is a delete
/// by other means).
const NEVER_GIVEN: [&str; 4] = [
    "/metadata/annotations/meta.helm.sh~1release-name",
    "/metadata/annotations/meta.helm.sh~1release-namespace",
    "/metadata/labels/app.kubernetes.io~1managed-by",
    "/metadata/ownerReferences",
];

impl WriterRule {
    /// Checks one rule on its own: its id, writers, kind, paths and `until`.
    pub fn validate(&self) -> Result<(), RuleError> {
        let fail = |reason: String| {
            Err(RuleError {
                id: self.id.clone(),
                reason,
            })
        };
        let id_ok = !self.id.is_empty()
            && self.id.len() <= 63
            && self
                .id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !id_ok {
            return fail("the id must be 1 to 63 characters of a-z, 0-9 and -".into());
        }
        let w = &self.writers;
        if w.service_accounts.is_empty() && w.users.is_empty() && w.groups.is_empty() {
            return fail(
                "it names no writer: give writers.serviceAccounts, users or groups".into(),
            );
        }
        for sa in &w.service_accounts {
            if !matches!(sa.split_once('/'), Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/'))
            {
                return fail(format!("service account {sa:?} is not namespace/name"));
            }
        }
        if w.users.iter().chain(&w.groups).any(|u| u.is_empty()) {
            return fail("an empty user or group name".into());
        }
        if self.objects.kind.is_empty() {
            return fail("objects.kind is required".into());
        }
        if self.paths.is_empty() {
            return fail("it names no path".into());
        }
        for path in &self.paths {
            if !path.starts_with('/') || path.len() < 2 {
                return fail(format!(
                    "path {path:?} is not a JSON Pointer to a field (it starts with / and names one)"
                ));
            }
            if let Some(bad) = path.split('/').skip(1).find(|s| !segment_ok(s)) {
                return fail(format!(
                    "path {path:?}: segment {bad:?} is neither a field, *, nor a list item as [key=value,...]"
                ));
            }
        }
        if let Some(until) = &self.until {
            if until_seconds(until).is_none() {
                return fail(format!(
                    "until {until:?} is not an RFC 3339 time in UTC (2027-03-01T00:00:00Z)"
                ));
            }
        }
        Ok(())
    }

    /// This rule as a release's HelmRelease may give it: only about that release. An unset
    /// `objects.release` namespace or name is bound to the release; one naming another release
    /// is refused (a HelmRelease never gives writers another release's objects).
    pub fn bound_to_release(&self, release: &ReleaseKey) -> Result<WriterRule, RuleError> {
        let m = &self.objects.release;
        let other = m
            .namespace
            .as_deref()
            .is_some_and(|ns| ns != release.namespace)
            || m.name.as_deref().is_some_and(|n| n != release.name);
        if other {
            return Err(RuleError {
                id: self.id.clone(),
                reason: format!(
                    "it is given by release {release}'s HelmRelease and names another release; a HelmRelease's rules can only name its own release"
                ),
            });
        }
        let mut bound = self.clone();
        bound.objects.release.namespace = Some(release.namespace.clone());
        bound.objects.release.name = Some(release.name.clone());
        Ok(bound)
    }

    /// Whether the rule still matches at `now` (Unix seconds): until its `until`, if any.
    pub fn is_active(&self, now: i64) -> bool {
        match &self.until {
            None => true,
            Some(until) => until_seconds(until).is_some_and(|end| now < end),
        }
    }

    /// Whether the rule names this writer. A group matches only a `system:` identity (a
    /// service account, a node, a controller), so a rule never lets a person through unless it
    /// names that person in `users`.
    pub fn matches_writer(&self, writer: &RuleWriter<'_>) -> bool {
        let w = &self.writers;
        if w.field_manager
            .as_deref()
            .is_some_and(|m| writer.field_manager != Some(m))
        {
            return false;
        }
        let by_account = writer
            .username
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
            .is_some_and(|(ns, name)| {
                w.service_accounts
                    .iter()
                    .any(|sa| sa.split_once('/') == Some((ns, name)))
            });
        let by_user = w.users.iter().any(|u| u == writer.username);
        let by_group = writer.username.starts_with("system:")
            && w.groups.iter().any(|g| writer.groups.contains(&g.as_str()));
        by_account || by_user || by_group
    }

    /// Whether the rule covers this object.
    pub fn matches_object(&self, object: &RuleObject<'_>) -> bool {
        let o = &self.objects;
        let m = &o.release;
        m.namespace
            .as_deref()
            .is_none_or(|ns| ns == object.release.namespace)
            && m.name.as_deref().is_none_or(|n| n == object.release.name)
            && m.selector.as_ref().is_none_or(|s| s.matches(object.labels))
            && o.group == object.group
            && o.kind == object.kind
            && (o.names.is_empty() || o.names.iter().any(|n| n == object.name))
    }

    /// Whether one of the rule's paths covers `keyed` (a change's path in keyed form,
    /// [`keyed_path`]).
    pub fn covers_path(&self, keyed: &str) -> bool {
        !never_given(keyed) && self.paths.iter().any(|p| path_covers(p, keyed))
    }

    /// Whether the rule lets this writer change this path of this object at `now`.
    pub fn allows(
        &self,
        writer: &RuleWriter<'_>,
        object: &RuleObject<'_>,
        keyed: &str,
        now: i64,
    ) -> bool {
        self.is_active(now)
            && self.matches_writer(writer)
            && self.matches_object(object)
            && self.covers_path(keyed)
    }
}

/// Checks every rule and that no id is used twice, across all the rules given (every source's
/// at once). Returns the rules that pass and an error for each that does not; of two rules with
/// one id, the first stays.
pub fn validate_rules(rules: Vec<WriterRule>) -> (Vec<WriterRule>, Vec<RuleError>) {
    let mut seen = std::collections::BTreeSet::new();
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    for rule in rules {
        if let Err(e) = rule.validate() {
            bad.push(e);
        } else if !seen.insert(rule.id.clone()) {
            bad.push(RuleError {
                id: rule.id.clone(),
                reason: "another rule has the same id".into(),
            });
        } else {
            good.push(rule);
        }
    }
    (good, bad)
}

/// The rules of the writers ConfigMap's data: each key `<id>.yaml` holds one rule, whose `id` is
/// that name. A key that does not read as a valid rule is an error naming it, and the others
/// still load: one tenant-free mistake (the ConfigMap is the platform team's alone) must not
/// take away every writer's rule, which would turn each of their writes into a denial.
pub fn rules_of_configmap(data: &BTreeMap<String, String>) -> (Vec<WriterRule>, Vec<RuleError>) {
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    for (key, text) in data {
        let fail = |reason: String| RuleError {
            id: key.clone(),
            reason,
        };
        let Some(id) = key.strip_suffix(".yaml") else {
            bad.push(fail("the key is not <id>.yaml".into()));
            continue;
        };
        let rule: WriterRule = match serde_saphyr::from_str(text) {
            Ok(rule) => rule,
            Err(e) => {
                bad.push(fail(format!("not a writer rule: {e}")));
                continue;
            }
        };
        if rule.id != id {
            bad.push(fail(format!(
                "the rule's id {:?} is not its key's name {id:?}",
                rule.id
            )));
            continue;
        }
        match rule.validate() {
            Ok(()) => good.push(rule),
            Err(e) => bad.push(e),
        }
    }
    (good, bad)
}

/// The rules a release's HelmRelease gives, each bound to that release
/// ([`WriterRule::bound_to_release`]), and an error for each that is invalid or names another
/// release. Ids are checked for uniqueness with every other source's by [`validate_rules`].
pub fn registration_rules(
    release: &ReleaseKey,
    rules: &[WriterRule],
) -> (Vec<WriterRule>, Vec<RuleError>) {
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    for rule in rules {
        match rule
            .validate()
            .and_then(|()| rule.bound_to_release(release))
        {
            Ok(bound) => good.push(bound),
            Err(e) => bad.push(e),
        }
    }
    (good, bad)
}

/// `until` in Unix seconds: RFC 3339, UTC.
fn until_seconds(until: &str) -> Option<i64> {
    let time = humantime::parse_rfc3339(until.trim()).ok()?;
    let since = time.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(since.as_secs()).ok()
}

fn segment_ok(segment: &str) -> bool {
    match segment.strip_prefix('[') {
        Some(inner) => inner.strip_suffix(']').is_some_and(|pairs| {
            !pairs.is_empty()
                && pairs
                    .split(',')
                    .all(|p| p.split_once('=').is_some_and(|(k, _)| !k.is_empty()))
        }),
        None => !segment.is_empty(),
    }
}

fn never_given(keyed: &str) -> bool {
    NEVER_GIVEN.iter().any(|n| {
        keyed == *n
            || keyed
                .strip_prefix(n)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// Whether rule path `rule` covers change path `change`: segment by segment a prefix of it, a
/// `*` for any one segment, and `[k=v]` for the list item whose keys include those values.
fn path_covers(rule: &str, change: &str) -> bool {
    let mut changed = change.split('/').skip(1);
    rule.split('/').skip(1).all(|want| {
        changed
            .next()
            .is_some_and(|have| want == "*" || want == have || item_matches(want, have))
    })
}

/// `[name=web]` against a change's `[name=web]` or `[containerPort=80,protocol=TCP]`: every
/// pair of the rule's segment is among the change's.
fn item_matches(want: &str, have: &str) -> bool {
    let pairs = |s: &str| -> Option<Vec<(String, String)>> {
        let inner = s.strip_prefix('[')?.strip_suffix(']')?;
        inner
            .split(',')
            .map(|p| {
                p.split_once('=')
                    .map(|(k, v)| (k.to_string(), v.to_string()))
            })
            .collect()
    };
    match (pairs(want), pairs(have)) {
        (Some(want), Some(have)) => want.iter().all(|p| have.contains(p)),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
