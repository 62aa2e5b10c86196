//! The bound on the objects kept per storage namespace (`--max-namespace-objects`): which
//! releases of a namespace are kept (the earliest created that fit), which are refused, and
//! which fit again once room is made.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Index, PreparedSecret, ReleaseKey, ReleaseState, UpdateReport};
use crate::release::SecretRef;

/// A release not indexed because the releases stored in its namespace would keep more objects
/// than the bound (`--max-namespace-objects`). Which releases are kept is decided by when the
/// API server created each one's earliest revision held (a time no tenant can forge; then by
/// namespace and name): the earliest-created that fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub release: ReleaseKey,
    /// Its newest revision's object (to report on).
    pub secret: SecretRef,
    /// The objects its newest revision renders.
    pub objects: usize,
    /// The objects kept in the namespace by releases created before it.
    pub before: usize,
    pub limit: usize,
}

/// A storage namespace's releases by (when the earliest revision held was created, key), with
/// the objects each renders.
pub(super) type NamespaceOrder = imbl::OrdMap<(i64, ReleaseKey), usize>;

impl Index {
    /// Drops the objects of the releases in a list under way (`prepared`, its parts so far)
    /// that their namespace's bound will not keep (counting only what the list holds), so that
    /// a list holds at most a bound's worth of parsed objects per namespace, not all a tenant
    /// wrote. The index decides again when the list is upserted: a release dropped here that
    /// fits there is named to be read again ([`UpdateReport::room_for`]).
    pub fn bound_listing(&self, prepared: &mut [PreparedSecret]) {
        let mut by_namespace: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, p) in prepared.iter().enumerate() {
            by_namespace
                .entry(p.storage_namespace())
                .or_default()
                .push(i);
        }
        let bound = self.namespace_bound();
        for positions in by_namespace.values() {
            bound_namespace_listing(prepared, positions, bound);
        }
    }

    /// The bound of [`Index::bound_listing`] applied to a list as its parts arrive
    /// ([`ListingBound::add`]).
    pub fn listing_bound(&self) -> ListingBound {
        ListingBound {
            bound: self.namespace_bound(),
            namespaces: HashMap::new(),
            walks: 0,
        }
    }

    pub(super) fn namespace_bound(&self) -> usize {
        self.namespace_bound.unwrap_or_else(|| {
            usize::try_from(crate::limits::max_namespace_objects()).unwrap_or(usize::MAX)
        })
    }

    /// This index with its own bound on the objects kept per storage namespace (rather than
    /// `--max-namespace-objects`).
    pub fn with_namespace_bound(mut self, objects: usize) -> Self {
        self.namespace_bound = Some(objects.max(1));
        self
    }

    /// Puts `key` at its place in its storage namespace's order (again).
    pub(super) fn place(&mut self, key: &ReleaseKey, created: i64, count: usize) {
        self.unplace(key);
        let namespace = key.storage_namespace().to_string();
        let (mut order, mut total) = self.order.get(&namespace).cloned().unwrap_or_default();
        order.insert((created, key.clone()), count);
        total += count;
        self.order.insert(namespace, (order, total));
        self.placed.insert(key.clone(), (created, count));
    }

    /// Takes `key` out of its storage namespace's order.
    pub(super) fn unplace(&mut self, key: &ReleaseKey) {
        let Some((created, count)) = self.placed.remove(key) else {
            return;
        };
        let namespace = key.storage_namespace();
        if let Some((order, total)) = self.order.get(namespace) {
            let mut order = order.clone();
            order.remove(&(created, key.clone()));
            let total = total.saturating_sub(count);
            if order.is_empty() {
                self.order.remove(namespace);
            } else {
                self.order.insert(namespace.to_string(), (order, total));
            }
        }
    }

    /// Which releases of `namespace` fit under the bound, in the order they are kept in: each
    /// with the objects kept before it, and whether it fits. The earliest-created are kept;
    /// one that would take the namespace over the bound is not, and one created after it may
    /// still fit. A walk over the namespace's releases that allocates nothing: a namespace may
    /// hold as many releases as a tenant writes.
    pub(super) fn verdicts<'a>(
        &'a self,
        namespace: &str,
    ) -> impl Iterator<Item = (&'a ReleaseKey, usize, bool)> + 'a {
        let bound = self.namespace_bound();
        let (order, total) = match self.order.get(namespace) {
            Some((order, total)) => (Some(order), *total),
            None => (None, 0),
        };
        let everyone_fits = total <= bound;
        let mut before = 0usize;
        order
            .into_iter()
            .flat_map(|order| order.iter())
            .map(move |((_, key), &count)| {
                let fits = everyone_fits || before.saturating_add(count) <= bound;
                let at = before;
                if fits {
                    before += count;
                }
                (key, at, fits)
            })
    }

    /// `Some(objects kept before it)` when `key` does not fit under its namespace's bound.
    pub(super) fn refusal(&self, key: &ReleaseKey) -> Option<usize> {
        let (total, bound) = (
            self.order
                .get(key.storage_namespace())
                .map_or(0, |&(_, total)| total),
            self.namespace_bound(),
        );
        if total <= bound {
            return None;
        }
        self.verdicts(key.storage_namespace())
            .find(|(held, _, _)| *held == key)
            .and_then(|(_, before, fits)| (!fits).then_some(before))
    }

    /// After a change in `namespace`: a release kept that no longer fits (one created before it
    /// grew, or arrived) is pushed out, and one refused that fits now is named to be read again.
    /// While a batch is upserted ([`Index::deferred`]), the namespace is only noted, to be
    /// settled once when the batch ends: each settle walks the namespace's releases, and one per
    /// release of a list made a tenant's N releases cost N squared.
    pub(super) fn settle(&mut self, namespace: &str, report: &mut UpdateReport) {
        if let Some(deferred) = self.deferred.as_mut() {
            if !deferred.contains(namespace) {
                deferred.insert(namespace.to_string());
            }
            return;
        }
        let bound = self.namespace_bound();
        let over = self
            .order
            .get(namespace)
            .is_some_and(|&(_, total)| total > bound);
        let any_refused = self.refused_in.get(namespace).is_some_and(|&n| n > 0);
        if !over && !any_refused {
            return;
        }
        // What changes, found in one walk; most releases are already where they belong.
        let changes: Vec<(ReleaseKey, usize, bool)> = self
            .verdicts(namespace)
            .filter(|&(key, _, fits)| {
                self.releases.get(key).is_some_and(|state| {
                    matches!(
                        (fits, state.refused, &state.objects),
                        (true, Some(_), _) | (false, None, Some(_))
                    )
                })
            })
            .map(|(key, before, fits)| (key.clone(), before, fits))
            .collect();
        for (key, before, fits) in changes {
            let Some(state) = self.releases.get(&key).cloned() else {
                continue;
            };
            match (fits, state.refused, &state.objects) {
                (true, Some(_), _) => report.room_for.push(key),
                (false, None, Some(objects)) => {
                    let count = objects.len();
                    self.unclaim(&state);
                    if let Some(newest) = state.newest() {
                        report.refused.push(Refused {
                            release: key.clone(),
                            secret: newest.secret.clone(),
                            objects: count,
                            before,
                            limit: bound,
                        });
                    }
                    self.put_release(
                        key.clone(),
                        Arc::new(ReleaseState {
                            key,
                            revisions: state.revisions.clone(),
                            objects: None,
                            skipped: Vec::new(),
                            refused: Some(count),
                        }),
                    );
                }
                _ => {}
            }
        }
    }

    /// Starts a batch: [`settle`](Self::settle) only notes the namespaces it is asked about
    /// until [`settle_deferred`](Self::settle_deferred). `false` when one is already under way
    /// (its caller settles).
    pub(super) fn defer_settling(&mut self) -> bool {
        if self.deferred.is_some() {
            return false;
        }
        self.deferred = Some(std::collections::BTreeSet::new());
        true
    }

    /// Ends a batch: each namespace it changed is settled once, what that refuses or makes room
    /// for told in the last of `reports`.
    pub(super) fn settle_deferred(&mut self, reports: &mut Vec<UpdateReport>) {
        let Some(namespaces) = self.deferred.take() else {
            return;
        };
        let mut settled = UpdateReport::default();
        for namespace in namespaces {
            self.settle(&namespace, &mut settled);
        }
        if settled.refused.is_empty() && settled.room_for.is_empty() {
            return;
        }
        match reports.last_mut() {
            Some(last) => {
                last.refused.extend(settled.refused);
                last.room_for.extend(settled.room_for);
            }
            None => reports.push(settled),
        }
    }
}

