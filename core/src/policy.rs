//! What helm-locker enforces: modes, exemptions, ignore rules and which releases are locked.
//! Plain data with defaults; the server reads it from flags, environment and `--config FILE`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::label_selector::LabelSelector;
use crate::locked::LockedObject;
use crate::release::ReleaseKey;
use std::collections::BTreeMap;

/// What happens to a write that changes a locked field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Reject the write with a message (validating webhook).
    #[default]
    Deny,
    /// Let it through with an admission warning, which kubectl prints.
    Warn,
    /// Let it through with the locked fields put back (mutating webhook).
    Repair,
    /// Do not lock.
    Off,
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| format!("unknown mode {s:?}: one of deny, warn, repair, off"))
    }
}

impl Mode {
    pub const ALL: [Mode; 4] = [Mode::Deny, Mode::Warn, Mode::Repair, Mode::Off];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Deny => "deny",
            Mode::Warn => "warn",
            Mode::Repair => "repair",
            Mode::Off => "off",
        }
    }
}

/// Identities whose writes are never blocked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Exemptions {
    /// User names, e.g. `system:kube-controller-manager`.
    pub users: Vec<String>,
    /// Groups, e.g. `system:nodes`.
    pub groups: Vec<String>,
    /// Every service account in these namespaces (the control plane's controllers live in
    /// `kube-system`).
    pub service_account_namespaces: Vec<String>,
    /// Single service accounts as `namespace/name` (helm-locker's own, a GitOps controller...).
    pub service_accounts: Vec<String>,
}

impl Default for Exemptions {
    fn default() -> Self {
        Exemptions {
            users: vec![
                "system:kube-controller-manager".into(),
                "system:kube-scheduler".into(),
            ],
            groups: vec!["system:nodes".into()],
            service_account_namespaces: vec!["kube-system".into()],
            service_accounts: vec![],
        }
    }
}

impl Exemptions {
    pub fn exempts(&self, username: &str, groups: &[impl AsRef<str>]) -> bool {
        if self.users.iter().any(|u| u == username)
            || groups
                .iter()
                .any(|g| self.groups.iter().any(|e| e == g.as_ref()))
        {
            return true;
        }
        match username
            .strip_prefix("system:serviceaccount:")
            .and_then(|sa| sa.split_once(':'))
        {
            Some((ns, name)) => {
                self.service_account_namespaces.iter().any(|n| n == ns)
                    || self
                        .service_accounts
                        .iter()
                        .any(|s| s.split_once('/') == Some((ns, name)))
            }
            None => false,
        }
    }
}

/// Why helm-locker's own release is never locked (shown where a release's policy is).
pub const OWN_RELEASE: &str =
    "it is helm-locker's own release (--own-release): the operator's off-switches always hold";

/// Which objects a rule applies to; an unset field matches everything.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Target {
    pub group: Option<String>,
    pub kind: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl Target {
    pub fn matches(&self, object: &LockedObject) -> bool {
        let eq = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        eq(&self.group, &object.group)
            && eq(&self.kind, &object.kind)
            && eq(&self.namespace, object.namespace.as_deref().unwrap_or(""))
            && eq(&self.name, &object.name)
    }
}

/// Fields left free (like Flux's drift-detection ignore rules): JSON pointers, where a `*`
/// segment matches any key or list index.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IgnoreRule {
    pub paths: Vec<String>,
    pub target: Target,
}

/// Mode for the releases a rule selects (first matching rule wins).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReleaseRule {
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub mode: Mode,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Mode for releases no rule in `releases` selects.
    pub mode: Mode,
    pub exempt: Exemptions,
    pub ignore: Vec<IgnoreRule>,
    pub releases: Vec<ReleaseRule>,
    /// Lock only releases in these namespaces (empty: all).
    pub namespaces: Vec<String>,
    /// Never lock releases in these namespaces.
    pub exclude_namespaces: Vec<String>,
    /// Lock only releases whose Secret labels match this selector (`k=v,k!=v,k,!k`).
    pub release_selector: Option<LabelSelector>,
    /// Lock only releases registered by a HelmRelease (helm.cattle.io/v1alpha1) in this
    /// namespace (rancher/helm-locker's opt-in; its default is `cattle-helm-system`).
    pub registration_namespace: Option<String>,
    /// Scoped writer rules ([`crate::writer_rule`]): which writers may change which locked
    /// paths of which objects. Checked with [`crate::writer_rule::validate_rules`] at load.
    #[serde(default)]
    pub writers: Vec<crate::writer_rule::WriterRule>,
    /// The drift reverter runs (`--revert`): it hands the chart's fields that another field
    /// manager co-owns with the chart's values back to Helm
    /// ([`crate::revert_plan::ownership_return`]), so a CREATE of what Helm wrote by another
    /// manager (a restore) breaks no later `helm upgrade`, and is allowed. Set by the server,
    /// not by the configuration file.
    #[serde(skip)]
    pub ownership_returned: bool,
    /// The release helm-locker itself was installed from (`--own-release`, which the chart
    /// sets): never locked, reverted or re-created, whatever else selects it, so that the
    /// operator's off-switches (deleting the webhook configurations, scaling to 0) hold.
    #[serde(skip)]
    pub own_release: Option<ReleaseKey>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::Deny,
            exempt: Exemptions::default(),
            ignore: vec![],
            releases: vec![],
            namespaces: vec![],
            exclude_namespaces: vec![],
            release_selector: None,
            registration_namespace: None,
            writers: vec![],
            ownership_returned: false,
            own_release: None,
        }
    }
}

