//! A fight between the reverter and another writer, and how it stops itself.
//!
//! When the reverter has put the same fields of an object back [`FIGHT_REVERTS`] times within
//! [`FIGHT_WINDOW`] at the same revision, something keeps changing them back (a controller, an
//! operator's loop, a person's script): reverting again would only make both sides write
//! forever. The reverter then stops reverting those fields of that object, says so once, and
//! leaves the admission lock as it is. A new revision of the release (helm upgrade), or a
//! restart, clears it. So no loop between the reverter and anything writes more than
//! [`FIGHT_REVERTS`] times per object and revision.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Reverts of the same fields within [`FIGHT_WINDOW`] that make a fight.
pub const FIGHT_REVERTS: usize = 3;
/// The window [`FIGHT_REVERTS`] are counted in.
pub const FIGHT_WINDOW: Duration = Duration::from_secs(600);

/// A fight the reverter stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fight {
    pub revision: u64,
    /// The fields fought over, as the reverter describes them (`/spec/replicas`).
    pub paths: String,
}

#[derive(Debug)]
struct History {
    revision: u64,
    paths: String,
    reverts: Vec<Instant>,
}

/// The reverts of each object, and the fights stopped.
#[derive(Debug)]
pub struct Fights<K> {
    history: HashMap<K, History>,
    stopped: HashMap<K, Fight>,
}

impl<K> Default for Fights<K> {
    fn default() -> Self {
        Fights {
            history: HashMap::new(),
            stopped: HashMap::new(),
        }
    }
}

/// What the reverter does about drift of `paths`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Revert it (and [`Fights::reverted`] once done).
    Revert,
    /// A fight just found: report it once, do not revert.
    Stop(Fight),
    /// A fight already stopped at this revision: leave it.
    Stopped,
}

impl<K: Hash + Eq + Clone> Fights<K> {
    /// What to do about drift of `paths` of `key` at `revision`, at `now`.
    pub fn next(&mut self, key: &K, revision: u64, paths: &str, now: Instant) -> Next {
        if let Some(fight) = self.stopped.get(key) {
            if fight.revision == revision && fight.paths == paths {
                return Next::Stopped;
            }
            // A new revision, or other fields: the fight is over.
            self.stopped.remove(key);
        }
        let Some(history) = self.history.get_mut(key) else {
            return Next::Revert;
        };
        if history.revision != revision || history.paths != paths {
            return Next::Revert;
        }
        history
            .reverts
            .retain(|at| now.saturating_duration_since(*at) < FIGHT_WINDOW);
        if history.reverts.len() < FIGHT_REVERTS {
            return Next::Revert;
        }
        let fight = Fight {
            revision,
            paths: paths.to_string(),
        };
        self.history.remove(key);
        self.stopped.insert(key.clone(), fight.clone());
        Next::Stop(fight)
    }

    /// Records a revert of `paths` of `key` at `revision`.
    pub fn reverted(&mut self, key: &K, revision: u64, paths: &str, now: Instant) {
        let history = self.history.entry(key.clone()).or_insert_with(|| History {
            revision,
            paths: paths.to_string(),
            reverts: Vec::new(),
        });
        if history.revision != revision || history.paths != paths {
            *history = History {
                revision,
                paths: paths.to_string(),
                reverts: Vec::new(),
            };
        }
        history
            .reverts
            .retain(|at| now.saturating_duration_since(*at) < FIGHT_WINDOW);
        history.reverts.push(now);
    }

    /// Fights stopped now.
    pub fn stopped(&self) -> usize {
        self.stopped.len()
    }

    /// Forgets objects no longer locked, and reverts older than the window.
    pub fn prune(&mut self, now: Instant, mut locked: impl FnMut(&K) -> bool) {
        self.stopped.retain(|k, _| locked(k));
        self.history.retain(|k, h| {
            h.reverts
                .retain(|at| now.saturating_duration_since(*at) < FIGHT_WINDOW);
            !h.reverts.is_empty() && locked(k)
        });
    }
}

