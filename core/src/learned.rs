//! What the locker learns from the writes it would deny (issue 68): each would-be denial, in
//! `warn` mode and from denials in `deny` mode, aggregated by who wrote, how, and which locked
//! path of which release's kind. Never a value, nothing under a Secret's `data`.
//!
//! The leader keeps these in one ConfigMap per namespace written to, in the locker's own
//! namespace (`<fullname>-learned-<namespace>`, data key [`LEARNED_KEY`], a JSON [`Learned`]):
//! only who may write the locker's namespace may write the evidence that rules are proposed
//! from. `kubectl locker learn` reads them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The ConfigMap data key that holds a namespace's [`Learned`] as JSON.
pub const LEARNED_KEY: &str = "learned.json";

/// What was learned about the writes to one namespace's releases.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Learned {
    /// The namespace of the releases written to.
    pub namespace: String,
    pub entries: Vec<LearnedEntry>,
    /// Writes a writer rule let through to this namespace's releases, by rule id: `learn`
    /// proposes removing a rule no write has used for a while.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rule_uses: BTreeMap<String, RuleUse>,
}

/// How often, and when last, a writer rule let a write through.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleUse {
    pub count: u64,
    /// Unix seconds.
    pub last_used: i64,
}

/// One aggregate: every would-be denial with the same key fields (writer, field manager,
/// operation, subresource, release, kind, path, whether a pod made it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LearnedEntry {
    /// The request's `userInfo.username`.
    pub writer: String,
    /// `namespace/name` when the writer is a service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_manager: Option<String>,
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub operation: String,
    /// `scale`, `status`...; none for the object itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
    /// `namespace/name` of the release.
    pub release: String,
    /// API group, `""` for the core group.
    pub group: String,
    pub kind: String,
    /// The locked path, list items by key as a [`crate::writer_rule::WriterRule`] names them;
    /// `""` for a delete.
    pub path: String,
    /// The writer's token was bound to a pod (the request's `userInfo.extra` carries
    /// `authentication.kubernetes.io/pod-name`). A service account's token used from outside a
    /// pod is a separate entry, flagged by `learn`: a stolen token looks like that.
    pub from_pod: bool,
    /// `warn` or `deny`: the decision the write got.
    pub decision: String,
    pub count: u64,
    /// Names of the objects written, at most [`MAX_OBJECT_NAMES`].
    pub objects: Vec<String>,
    /// How many distinct objects were written (may exceed `objects.len()`).
    pub distinct_objects: u64,
    /// Unix seconds.
    pub first_seen: i64,
    pub last_seen: i64,
}

/// Object names kept per entry.
pub const MAX_OBJECT_NAMES: usize = 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_written_and_read_as_the_configmap_holds_it() {
        let learned = Learned {
            namespace: "shop".into(),
            entries: vec![LearnedEntry {
                writer: "system:serviceaccount:ops:scaler".into(),
                service_account: Some("ops/scaler".into()),
                field_manager: Some("scaler".into()),
                operation: "UPDATE".into(),
                subresource: Some("scale".into()),
                release: "shop/shop".into(),
                group: "apps".into(),
                kind: "Deployment".into(),
                path: "/spec/replicas".into(),
                from_pod: true,
                decision: "warn".into(),
                count: 3,
                objects: vec!["shop-web".into()],
                distinct_objects: 1,
                first_seen: 1_764_633_600,
                last_seen: 1_764_637_200,
            }],
            rule_uses: BTreeMap::from([(
                "shop-web-scaler".to_string(),
                RuleUse {
                    count: 2,
                    last_used: 1_764_637_000,
                },
            )]),
        };
        let text = serde_json::to_string(&learned).unwrap();
        assert!(text.contains("\"fromPod\":true"), "{text}");
        assert_eq!(serde_json::from_str::<Learned>(&text).unwrap(), learned);
    }
}