/// [`Index::bound_listing`] over one storage namespace's entries of a list (`positions` in
/// `prepared`): the earliest created releases that fit keep their parsed objects, the others'
/// newest revisions let theirs go.
fn bound_namespace_listing(prepared: &mut [PreparedSecret], positions: &[usize], bound: usize) {
    // The newest revision of each release, and when its earliest one was created.
    let mut releases: HashMap<ReleaseKey, (u64, i64, usize, usize)> = HashMap::new();
    for &i in positions {
        let p = &prepared[i];
        let created = p.secret.created.unwrap_or(i64::MAX);
        let count = p.object_count();
        let entry = releases.entry(p.secret.key()).or_insert((
            p.secret.release.revision,
            created,
            count,
            i,
        ));
        entry.1 = entry.1.min(created);
        if p.secret.release.revision > entry.0 {
            (entry.0, entry.2, entry.3) = (p.secret.release.revision, count, i);
        }
    }
    let mut order: Vec<(i64, ReleaseKey, usize, usize)> = releases
        .into_iter()
        .map(|(key, (_, created, count, at))| (created, key, count, at))
        .collect();
    order.sort_unstable();
    let mut before = 0usize;
    for (_, _, count, at) in order {
        if before.saturating_add(count) <= bound {
            before += count;
        } else {
            prepared[at].drop_objects();
        }
    }
}

