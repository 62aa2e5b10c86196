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

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::policy::LabelSelector;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_rule_reads_and_writes_back_the_same() {
        let text = "id: shop-web-scaler\nwriters:\n  serviceAccounts: [ops/scaler]\n  fieldManager: scaler\nobjects:\n  release: {namespace: shop, name: shop}\n  group: apps\n  kind: Deployment\n  names: [shop-web]\npaths: [/spec/replicas]\nuntil: \"2027-03-01T00:00:00Z\"\nreason: the scaler sizes shop-web by queue length\nacceptedBy: alice@example.com\n";
        let rule: WriterRule = serde_saphyr::from_str(text).unwrap();
        assert_eq!(rule.writers.service_accounts, ["ops/scaler"]);
        assert_eq!(rule.objects.release.namespace.as_deref(), Some("shop"));
        assert_eq!(rule.paths, ["/spec/replicas"]);
        let again: WriterRule =
            serde_saphyr::from_str(&serde_saphyr::to_string(&rule).unwrap()).unwrap();
        assert_eq!(again, rule);
        assert!(serde_saphyr::from_str::<WriterRule>("id: x\nwho: [a]\n").is_err());
    }
}