/// The writer that changed `live` last, other than `helm` (Helm's field manager) and
/// `reverter`: the newest managedFields entry by time, with its subresource
/// (`kube-controller-manager (scale)`). `None` when there is none.
pub fn other_writer(live: &Value, helm: &str, reverter: &str) -> Option<String> {
    let entries = live.pointer("/metadata/managedFields")?.as_array()?;
    entries
        .iter()
        .filter_map(|e| {
            let manager = e.get("manager")?.as_str()?;
            if manager == helm || manager == reverter {
                return None;
            }
            let time = e.get("time").and_then(Value::as_str).unwrap_or_default();
            let sub = e
                .get("subresource")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            Some((time, manager, sub))
        })
        .max_by(|a, b| a.0.cmp(b.0))
        .map(|(_, manager, sub)| match sub {
            Some(sub) => format!("{manager} ({sub})"),
            None => manager.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_same_fields_reverted_three_times_in_the_window_stop_at_the_fourth() {
        let mut fights = Fights::default();
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        for s in [0, 15, 30] {
            assert_eq!(
                fights.next(&"web", 2, "/spec/replicas", at(s)),
                Next::Revert
            );
            fights.reverted(&"web", 2, "/spec/replicas", at(s));
        }
        let fight = Fight {
            revision: 2,
            paths: "/spec/replicas".into(),
        };
        assert_eq!(
            fights.next(&"web", 2, "/spec/replicas", at(45)),
            Next::Stop(fight)
        );
        assert_eq!(fights.stopped(), 1);
        // Reported once; left alone after.
        assert_eq!(
            fights.next(&"web", 2, "/spec/replicas", at(60)),
            Next::Stopped
        );
        assert_eq!(
            fights.next(&"web", 2, "/spec/replicas", at(6000)),
            Next::Stopped
        );
        // Another object is not concerned.
        assert_eq!(
            fights.next(&"api", 2, "/spec/replicas", at(60)),
            Next::Revert
        );
        // A new revision ends it.
        assert_eq!(
            fights.next(&"web", 3, "/spec/replicas", at(70)),
            Next::Revert
        );
        assert_eq!(fights.stopped(), 0);
    }

    #[test]
    fn reverts_spread_over_more_than_the_window_or_of_other_fields_are_no_fight() {
        let mut fights = Fights::default();
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        // One revert every 5 minutes: never 3 in 10 minutes.
        for s in [0, 301, 602, 903, 1204] {
            assert_eq!(fights.next(&"web", 2, "/data/a", at(s)), Next::Revert);
            fights.reverted(&"web", 2, "/data/a", at(s));
        }
        // Other fields each time: each a new history.
        for (s, paths) in [(1300, "/data/b"), (1301, "/data/c"), (1302, "/data/b")] {
            assert_eq!(fights.next(&"web", 2, paths, at(s)), Next::Revert);
            fights.reverted(&"web", 2, paths, at(s));
        }
        // A new revision starts over.
        let mut fights = Fights::default();
        for (s, revision) in [(0, 2), (1, 2), (2, 3)] {
            fights.reverted(&"web", revision, "/data/a", at(s));
        }
        assert_eq!(fights.next(&"web", 3, "/data/a", at(3)), Next::Revert);
        fights.prune(at(4000), |_| true);
        assert!(fights.history.is_empty());
    }

    #[test]
    fn the_other_writer_is_the_newest_entry_not_helms_nor_the_reverters() {
        let live = json!({"metadata": {"managedFields": [
            {"manager": "helm", "operation": "Update", "time": "2026-11-25T10:00:03Z"},
            {"manager": "kube-controller-manager", "operation": "Update", "subresource": "scale", "time": "2026-11-25T10:00:02Z"},
            {"manager": "kubectl-edit", "operation": "Update", "time": "2026-11-25T10:00:01Z"},
            {"manager": "helm-locker", "operation": "Update", "time": "2026-11-25T10:00:04Z"},
        ]}});
        assert_eq!(
            other_writer(&live, "helm", "helm-locker").as_deref(),
            Some("kube-controller-manager (scale)")
        );
        assert_eq!(other_writer(&json!({"metadata": {}}), "helm", "x"), None);
    }
}