/// The namespace bound applied to a list under way, part by part, in time proportional to the
/// list: a namespace's entries are walked ([`Index::bound_listing`]) only once the parsed
/// objects it holds exceed the bound by a bound's worth, or by an eighth of the entries at the
/// walk before (so a namespace of many small releases is walked a logarithmic number of
/// times, not once a part). A list so holds at most about twice a bound's worth of parsed
/// objects per namespace, plus an eighth of its entries.
pub struct ListingBound {
    bound: usize,
    namespaces: HashMap<String, ListedNamespace>,
    /// The walks made.
    walks: usize,
}

#[derive(Default)]
struct ListedNamespace {
    /// Where its entries are in the list.
    positions: Vec<usize>,
    /// The parsed objects its entries hold.
    held: usize,
    /// Its entries at the last walk.
    walked: usize,
}

impl ListingBound {
    /// How many times a namespace's entries were walked.
    pub fn walks(&self) -> usize {
        self.walks
    }

    /// `prepared[from..]` was added to the list: walks the namespaces it takes too far over
    /// their bound.
    pub fn add(&mut self, prepared: &mut [PreparedSecret], from: usize) {
        let mut over: Vec<String> = Vec::new();
        for (i, p) in prepared.iter().enumerate().skip(from) {
            // Where its Secret is stored (as its release key's storage namespace says), read
            // without building the key.
            let namespace = match p.secret.secret.namespace.as_str() {
                "" => p.secret.release.namespace.as_str(),
                stored => stored,
            };
            if !self.namespaces.contains_key(namespace) {
                self.namespaces
                    .insert(namespace.to_string(), ListedNamespace::default());
            }
            let Some(listed) = self.namespaces.get_mut(namespace) else {
                continue;
            };
            listed.positions.push(i);
            listed.held = listed.held.saturating_add(p.objects.objects.len());
            let slack = self.bound.max(listed.walked / 8);
            if listed.held > self.bound.saturating_add(slack)
                && !over.iter().any(|o| o == namespace)
            {
                over.push(namespace.to_string());
            }
        }
        for namespace in over {
            let Some(listed) = self.namespaces.get_mut(&namespace) else {
                continue;
            };
            bound_namespace_listing(prepared, &listed.positions, self.bound);
            self.walks += 1;
            listed.held = listed
                .positions
                .iter()
                .map(|&i| prepared[i].objects.objects.len())
                .sum();
            listed.walked = listed.positions.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Driver, Index, ReleaseSecret, Status};

    /// `count` ConfigMaps named `<prefix>-<i>`.
    fn configmaps(prefix: &str, count: usize) -> String {
        (0..count)
            .map(|i| {
                format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {prefix}-{i}\n")
            })
            .collect()
    }

    /// Revision `revision` of `name` in `ns`, of `count` ConfigMaps, its Secret created at `at`.
    fn release(ns: &str, name: &str, revision: u64, count: usize, at: i64) -> ReleaseSecret {
        let mut secret = crate::test_util::release_secret(
            ns,
            name,
            revision,
            Status::Deployed,
            &configmaps(name, count),
        );
        secret.created = Some(at);
        secret
    }

    fn locked(index: &Index, ns: &str, name: &str) -> bool {
        index
            .lookup("", "ConfigMap", Some(ns), &format!("{name}-0"))
            .is_some()
    }

    fn key(ns: &str, name: &str) -> ReleaseKey {
        ReleaseKey::new(ns.to_string(), name.to_string())
    }

    /// The index's count of refused releases per namespace is what its releases say.
    fn assert_refused_counted(index: &Index) {
        let mut counted = std::collections::BTreeMap::new();
        for (key, state) in index.releases.iter() {
            if state.refused.is_some() {
                *counted
                    .entry(key.storage_namespace().to_string())
                    .or_insert(0usize) += 1;
            }
        }
        let kept: std::collections::BTreeMap<String, usize> = index
            .refused_in
            .iter()
            .map(|(ns, n)| (ns.clone(), *n))
            .collect();
        assert_eq!(kept, counted);
    }

    /// `releases` upserted one by one into an index of `bound`, each release the bound makes
    /// room for read again (as the release watch follows `room_for`) until nothing changes;
    /// and the releases it reported refused that stay refused.
    fn upserted_one_by_one(
        releases: &[ReleaseSecret],
        bound: usize,
    ) -> (Index, std::collections::BTreeSet<ReleaseKey>) {
        let mut one_by_one = Index::new().with_namespace_bound(bound);
        let mut reported = std::collections::BTreeSet::new();
        let mut queue: std::collections::VecDeque<ReleaseSecret> = releases.to_vec().into();
        while let Some(secret) = queue.pop_front() {
            let report = one_by_one.upsert(secret);
            reported.extend(report.refused.into_iter().map(|r| r.release));
            for key in report.room_for {
                queue.extend(releases.iter().filter(|s| s.key() == key).cloned());
            }
        }
        reported.retain(|key| one_by_one.release(key).is_some_and(|s| s.refused.is_some()));
        (one_by_one, reported)
    }

    /// Each release of `index` and whether it is kept.
    fn kept(index: &Index) -> Vec<(ReleaseKey, bool)> {
        index
            .releases()
            .iter()
            .map(|s| (s.key.clone(), s.refused.is_none()))
            .collect()
    }

    /// The parsed objects a list's entries of `namespace` hold.
    fn held_in(prepared: &[PreparedSecret], namespace: &str) -> usize {
        prepared
            .iter()
            .filter(|p| p.storage_namespace() == namespace)
            .map(|p| p.objects.objects.len())
            .sum()
    }

    #[test]
    fn a_list_bounded_part_by_part_holds_about_a_bound_walks_seldom_and_keeps_what_one_by_one_does()
    {
        // A tenant's 1,000 releases of 1 to 3 objects, created in an order unlike their names',
        // against a bound of 50 objects, arriving 8 at a time as a list's parts do; and an
        // admin's release in another namespace, under its bound, never touched.
        let releases: Vec<ReleaseSecret> = (0..1000)
            .map(|i| {
                release(
                    "t",
                    &format!("r{i:04}"),
                    1,
                    1 + i % 3,
                    (i * 7919 % 1000) as i64,
                )
            })
            .chain([release("admin", "a", 1, 5, 0)])
            .collect();
        let mut bound = Index::new().with_namespace_bound(50).listing_bound();
        let mut prepared: Vec<PreparedSecret> = Vec::new();
        for part in releases.chunks(8) {
            let from = prepared.len();
            prepared.extend(Index::prepare(part.to_vec()));
            bound.add(&mut prepared, from);
            // At most the bound, plus the slack before a walk: a bound's worth, or an eighth
            // of the namespace's entries.
            let entries = prepared.len();
            assert!(
                held_in(&prepared, "t") <= 50 + 50.max(entries / 8),
                "{} parsed objects held of {entries} entries",
                held_in(&prepared, "t")
            );
        }
        assert_eq!(held_in(&prepared, "admin"), 5);
        // A walk a bound's worth of objects apart while that is more than an eighth of the
        // entries (about 8 walks to 400 entries), then one an eighth more entries apart (about
        // 8 more to 1,000): far fewer than one a part (125 parts), and growing with the log
        // of the entries.
        assert!(bound.walks() <= 40, "{} walks", bound.walks());
        // The index decides; what it names to be read again is read, as the watch does.
        let mut listed = Index::new().with_namespace_bound(50);
        let mut reports: std::collections::VecDeque<UpdateReport> =
            listed.upsert_prepared(prepared).into();
        while let Some(report) = reports.pop_front() {
            for key in report.room_for {
                for secret in releases.iter().filter(|s| s.key() == key) {
                    reports.push_back(listed.upsert(secret.clone()));
                }
            }
        }
        let (one_by_one, _) = upserted_one_by_one(&releases, 50);
        assert_eq!(kept(&listed), kept(&one_by_one));
        assert_eq!(listed.object_count(), one_by_one.object_count());
        assert!(locked(&listed, "admin", "a"));
        assert_refused_counted(&listed);
    }

    #[test]
    fn a_list_under_its_bound_is_never_walked_and_keeps_every_object() {
        let mut bound = Index::new().with_namespace_bound(1000).listing_bound();
        let mut prepared: Vec<PreparedSecret> = Vec::new();
        for part in (0..100)
            .map(|i| release("t", &format!("r{i}"), 1, 10, i))
            .collect::<Vec<_>>()
            .chunks(10)
        {
            let from = prepared.len();
            prepared.extend(Index::prepare(part.to_vec()));
            bound.add(&mut prepared, from);
        }
        assert_eq!(bound.walks(), 0);
        assert_eq!(held_in(&prepared, "t"), 1000);
    }

    #[test]
    fn a_list_far_over_the_bound_keeps_and_reports_what_upserts_one_by_one_do() {
        // A tenant's 300 releases of 1 to 3 objects, created in an order unlike their names',
        // against a bound of 50 objects; and an admin's release in another namespace. The list
        // settles each namespace once, not after every release.
        let releases: Vec<ReleaseSecret> = (0..300)
            .map(|i| {
                release(
                    "t",
                    &format!("r{i:03}"),
                    1,
                    1 + i % 3,
                    (i * 7919 % 300) as i64,
                )
            })
            .chain([release("admin", "a", 1, 5, 0)])
            .collect();
        let (one_by_one, reported_one_by_one) = upserted_one_by_one(&releases, 50);
        for bound_listed in [false, true] {
            let mut prepared = Index::prepare(releases.clone());
            if bound_listed {
                Index::new()
                    .with_namespace_bound(50)
                    .bound_listing(&mut prepared);
            }
            let mut listed = Index::new().with_namespace_bound(50);
            let reports = listed.upsert_prepared(prepared);
            let differ: Vec<_> = kept(&listed)
                .into_iter()
                .zip(kept(&one_by_one))
                .filter(|(a, b)| a != b)
                .collect();
            assert!(
                differ.is_empty(),
                "bound_listing: {bound_listed}: {differ:?}"
            );
            assert_eq!(listed.object_count(), one_by_one.object_count());
            assert!(listed.object_count() <= 50 + 5);
            assert!(locked(&listed, "admin", "a"));
            // Each release refused is reported once, and none is named to be read again.
            let reported: Vec<ReleaseKey> = reports
                .iter()
                .flat_map(|r| r.refused.iter().map(|r| r.release.clone()))
                .collect();
            let unique: std::collections::BTreeSet<ReleaseKey> = reported.iter().cloned().collect();
            assert_eq!(reported.len(), unique.len(), "a release reported twice");
            assert_eq!(unique, reported_one_by_one);
            assert!(reports.iter().all(|r| r.room_for.is_empty()));
            assert_refused_counted(&listed);
        }
    }

    #[test]
    fn the_refused_releases_of_each_namespace_are_counted_through_every_change() {
        // Refused on arrival, pushed out by an upgrade, let back in, removed, listed again:
        // the count that spares a walk over a namespace's releases follows each change.
        let mut index = Index::new().with_namespace_bound(100);
        index.upsert(release("t", "a", 1, 60, 100));
        index.upsert(release("t", "b", 1, 60, 200));
        index.upsert(release("u", "c", 1, 150, 300));
        assert_refused_counted(&index);
        assert_eq!(index.refused_in.get("t"), Some(&1));
        assert_eq!(index.refused_in.get("u"), Some(&1));
        index.upsert(release("t", "a", 2, 90, 400));
        assert_refused_counted(&index);
        let gone = index.remove_secret(&SecretRef::secret("t", "sh.helm.release.v1.a.v1"));
        assert_refused_counted(&index);
        let gone_too = index.remove_secret(&SecretRef::secret("t", "sh.helm.release.v1.a.v2"));
        assert_refused_counted(&index);
        assert!(
            gone.room_for.contains(&key("t", "b")) || gone_too.room_for.contains(&key("t", "b"))
        );
        index.upsert(release("t", "b", 1, 60, 200));
        assert_refused_counted(&index);
        assert_eq!(index.refused_in.get("t"), None);
        index.remove_release(&key("u", "c"));
        assert_refused_counted(&index);
        assert!(index.refused_in.is_empty());
        let listed = vec![
            release("t", "b", 1, 60, 200),
            release("t", "d", 1, 60, 500),
            release("t", "e", 1, 30, 600),
        ];
        let mut again = Index::new().with_namespace_bound(100);
        again.upsert_many(listed);
        assert_refused_counted(&again);
        assert_eq!(again.refused_in.get("t"), Some(&1));
    }

    #[test]
    fn the_earliest_created_releases_are_kept_whatever_the_order_they_are_seen_in() {
        // The admin's release "zz-app" was created first; the tenant's "aa-*" later, named to
        // be listed first. Every order they arrive in keeps the admin's.
        let all = vec![
            release("t", "zz-app", 1, 30, 100),
            release("t", "aa-1", 1, 40, 200),
            release("t", "aa-2", 1, 40, 300),
            release("t", "aa-3", 1, 10, 400),
        ];
        for order in [[0, 1, 2, 3], [1, 2, 3, 0], [3, 2, 1, 0], [2, 0, 3, 1]] {
            let mut index = Index::new().with_namespace_bound(100);
            let mut refused = Vec::new();
            for i in order {
                refused.extend(index.upsert(all[i].clone()).refused);
            }
            assert!(locked(&index, "t", "zz-app"), "order {order:?}");
            assert!(locked(&index, "t", "aa-1"), "order {order:?}");
            // aa-2 would take the namespace to 110; aa-3, created after it, still fits.
            assert!(!locked(&index, "t", "aa-2"), "order {order:?}");
            assert!(locked(&index, "t", "aa-3"), "order {order:?}");
            assert_eq!(index.object_count(), 80);
            let state = index.release(&key("t", "aa-2")).unwrap();
            assert_eq!((state.objects.is_none(), state.refused), (true, Some(40)));
            // Reported, whether refused on arrival or pushed out by an earlier-created one.
            assert!(refused
                .iter()
                .any(|r| r.release == key("t", "aa-2") && r.objects == 40 && r.limit == 100));
        }
        // The same as a list (upsert_many) in name order.
        let mut index = Index::new().with_namespace_bound(100);
        index.upsert_many(all.clone());
        assert!(locked(&index, "t", "zz-app") && !locked(&index, "t", "aa-2"));
        // Another namespace has its own bound.
        index.upsert(release("u", "other", 1, 90, 500));
        assert!(locked(&index, "u", "other"));
    }

    #[test]
    fn a_refused_release_is_named_to_be_read_again_once_an_earlier_one_leaves() {
        let mut index = Index::new().with_namespace_bound(100);
        index.upsert(release("t", "first", 1, 60, 100));
        let report = index.upsert(release("t", "second", 1, 60, 200));
        assert_eq!(report.refused.len(), 1);
        assert!(!locked(&index, "t", "second"));
        // Removing "first" makes room: "second" is named, and indexed once read again.
        let gone = index.remove_secret(&SecretRef::secret("t", "sh.helm.release.v1.first.v1"));
        assert_eq!(gone.room_for, vec![key("t", "second")]);
        assert!(!locked(&index, "t", "second"), "not until it is read again");
        let report = index.upsert(release("t", "second", 1, 60, 200));
        assert!(report.refused.is_empty() && report.room_for.is_empty());
        assert!(locked(&index, "t", "second"));
        assert_eq!(index.object_count(), 60);
    }

    #[test]
    fn an_upgrade_that_grows_keeps_its_place_and_pushes_out_a_later_release() {
        let mut index = Index::new().with_namespace_bound(100);
        index.upsert(release("t", "admin", 1, 30, 100));
        index.upsert(release("t", "tenant", 1, 60, 200));
        assert!(locked(&index, "t", "admin") && locked(&index, "t", "tenant"));
        // The admin's upgrade to 50 objects: still created first, so kept; the tenant's goes.
        let report = index.upsert(release("t", "admin", 2, 50, 300));
        assert!(locked(&index, "t", "admin"));
        assert!(!locked(&index, "t", "tenant"));
        assert_eq!(report.refused.len(), 1);
        assert_eq!(report.refused[0].release, key("t", "tenant"));
        assert_eq!(report.refused[0].before, 50);
        // Upgraded past the bound on its own: refused (open, reported), never the old
        // revision's objects kept (the reverter would write them back over the upgrade).
        let report = index.upsert(release("t", "admin", 3, 120, 400));
        assert!(!locked(&index, "t", "admin"));
        assert_eq!(report.refused[0].release, key("t", "admin"));
        assert_eq!(report.refused[0].objects, 120);
        // Then the tenant's fits again, and is named to be read again.
        assert_eq!(report.room_for, vec![key("t", "tenant")]);
        // A rollback to a smaller revision takes its place back.
        let report = index.upsert(release("t", "admin", 4, 30, 500));
        assert!(locked(&index, "t", "admin"));
        assert!(report.refused.is_empty());
    }

    #[test]
    fn counts_are_restored_when_releases_leave() {
        let mut index = Index::new().with_namespace_bound(100);
        for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
            index.upsert(release("t", name, 1, 50, 100 + i as i64));
        }
        assert!(locked(&index, "t", "a") && locked(&index, "t", "b") && !locked(&index, "t", "c"));
        for name in ["a", "b", "c"] {
            index.remove_secret(&SecretRef::secret(
                "t",
                format!("sh.helm.release.v1.{name}.v1"),
            ));
        }
        assert_eq!(index.object_count(), 0);
        // Nothing left of them: the namespace takes the bound again.
        index.upsert(release("t", "d", 1, 100, 900));
        assert!(locked(&index, "t", "d"));
        // A release deleted and created again takes a new place: after what is kept.
        index.upsert(release("t", "e", 1, 10, 950));
        assert!(!locked(&index, "t", "e"));
        let mut whole = Index::new().with_namespace_bound(100);
        whole.upsert(release("t", "d", 1, 100, 900));
        assert_eq!(whole.object_count(), index.object_count());
    }