/// Checks the parts of a configuration that serde cannot.
pub fn validate(config: &Config) -> Result<(), String> {
    for rule in &config.ignore {
        for path in &rule.paths {
            if !path.starts_with('/') {
                return Err(format!(
                    "ignore path {path:?} is not a JSON pointer (it must start with /)"
                ));
            }
        }
    }
    // A bad writer rule in the file fails the start, as a bad ignore path does: the file is
    // read once, and a rule silently dropped would turn its writer's every write into a denial.
    let (_, bad) = crate::writer_rule::validate_rules(config.writers.clone());
    if let Some(first) = bad.first() {
        return Err(first.to_string());
    }
    Ok(())
}

impl Config {
    /// The mode that applies to a release, `Off` when the release is not selected at all.
    pub(crate) fn mode_for(&self, release: &ReleaseKey, labels: &BTreeMap<String, String>) -> Mode {
        let ns = release.namespace.as_str();
        if (!self.namespaces.is_empty() && !self.namespaces.iter().any(|n| n == ns))
            || self.exclude_namespaces.iter().any(|n| n == ns)
            || !self.selects(labels)
        {
            return Mode::Off;
        }
        self.releases
            .iter()
            .find(|r| {
                r.namespace.as_deref().is_none_or(|n| n == ns)
                    && r.name.as_deref().is_none_or(|n| n == release.name)
            })
            .map_or(self.mode, |r| r.mode)
    }

    fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.release_selector
            .as_ref()
            .is_none_or(|selector| selector.matches(labels))
    }

    /// Ignored JSON pointers for one object.
    pub fn ignored_paths<'a>(&'a self, object: &LockedObject) -> Vec<&'a str> {
        ignored_by(&self.ignore, object)
    }

    /// What applies to one release: the configuration, narrowed or extended by the release's
    /// HelmRelease when there is one.
    pub fn policy<'a>(
        &'a self,
        release: &ReleaseKey,
        labels: &BTreeMap<String, String>,
        registration: Option<&'a Registration>,
    ) -> Policy<'a> {
        if self.own_release.as_ref() == Some(release) {
            return Policy {
                mode: Mode::Off,
                unlocked_because: OWN_RELEASE.to_string(),
                config: self,
                registration,
            };
        }
        let base = self.mode_for(release, labels);
        let (mode, unlocked_because) = match (base, &self.registration_namespace, registration) {
            (Mode::Off, ..) => (Mode::Off, "mode off".to_string()),
            (_, Some(ns), None) => (Mode::Off, format!("no HelmRelease in {ns} registers it")),
            (_, _, Some(r)) if r.suspend => (
                Mode::Off,
                format!("its HelmRelease {} is suspended", r.helmrelease),
            ),
            (_, _, Some(r)) => (r.mode.unwrap_or(base), "mode off".to_string()),
            (mode, None, None) => (mode, "mode off".to_string()),
        };
        Policy {
            mode,
            unlocked_because,
            config: self,
            registration,
        }
    }
}

fn ignored_by<'r>(rules: &'r [IgnoreRule], object: &LockedObject) -> Vec<&'r str> {
    rules
        .iter()
        .filter(|rule| rule.target.matches(object))
        .flat_map(|rule| rule.paths.iter().map(String::as_str))
        .collect()
}

/// A release's HelmRelease, reduced to what the lock needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Registration {
    /// `namespace/name` of the HelmRelease, for messages.
    pub helmrelease: String,
    /// Overrides the configured mode.
    pub mode: Option<Mode>,
    /// Unlocks the release without deleting anything.
    pub suspend: bool,
    /// Added to the configured ignore rules.
    pub ignore: Vec<IgnoreRule>,
    /// Added to the configured exemptions.
    pub exempt: Option<Exemptions>,
    /// Writer rules for this release only ([`crate::writer_rule::registration_rules`]).
    pub writers: Vec<crate::writer_rule::WriterRule>,
}

/// The lock policy of one release.
#[derive(Debug)]
pub struct Policy<'a> {
    pub mode: Mode,
    /// Why the release is not locked when `mode` is `Off`.
    pub unlocked_because: String,
    config: &'a Config,
    registration: Option<&'a Registration>,
}

impl<'a> Policy<'a> {
    /// Whether writes by this identity pass regardless of the lock.
    pub fn exempts(&self, username: &str, groups: &[impl AsRef<str>]) -> bool {
        self.config.exempt.exempts(username, groups)
            || self
                .registration
                .and_then(|r| r.exempt.as_ref())
                .is_some_and(|e| e.exempts(username, groups))
    }

