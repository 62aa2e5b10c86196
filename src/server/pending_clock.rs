//! Since when each release has been pending, as this process saw it: the clock behind
//! `helm_locker_pending_release_oldest_seconds`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::core::{ReleaseKey, Status};

/// Since when each release has been pending-* or uninstalling, as this process saw it (at a
/// scrape of /metrics): Helm's own timestamps are not written the same way by every version.
#[derive(Default)]
pub(crate) struct PendingClock {
    since: HashMap<ReleaseKey, (u64, Status, Instant)>,
}

impl PendingClock {
    /// The longest any of `pending` (release, revision, status) has been so, at `now`; forgets
    /// the releases that are no longer pending. A new revision or status starts a new clock.
    pub(crate) fn oldest(
        &mut self,
        pending: impl IntoIterator<Item = (ReleaseKey, u64, Status)>,
        now: Instant,
    ) -> Duration {
        let mut seen = HashMap::new();
        for (key, revision, status) in pending {
            let since = match self.since.get(&key) {
                Some((r, s, at)) if *r == revision && *s == status => *at,
                _ => now,
            };
            seen.insert(key, (revision, status, since));
        }
        self.since = seen;
        self.since
            .values()
            .map(|(_, _, at)| now.saturating_duration_since(*at))
            .max()
            .unwrap_or_default()
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
        assert_eq!(clock.oldest([], t0), Duration::ZERO);
        assert_eq!(
            clock.oldest([(shop(), 2, Status::PendingUpgrade)], t0),
            Duration::ZERO
        );
        let both = || {
            [
                (shop(), 2, Status::PendingUpgrade),
                (web(), 5, Status::Uninstalling),
            ]
        };
        assert_eq!(clock.oldest(both(), at(60)), Duration::from_secs(60));
        assert_eq!(clock.oldest(both(), at(90)), Duration::from_secs(90));
        // shop finished; web's clock keeps running from when it was first seen.
        assert_eq!(
            clock.oldest([(web(), 5, Status::Uninstalling)], at(100)),
            Duration::from_secs(40)
        );
        // shop pending again (a new upgrade): a new clock.
        let again = [
            (shop(), 3, Status::PendingUpgrade),
            (web(), 6, Status::PendingRollback),
        ];
        assert_eq!(clock.oldest(again, at(200)), Duration::ZERO);
    }
}