    #[test]
    fn a_list_holds_at_most_a_bound_of_parsed_objects_per_namespace_and_loses_nothing() {
        let index = Index::new().with_namespace_bound(100);
        let mut listed = Index::prepare(vec![
            release("t", "a-tenant", 1, 80, 200),
            release("t", "b-tenant", 1, 80, 300),
            release("t", "z-admin", 1, 80, 100),
            release("u", "other", 1, 80, 400),
        ]);
        index.bound_listing(&mut listed);
        let held: usize = listed.iter().map(|p| p.objects.objects.len()).sum();
        assert_eq!(held, 160, "the admin's and the other namespace's");
        let mut index = index;
        let reports = index.upsert_prepared(listed);
        assert!(locked(&index, "t", "z-admin") && locked(&index, "u", "other"));
        assert!(!locked(&index, "t", "a-tenant") && !locked(&index, "t", "b-tenant"));
        let refused: Vec<_> = reports.iter().flat_map(|r| &r.refused).collect();
        assert_eq!(refused.len(), 2, "{refused:?}");
        // The index knew of a release the list did not: the list dropped one that fits.
        let mut index = Index::new().with_namespace_bound(100);
        let mut listed = Index::prepare(vec![
            release("t", "a", 1, 60, 100),
            release("t", "b", 1, 60, 200),
        ]);
        index.bound_listing(&mut listed);
        listed.remove(0);
        let reports = index.upsert_prepared(listed);
        assert!(!locked(&index, "t", "b"));
        assert!(
            reports.iter().all(|r| r.refused.is_empty()),
            "not a refusal"
        );
        assert!(reports.iter().any(|r| r.room_for == vec![key("t", "b")]));
    }

    #[test]
    fn a_relist_keeps_the_earliest_created_and_names_what_fits_after_a_deletion() {
        let mut index = Index::new().with_namespace_bound(100);
        let listed = |secrets: Vec<ReleaseSecret>| Index::prepare(secrets);
        let reports = index.relist(
            None,
            Driver::Secret,
            &Default::default(),
            listed(vec![
                release("t", "b-tenant", 1, 80, 200),
                release("t", "z-admin", 1, 80, 100),
            ]),
        );
        assert!(locked(&index, "t", "z-admin") && !locked(&index, "t", "b-tenant"));
        assert!(reports
            .iter()
            .any(|r| r.refused.iter().any(|r| r.release == key("t", "b-tenant"))));
        // The admin's release is uninstalled while the watch is down: the list again names
        // the tenant's to be read again.
        let reports = index.relist(
            None,
            Driver::Secret,
            &Default::default(),
            listed(vec![release("t", "b-tenant", 1, 80, 200)]),
        );
        // Listed again, it is indexed by the list itself.
        assert!(locked(&index, "t", "b-tenant"));
        assert!(reports.iter().all(|r| r.refused.is_empty()));
    }
}