    /// Ignored JSON pointers for one object: the configuration's and the HelmRelease's.
    pub fn ignored_paths(&self, object: &LockedObject) -> Vec<&'a str> {
        let own: &'a [IgnoreRule] = self.registration.map_or(&[], |r| &r.ignore);
        let mut paths = ignored_by(&self.config.ignore, object);
        paths.extend(ignored_by(own, object));
        paths
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helm_lockers_own_release_is_never_locked_whatever_selects_it() {
        let own = ReleaseKey::new("helm-locker", "helm-locker");
        let config = Config {
            own_release: Some(own.clone()),
            releases: vec![ReleaseRule {
                namespace: Some("helm-locker".into()),
                name: None,
                mode: Mode::Repair,
            }],
            ..Config::default()
        };
        let labels = BTreeMap::new();
        let vouched = Registration {
            helmrelease: "cattle-helm-system/helm-locker".into(),
            mode: Some(Mode::Deny),
            suspend: false,
            ignore: vec![],
            exempt: None,
            writers: vec![],
        };
        for registration in [None, Some(&vouched)] {
            let policy = config.policy(&own, &labels, registration);
            assert_eq!(policy.mode, Mode::Off);
            assert_eq!(policy.unlocked_because, OWN_RELEASE);
        }
        // Another release of the same namespace, or of the same name elsewhere, is not it.
        let neighbour = ReleaseKey::new("helm-locker", "other");
        assert_eq!(config.policy(&neighbour, &labels, None).mode, Mode::Repair);
        let namesake = ReleaseKey::new("shop", "helm-locker");
        assert_eq!(config.policy(&namesake, &labels, None).mode, Mode::Deny);
    }

    #[test]
    fn default_exemptions_cover_the_control_plane_but_not_people() {
        let e = Exemptions::default();
        assert!(e.exempts("system:kube-controller-manager", &[] as &[&str]));
        assert!(e.exempts(
            "system:serviceaccount:kube-system:deployment-controller",
            &[] as &[&str]
        ));
        assert!(e.exempts("system:node:n1", &["system:nodes"]));
        assert!(!e.exempts("admin", &["system:masters", "system:authenticated"]));
        assert!(!e.exempts("system:serviceaccount:shop:default", &[] as &[&str]));
        let own = Exemptions {
            service_accounts: vec!["locker/helm-locker".into()],
            ..Exemptions::default()
        };
        assert!(own.exempts("system:serviceaccount:locker:helm-locker", &[] as &[&str]));
        assert!(!own.exempts("system:serviceaccount:locker:other", &[] as &[&str]));
    }

    #[test]
    fn modes_follow_namespaces_rules_and_selectors() {
        let config: Config = serde_saphyr::from_str(
            "mode: deny\nexcludeNamespaces: [dev]\nreleases:\n- {namespace: shop, name: legacy, mode: warn}\n- {namespace: shop, mode: repair}\nreleaseSelector: owner=helm,!skip\n",
        )
        .unwrap();
        validate(&config).unwrap();
        let labels: BTreeMap<String, String> = [("owner".to_string(), "helm".to_string())].into();
        assert_eq!(
            config.mode_for(&ReleaseKey::new("shop", "legacy"), &labels),
            Mode::Warn
        );
        assert_eq!(
            config.mode_for(&ReleaseKey::new("shop", "web"), &labels),
            Mode::Repair
        );
        assert_eq!(
            config.mode_for(&ReleaseKey::new("other", "web"), &labels),
            Mode::Deny
        );
        assert_eq!(
            config.mode_for(&ReleaseKey::new("dev", "web"), &labels),
            Mode::Off
        );
        let skipped: BTreeMap<String, String> =
            [("owner".into(), "helm".into()), ("skip".into(), "1".into())].into();
        assert_eq!(
            config.mode_for(&ReleaseKey::new("other", "web"), &skipped),
            Mode::Off
        );
        let only: Config = Config {
            namespaces: vec!["a".into()],
            ..Config::default()
        };
        assert_eq!(
            only.mode_for(&ReleaseKey::new("b", "x"), &labels),
            Mode::Off
        );
    }

    #[test]
    fn bad_configuration_is_reported() {
        assert!(serde_saphyr::from_str::<Config>("mode: maybe\n").is_err());
        assert!(serde_saphyr::from_str::<Config>("unknownField: 1\n").is_err());
        // A selector is parsed once, where it is read: a bad one never reaches a decision.
        let bad = serde_saphyr::from_str::<Config>("releaseSelector: a=b,=c\n").unwrap_err();
        assert!(bad.to_string().contains("label selector"), "{bad}");
        assert!("a=b,=c".parse::<LabelSelector>().is_err());
        let bad_path = Config {
            ignore: vec![IgnoreRule {
                paths: vec!["spec.replicas".into()],
                target: Target::default(),
            }],
            ..Config::default()
        };
        assert!(validate(&bad_path).unwrap_err().contains("JSON pointer"));
    }
}
