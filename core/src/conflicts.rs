//! Objects claimed by several releases, told once per set of releases: a release that renders
//! another's objects is one fact to report, not one per object (a tenant's release of thousands
//! of the same ConfigMaps as her other release made a log line each).

use crate::index::Conflict;
use crate::release::ReleaseKey;
use std::collections::{BTreeMap, BTreeSet};

/// The objects the same releases claim ([`Conflict`]s with one winner and the same losers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConflictGroup {
    pub winner: ReleaseKey,
    pub losers: Vec<ReleaseKey>,
    /// How many objects they claim.
    pub objects: usize,
    /// The first [`EXAMPLES`] of them in name order, to look at.
    pub examples: Vec<String>,
}

/// How many of a group's objects are named.
pub const EXAMPLES: usize = 8;

/// `conflicts` grouped by the releases that claim them, in the order of (winner, losers).
pub fn group_conflicts<'a>(
    conflicts: impl IntoIterator<Item = &'a Conflict>,
) -> Vec<ConflictGroup> {
    type Group<'a> = (usize, BTreeSet<&'a str>);
    let mut groups: BTreeMap<(&ReleaseKey, &[ReleaseKey]), Group<'_>> = BTreeMap::new();
    for conflict in conflicts {
        let (objects, examples) = groups
            .entry((&conflict.winner, conflict.losers.as_slice()))
            .or_default();
        *objects += 1;
        examples.insert(conflict.object.as_str());
        if examples.len() > EXAMPLES {
            examples.pop_last();
        }
    }
    groups
        .into_iter()
        .map(|((winner, losers), (objects, examples))| ConflictGroup {
            winner: winner.clone(),
            losers: losers.to_vec(),
            objects,
            examples: examples.into_iter().map(str::to_string).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_claiming_thousands_of_anothers_objects_is_one_group() {
        let (admin, tenant, other) = (
            ReleaseKey::new("team", "a"),
            ReleaseKey::new("team", "b"),
            ReleaseKey::new("team", "c"),
        );
        let mut conflicts: Vec<Conflict> = (0..10_000)
            .map(|i| Conflict {
                object: format!("v1/ConfigMap team/c{i:05}"),
                winner: admin.clone(),
                losers: vec![tenant.clone()],
            })
            .collect();
        conflicts.push(Conflict {
            object: "v1/ConfigMap team/shared".into(),
            winner: admin.clone(),
            losers: vec![tenant.clone(), other.clone()],
        });
        let groups = group_conflicts(&conflicts);
        assert_eq!(
            groups,
            [
                ConflictGroup {
                    winner: admin.clone(),
                    losers: vec![tenant.clone()],
                    objects: 10_000,
                    examples: (0..EXAMPLES)
                        .map(|i| format!("v1/ConfigMap team/c{i:05}"))
                        .collect(),
                },
                ConflictGroup {
                    winner: admin,
                    losers: vec![tenant, other],
                    objects: 1,
                    examples: vec!["v1/ConfigMap team/shared".into()],
                },
            ]
        );
        assert!(group_conflicts(&[]).is_empty());
    }
}
