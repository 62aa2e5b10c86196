//! What the reverter's watches queue, decided from the index and the policy in force: which
//! kinds to watch, which objects to check again after the index changed, and which locked
//! objects a kind's full list did not find. No I/O: the watches (`watches`) do the watching
//! and send what these answer.

use std::collections::{HashMap, HashSet};

use kube::core::GroupVersionKind;

use crate::core::{Config, Index};

use super::key::ObjectKey;
use super::revertable::revertable;

/// A kind the releases own: its group and kind.
pub(super) type OwnedKind = (String, String);

/// A listed object: its namespace (none for a cluster-scoped one) and name.
pub(super) type Listed = (Option<String>, String);

/// The kinds the releases of `index` own, each with the version its first object names: one
/// watch each.
pub(super) fn kinds_owned(index: &Index) -> HashMap<OwnedKind, String> {
    let mut wanted = HashMap::new();
    for state in index.releases() {
        for object in state.objects.iter().flatten() {
            wanted
                .entry((object.group.to_string(), object.kind.to_string()))
                .or_insert_with(|| object.version.to_string());
        }
    }
    wanted
}

/// After the index changed from `previous` to `index`: the objects the reverter may touch of
/// the releases that changed (a new revision, a registration or a LockException that opened
/// or closed: when one closes, the drift it left behind is reverted), or of every release when
/// a switch flipped (`switched`: mode on again, the reverter resumed).
pub(super) fn to_check_after_update(
    config: &Config,
    previous: &Index,
    index: &Index,
    switched: bool,
) -> Vec<ObjectKey> {
    let mut queued = Vec::new();
    for state in index.releases() {
        let before = previous.release(&state.key);
        let changed = switched
            || before.is_none_or(|b| !std::sync::Arc::ptr_eq(b, state))
            || previous.registration(&state.key) != index.registration(&state.key)
            || previous.exceptions(&state.key) != index.exceptions(&state.key);
        if !changed {
            continue;
        }
        for object in state.objects.iter().flatten() {
            if revertable(config, index, object).is_some() {
                queued.push(ObjectKey::of(object));
            }
        }
    }
    queued
}

/// After a full list of kind `gvk` that found `listed`: the locked objects of that kind it did
/// not find (deleted while the watch was down) that the reverter may touch.
pub(super) fn missing_from_list(
    config: &Config,
    index: &Index,
    gvk: &GroupVersionKind,
    listed: &HashSet<Listed>,
) -> Vec<ObjectKey> {
    let mut missing = Vec::new();
    for state in index.releases() {
        for object in state.objects.iter().flatten() {
            let found = listed.contains(&(
                object.namespace.as_deref().map(str::to_string),
                object.name.to_string(),
            ));
            if object.group == gvk.group
                && object.kind == gvk.kind
                && !found
                && revertable(config, index, object).is_some()
            {
                missing.push(ObjectKey::of(object));
            }
        }
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::test_util::release_secret;
    use crate::core::Status;

    const SETTINGS: &str =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: b\n";
    const WEB: &str =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n";

    fn reverting() -> Config {
        Config {
            ownership_returned: true,
            ..Config::default()
        }
    }

    fn names(keys: &[ObjectKey]) -> Vec<&str> {
        let mut names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
        names.sort_unstable();
        names
    }

    /// Release `shop` rendering the ConfigMap, release `web` the Deployment, both deployed.
    fn two_releases() -> Index {
        Index::from_secrets([
            release_secret("shop", "shop", 1, Status::Deployed, SETTINGS),
            release_secret("shop", "web", 1, Status::Deployed, WEB),
        ])
    }

    #[test]
    fn one_watch_per_kind_the_releases_own() {
        let kinds = kinds_owned(&two_releases());
        assert_eq!(kinds.len(), 2);
        assert_eq!(kinds[&(String::new(), "ConfigMap".into())], "v1");
        assert_eq!(kinds[&("apps".into(), "Deployment".into())], "v1");
        assert!(kinds_owned(&Index::default()).is_empty());
    }

    #[test]
    fn an_update_queues_the_objects_of_the_release_that_changed_only() {
        let previous = two_releases();
        let mut index = previous.clone();
        let _ = index.upsert(release_secret(
            "shop",
            "shop",
            2,
            Status::Deployed,
            SETTINGS,
        ));
        let queued = to_check_after_update(&reverting(), &previous, &index, false);
        assert_eq!(names(&queued), vec!["settings"]);
        // Control: nothing changed, nothing queued.
        assert!(to_check_after_update(&reverting(), &index, &index, false).is_empty());
    }

    #[test]
    fn a_switch_flipped_back_queues_every_object() {
        let index = two_releases();
        let queued = to_check_after_update(&reverting(), &index, &index, true);
        assert_eq!(names(&queued), vec!["settings", "web"]);
    }

    #[test]
    fn nothing_is_queued_while_the_reverter_is_paused_or_a_release_is_pending() {
        let previous = Index::default();
        let paused = Config {
            ownership_returned: false,
            ..Config::default()
        };
        assert!(to_check_after_update(&paused, &previous, &two_releases(), true).is_empty());
        let pending = Index::from_secrets([release_secret(
            "shop",
            "shop",
            1,
            Status::PendingUpgrade,
            SETTINGS,
        )]);
        assert!(to_check_after_update(&reverting(), &previous, &pending, true).is_empty());
        // Control: the same release deployed, the reverter on.
        let deployed = Index::from_secrets([release_secret(
            "shop",
            "shop",
            1,
            Status::Deployed,
            SETTINGS,
        )]);
        assert_eq!(
            to_check_after_update(&reverting(), &previous, &deployed, false).len(),
            1
        );
    }

    #[test]
    fn a_list_that_misses_a_locked_object_queues_it_and_only_of_its_kind() {
        let index = two_releases();
        let config_maps = GroupVersionKind::gvk("", "v1", "ConfigMap");
        let missing = missing_from_list(&reverting(), &index, &config_maps, &HashSet::new());
        assert_eq!(names(&missing), vec!["settings"]);
        // Control: listed, it is not missing.
        let listed = HashSet::from([(Some("shop".to_string()), "settings".to_string())]);
        assert!(missing_from_list(&reverting(), &index, &config_maps, &listed).is_empty());
        // Another namespace's object of that name is not this one.
        let elsewhere = HashSet::from([(Some("other".to_string()), "settings".to_string())]);
        assert_eq!(
            missing_from_list(&reverting(), &index, &config_maps, &elsewhere).len(),
            1
        );
    }
}
