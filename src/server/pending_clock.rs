//! Since when each release has been pending: the clock behind
//! `helm_locker_pending_release_oldest_seconds`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::core::{ReleaseKey, Status};

pub(crate) use crate::index_store::Pending;

/// Since when each release has been pending-* or uninstalling. Helm creates a `pending-install`,
/// `pending-upgrade` or `pending-rollback` revision's Secret as it begins, so its creation time
/// (set by the API server) says when: the age survives a restart of the locker. `uninstalling`
/// is written over the newest revision's Secret, which says nothing of when: that one runs
/// from when this process first saw it (at a scrape of /metrics).
#[derive(Default)]
pub(crate) struct PendingClock {
    since: HashMap<ReleaseKey, (u64, Status, Instant)>,
}

impl PendingClock {
    /// The longest any of `pending` has been so, at `now` (and `now_unix`, the wall clock in
    /// Unix seconds); forgets the releases that are no longer pending. A new revision or status
    /// starts a new clock.
    pub(crate) fn oldest(
        &mut self,
        pending: impl IntoIterator<Item = Pending>,
        now: Instant,
        now_unix: i64,
    ) -> Duration {
        let mut seen = HashMap::new();
        let mut oldest = Duration::ZERO;
        for (key, revision, status, created) in pending {
            let since = match self.since.get(&key) {
                Some((r, s, at)) if *r == revision && *s == status => *at,
                _ => now,
            };
            let age = match (status, created) {
                (Status::Uninstalling, _) | (_, None) => now.saturating_duration_since(since),
                (_, Some(created)) => {
                    Duration::from_secs(now_unix.saturating_sub(created).max(0) as u64)
                }
            };
            oldest = oldest.max(age);
            seen.insert(key, (revision, status, since));
        }
        self.since = seen;
        oldest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pending_clock_runs_per_revision_and_status_and_forgets_finished_releases() {
        let mut clock = PendingClock::default();
        let t0 = Instant::now();
        let shop = || ReleaseKey::new("shop", "shop");
        let web = || ReleaseKey::new("web", "web");
        let at = |s| t0 + Duration::from_secs(s);
        assert_eq!(clock.oldest([], t0, 0), Duration::ZERO);
        assert_eq!(
            clock.oldest([(shop(), 2, Status::PendingUpgrade, None)], t0, 0),
            Duration::ZERO
        );
        let both = || {
            [
                (shop(), 2, Status::PendingUpgrade, None),
                (web(), 5, Status::Uninstalling, None),
            ]
        };
        assert_eq!(clock.oldest(both(), at(60), 0), Duration::from_secs(60));
        assert_eq!(clock.oldest(both(), at(90), 0), Duration::from_secs(90));
        // shop finished; web's clock keeps running from when it was first seen.
        assert_eq!(
            clock.oldest([(web(), 5, Status::Uninstalling, None)], at(100), 0),
            Duration::from_secs(40)
        );
        // shop pending again (a new upgrade): a new clock.
        let again = [
            (shop(), 3, Status::PendingUpgrade, None),
            (web(), 6, Status::PendingRollback, None),
        ];
        assert_eq!(clock.oldest(again, at(200), 0), Duration::ZERO);
    }

    /// A restarted locker: the pending revision's Secret says since when, whatever the
    /// process has seen; `uninstalling` still runs from first sight.
    #[test]
    fn a_pending_revisions_age_comes_from_when_its_secret_was_created() {
        let mut clock = PendingClock::default();
        let t0 = Instant::now();
        let created = 1_800_000_000;
        let shop = ReleaseKey::new("shop", "shop");
        let stuck = [(shop.clone(), 2, Status::PendingInstall, Some(created))];
        assert_eq!(
            clock.oldest(stuck.clone(), t0, created + 3600),
            Duration::from_secs(3600)
        );
        let uninstalling = [(shop, 2, Status::Uninstalling, Some(created))];
        assert_eq!(
            clock.oldest(uninstalling.clone(), t0, created + 3600),
            Duration::ZERO
        );
        assert_eq!(
            clock.oldest(uninstalling, t0 + Duration::from_secs(5), created + 3605),
            Duration::from_secs(5)
        );
    }
}
