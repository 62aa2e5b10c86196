//! The learning recorder: the would-be denials seen since the last flush, aggregated as
//! [`Learned`] entries, bounded, and merged into the stored evidence.
//!
//! The server observes each warned or denied write that is not a dry run ([`Learning::observe`])
//! and, once a minute, takes the namespaces changed since ([`Learning::take_dirty`]), merges
//! each into its stored ConfigMap ([`merge`]) and writes it. What is kept is the key of a write
//! (who, how, which release's kind, which locked path) and counts: never a value, and for a
//! Secret no key under `data` or `stringData` either (both are recorded as the bare `/data`,
//! `/stringData`).
//!
//! Bounds: at most [`MAX_ENTRIES_PER_NAMESPACE`] entries per namespace and
//! [`MAX_LEARNED_NAMESPACES`] namespaces in memory between flushes; at most
//! [`MAX_OBJECT_NAMES`] object names per entry. Past the entry bound the entry seen least
//! recently (then the one counted least) is dropped, and counted in [`Learning::take_dropped`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use crate::learned::{Learned, LearnedEntry, RuleUse, MAX_OBJECT_NAMES};

/// Entries kept per namespace, in memory and in its ConfigMap (about 500 bytes each as JSON:
/// a namespace's ConfigMap stays near 100 KB, far below the 1 MiB an object may hold).
pub const MAX_ENTRIES_PER_NAMESPACE: usize = 200;

/// Namespaces held in memory between two flushes; a would-be denial in one more is dropped
/// (and counted) until the next flush empties the memory.
pub const MAX_LEARNED_NAMESPACES: usize = 1_000;

/// One would-be denial, as the server saw it: what its key and counts are made of.
#[derive(Clone, Copy, Debug)]
pub struct Observation<'a> {
    /// `userInfo.username`.
    pub writer: &'a str,
    pub field_manager: Option<&'a str>,
    /// `CREATE`, `UPDATE`, `DELETE`.
    pub operation: &'a str,
    pub subresource: Option<&'a str>,
    pub release_namespace: &'a str,
    pub release_name: &'a str,
    /// API group of the locked object, `""` for the core group.
    pub group: &'a str,
    pub kind: &'a str,
    /// The locked object's name.
    pub object: &'a str,
    /// The locked paths the write changes; none for a delete.
    pub paths: &'a [&'a str],
    pub delete: bool,
    /// The writer's token was bound to a pod (`userInfo.extra` names one).
    pub from_pod: bool,
    /// `warn` or `deny`.
    pub decision: &'a str,
}

/// The would-be denials seen since the last flush, by namespace of the release written to.
#[derive(Debug, Default)]
pub struct Learning {
    namespaces: HashMap<String, Delta>,
    dropped: u64,
}

/// One namespace's entries (by [`key`]) and rule uses since the last flush.
#[derive(Debug, Default)]
struct Delta {
    entries: HashMap<String, LearnedEntry>,
    rule_uses: BTreeMap<String, RuleUse>,
}

impl Learning {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one would-be denial at `now` (Unix seconds): one entry per locked path (`""`
    /// for a delete, or a write that names no path), a Secret's data paths as the bare
    /// `/data` or `/stringData`.
    pub fn observe(&mut self, observation: &Observation<'_>, now: i64) {
        let o = observation;
        let mut paths: Vec<&str> = if o.delete || o.paths.is_empty() {
            vec![""]
        } else {
            o.paths
                .iter()
                .map(|path| recorded_path(o.group, o.kind, path))
                .collect()
        };
        paths.sort_unstable();
        paths.dedup();
        let Some(delta) = self.delta(o.release_namespace) else {
            self.dropped += paths.len() as u64;
            return;
        };
        let mut dropped = 0;
        for path in paths {
            let key = key(&KeyParts {
                writer: o.writer,
                field_manager: o.field_manager,
                operation: o.operation,
                subresource: o.subresource,
                release: (o.release_namespace, o.release_name),
                group: o.group,
                kind: o.kind,
                path,
                from_pod: o.from_pod,
            });
            if let Some(entry) = delta.entries.get_mut(key.as_str()) {
                entry.count += 1;
                entry.first_seen = entry.first_seen.min(now);
                entry.last_seen = entry.last_seen.max(now);
                o.decision.clone_into(&mut entry.decision);
                add_object(entry, o.object);
                continue;
            }
            dropped += delta.make_room();
            delta.entries.insert(
                key,
                LearnedEntry {
                    writer: o.writer.to_string(),
                    service_account: service_account(o.writer),
                    field_manager: o.field_manager.map(str::to_string),
                    operation: o.operation.to_string(),
                    subresource: o.subresource.map(str::to_string),
                    release: format!("{}/{}", o.release_namespace, o.release_name),
                    group: o.group.to_string(),
                    kind: o.kind.to_string(),
                    path: path.to_string(),
                    from_pod: o.from_pod,
                    decision: o.decision.to_string(),
                    count: 1,
                    objects: vec![o.object.to_string()],
                    distinct_objects: 1,
                    first_seen: now,
                    last_seen: now,
                },
            );
        }
        self.dropped += dropped;
    }

    /// Records that writer rule `id` let a write to a release of `namespace` through.
    pub fn use_rule(&mut self, namespace: &str, id: &str, now: i64) {
        let Some(delta) = self.delta(namespace) else {
            self.dropped += 1;
            return;
        };
        let used = delta.rule_uses.entry(id.to_string()).or_default();
        used.count += 1;
        used.last_used = used.last_used.max(now);
    }

    /// Every namespace changed since the last call, each as the [`Learned`] to [`merge`] into
    /// its stored one (entries in [`merge`]'s order), by namespace; the memory is empty after.
    pub fn take_dirty(&mut self) -> Vec<Learned> {
        let mut dirty: Vec<Learned> = self
            .namespaces
            .drain()
            .map(|(namespace, delta)| {
                let mut entries: Vec<LearnedEntry> = delta.entries.into_values().collect();
                entries.sort_by(order);
                Learned {
                    namespace,
                    entries,
                    rule_uses: delta.rule_uses,
                }
            })
            .collect();
        dirty.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        dirty
    }

    /// Takes back what [`Learning::take_dirty`] gave and could not be written, to go with the
    /// next flush: merged with what was seen meanwhile, within the bounds.
    pub fn give_back(&mut self, learned: Learned) {
        let Some(delta) = self.delta(&learned.namespace) else {
            self.dropped += learned.entries.len() as u64;
            return;
        };
        let mut dropped = 0;
        for entry in learned.entries {
            let key = entry_key(&entry);
            match delta.entries.remove(&key) {
                Some(seen) => {
                    delta.entries.insert(key, merge_entry(seen, entry));
                }
                None => {
                    dropped += delta.make_room();
                    delta.entries.insert(key, entry);
                }
            }
        }
        for (id, used) in learned.rule_uses {
            let into = delta.rule_uses.entry(id).or_default();
            *into = merge_rule_use(into, &used);
        }
        self.dropped += dropped;
    }

    /// Would-be denials not kept since the last call (past a bound).
    pub fn take_dropped(&mut self) -> u64 {
        std::mem::take(&mut self.dropped)
    }

    /// Entries held in memory.
    pub fn len(&self) -> usize {
        self.namespaces.values().map(|d| d.entries.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty()
    }

    /// The namespace's delta, made when missing and there is room for one more.
    fn delta(&mut self, namespace: &str) -> Option<&mut Delta> {
        if !self.namespaces.contains_key(namespace) {
            if self.namespaces.len() >= MAX_LEARNED_NAMESPACES {
                return None;
            }
            self.namespaces
                .insert(namespace.to_string(), Delta::default());
        }
        self.namespaces.get_mut(namespace)
    }
}

impl Delta {
    /// Makes room for one more entry: drops the one [`rank`] puts last when full. How many
    /// were dropped.
    fn make_room(&mut self) -> u64 {
        if self.entries.len() < MAX_ENTRIES_PER_NAMESPACE {
            return 0;
        }
        let last = self
            .entries
            .iter()
            .min_by(|(ka, a), (kb, b)| rank(a, b).reverse().then_with(|| ka.cmp(kb)))
            .map(|(key, _)| key.clone());
        match last {
            Some(key) => {
                self.entries.remove(&key);
                1
            }
            None => 0,
        }
    }
}

/// The stored evidence of a namespace and what was learned since, as one: the entries with
/// the same key are added up (counts add, first seen the earlier, last seen the later, object
/// names joined), the rule uses likewise; at most [`MAX_ENTRIES_PER_NAMESPACE`] entries are
/// kept, the most recently seen (then the most counted). Returns the merged evidence and how
/// many entries did not fit. The order of the two does not change the result (but for
/// `namespace`, which is `stored`'s).
pub fn merge(stored: Learned, learned: Learned) -> (Learned, u64) {
    let mut by_key: HashMap<String, LearnedEntry> = HashMap::new();
    for entry in stored.entries.into_iter().chain(learned.entries) {
        let key = entry_key(&entry);
        let merged = match by_key.remove(&key) {
            Some(seen) => merge_entry(seen, entry),
            None => entry,
        };
        by_key.insert(key, merged);
    }
    let mut entries: Vec<LearnedEntry> = by_key.into_values().collect();
    let mut dropped = 0;
    if entries.len() > MAX_ENTRIES_PER_NAMESPACE {
        entries.sort_by(|a, b| rank(a, b).then_with(|| order(a, b)));
        dropped = (entries.len() - MAX_ENTRIES_PER_NAMESPACE) as u64;
        entries.truncate(MAX_ENTRIES_PER_NAMESPACE);
    }
    entries.sort_by(order);
    let mut rule_uses = stored.rule_uses;
    for (id, used) in learned.rule_uses {
        let into = rule_uses.entry(id).or_default();
        *into = merge_rule_use(into, &used);
    }
    let merged = Learned {
        namespace: stored.namespace,
        entries,
        rule_uses,
    };
    (merged, dropped)
}

/// The path as recorded: a Secret's `/data/<key>` (or `stringData`) is the bare `/data`, so
/// neither a value nor the name of a Secret's key is ever kept.
fn recorded_path<'a>(group: &str, kind: &str, path: &'a str) -> &'a str {
    if group.is_empty() && kind == "Secret" {
        for data in ["/data", "/stringData"] {
            if path
                .strip_prefix(data)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            {
                return &path[..data.len()];
            }
        }
    }
    path
}

/// `namespace/name` of a service account's username (`system:serviceaccount:ns:name`).
fn service_account(writer: &str) -> Option<String> {
    let (namespace, name) = writer
        .strip_prefix("system:serviceaccount:")?
        .split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':'))
        .then(|| format!("{namespace}/{name}"))
}

/// Adds an object name to an entry: kept while there is room (the names sorted, the first
/// [`MAX_OBJECT_NAMES`]), counted as distinct when among neither the kept names nor too many.
fn add_object(entry: &mut LearnedEntry, object: &str) {
    if entry.objects.iter().any(|o| o == object) {
        return;
    }
    if entry.objects.len() < MAX_OBJECT_NAMES {
        let at = entry.objects.partition_point(|o| o.as_str() < object);
        entry.objects.insert(at, object.to_string());
        entry.distinct_objects = entry.distinct_objects.max(entry.objects.len() as u64);
    }
}

/// Two entries of one key as one.
fn merge_entry(a: LearnedEntry, b: LearnedEntry) -> LearnedEntry {
    // The decision of the later write (ties: the stricter, `deny`, sorts before `warn`).
    let decision = match a.last_seen.cmp(&b.last_seen) {
        std::cmp::Ordering::Less => b.decision.clone(),
        std::cmp::Ordering::Greater => a.decision.clone(),
        std::cmp::Ordering::Equal => a.decision.clone().min(b.decision.clone()),
    };
    let exact = a.distinct_objects == a.objects.len() as u64
        && b.distinct_objects == b.objects.len() as u64;
    let union: BTreeSet<String> = a.objects.into_iter().chain(b.objects).collect();
    // Exact while every name is known; past the kept names, at least as many as either knew.
    let distinct_objects = if exact {
        union.len() as u64
    } else {
        a.distinct_objects
            .max(b.distinct_objects)
            .max(union.len() as u64)
    };
    LearnedEntry {
        count: a.count.saturating_add(b.count),
        first_seen: a.first_seen.min(b.first_seen),
        last_seen: a.last_seen.max(b.last_seen),
        decision,
        objects: union.into_iter().take(MAX_OBJECT_NAMES).collect(),
        distinct_objects,
        ..a
    }
}

fn merge_rule_use(a: &RuleUse, b: &RuleUse) -> RuleUse {
    RuleUse {
        count: a.count.saturating_add(b.count),
        last_used: a.last_used.max(b.last_used),
    }
}

/// Which entry is kept first: the most recently seen, then the most counted.
fn rank(a: &LearnedEntry, b: &LearnedEntry) -> std::cmp::Ordering {
    b.last_seen
        .cmp(&a.last_seen)
        .then_with(|| b.count.cmp(&a.count))
}

/// How a namespace's entries are listed: by release, kind, path, then who wrote how.
fn order(a: &LearnedEntry, b: &LearnedEntry) -> std::cmp::Ordering {
    #[allow(clippy::type_complexity)]
    fn fields(
        e: &LearnedEntry,
    ) -> (
        &str,
        &str,
        &str,
        &str,
        &str,
        Option<&str>,
        &str,
        Option<&str>,
        bool,
    ) {
        (
            e.release.as_str(),
            e.group.as_str(),
            e.kind.as_str(),
            e.path.as_str(),
            e.writer.as_str(),
            e.field_manager.as_deref(),
            e.operation.as_str(),
            e.subresource.as_deref(),
            e.from_pod,
        )
    }
    fields(a).cmp(&fields(b))
}

/// The fields an entry is keyed by.
struct KeyParts<'a> {
    writer: &'a str,
    field_manager: Option<&'a str>,
    operation: &'a str,
    subresource: Option<&'a str>,
    /// Namespace and name.
    release: (&'a str, &'a str),
    group: &'a str,
    kind: &'a str,
    path: &'a str,
    from_pod: bool,
}

/// An entry's key as one string: each field length-prefixed, so no writer or path, whatever
/// it holds, makes two keys one.
fn key(parts: &KeyParts<'_>) -> String {
    fn field(key: &mut String, parts: &[&str]) {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let _ = write!(key, "{len}:");
        parts.iter().for_each(|p| key.push_str(p));
    }
    fn optional(key: &mut String, value: Option<&str>) {
        match value {
            None => key.push('-'),
            Some(value) => {
                key.push('+');
                field(key, &[value]);
            }
        }
    }
    let p = parts;
    let mut key = String::with_capacity(
        p.writer.len()
            + p.field_manager.map_or(0, str::len)
            + p.operation.len()
            + p.subresource.map_or(0, str::len)
            + p.release.0.len()
            + p.release.1.len()
            + p.group.len()
            + p.kind.len()
            + p.path.len()
            + 40,
    );
    field(&mut key, &[p.writer]);
    optional(&mut key, p.field_manager);
    field(&mut key, &[p.operation]);
    optional(&mut key, p.subresource);
    field(&mut key, &[p.release.0, "/", p.release.1]);
    field(&mut key, &[p.group]);
    field(&mut key, &[p.kind]);
    field(&mut key, &[p.path]);
    key.push(if p.from_pod { 'P' } else { 'N' });
    key
}

/// A stored entry's key, the same as its observation's.
fn entry_key(e: &LearnedEntry) -> String {
    let (namespace, name) = e.release.split_once('/').unwrap_or((&e.release, ""));
    key(&KeyParts {
        writer: &e.writer,
        field_manager: e.field_manager.as_deref(),
        operation: &e.operation,
        subresource: e.subresource.as_deref(),
        release: (namespace, name),
        group: &e.group,
        kind: &e.kind,
        path: &e.path,
        from_pod: e.from_pod,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCALER: &str = "system:serviceaccount:ops:scaler";

    fn scale<'a>(paths: &'a [&'a str]) -> Observation<'a> {
        Observation {
            writer: SCALER,
            field_manager: Some("scaler"),
            operation: "UPDATE",
            subresource: Some("scale"),
            release_namespace: "shop",
            release_name: "shop",
            group: "apps",
            kind: "Deployment",
            object: "shop-web",
            paths,
            delete: false,
            from_pod: true,
            decision: "warn",
        }
    }

    fn learned_of(learning: &mut Learning) -> Vec<Learned> {
        learning.take_dirty()
    }

    #[test]
    fn repeated_writes_are_one_entry_counted_with_first_and_last_seen() {
        let mut learning = Learning::new();
        learning.observe(&scale(&["/spec/replicas"]), 100);
        learning.observe(&scale(&["/spec/replicas"]), 160);
        learning.observe(
            &Observation {
                object: "shop-api",
                ..scale(&["/spec/replicas"])
            },
            130,
        );
        let dirty = learned_of(&mut learning);
        assert_eq!(dirty.len(), 1);
        assert_eq!(dirty[0].namespace, "shop");
        let [entry] = &dirty[0].entries[..] else {
            panic!("{:?}", dirty[0].entries)
        };
        assert_eq!(entry.count, 3);
        assert_eq!((entry.first_seen, entry.last_seen), (100, 160));
        assert_eq!(entry.objects, ["shop-api", "shop-web"]);
        assert_eq!(entry.distinct_objects, 2);
        assert_eq!(entry.service_account.as_deref(), Some("ops/scaler"));
        assert_eq!(entry.release, "shop/shop");
        assert_eq!(entry.path, "/spec/replicas");
        // Taken: the memory is empty, the next flush writes nothing.
        assert!(learning.take_dirty().is_empty());
        assert!(learning.is_empty());
    }

    #[test]
    fn a_pod_bound_token_and_the_same_token_from_elsewhere_are_kept_apart() {
        let mut learning = Learning::new();
        learning.observe(&scale(&["/spec/replicas"]), 100);
        learning.observe(
            &Observation {
                from_pod: false,
                ..scale(&["/spec/replicas"])
            },
            101,
        );
        let entries = &learned_of(&mut learning)[0].entries;
        assert_eq!(entries.len(), 2);
        assert_eq!(
            entries
                .iter()
                .map(|e| (e.from_pod, e.count))
                .collect::<Vec<_>>(),
            [(false, 1), (true, 1)]
        );
    }

    #[test]
    fn each_key_field_makes_its_own_entry() {
        let mut learning = Learning::new();
        let base = scale(&["/spec/replicas"]);
        let variants = [
            base,
            Observation {
                writer: "alice",
                ..base
            },
            Observation {
                field_manager: None,
                ..base
            },
            Observation {
                field_manager: Some(""),
                ..base
            },
            Observation {
                operation: "CREATE",
                ..base
            },
            Observation {
                subresource: None,
                ..base
            },
            Observation {
                release_name: "other",
                ..base
            },
            Observation {
                group: "apps.example",
                ..base
            },
            Observation {
                kind: "StatefulSet",
                ..base
            },
            Observation {
                paths: &["/spec/template"],
                ..base
            },
        ];
        for v in &variants {
            learning.observe(v, 1);
        }
        // The object and the decision are no key fields.
        learning.observe(
            &Observation {
                object: "x",
                decision: "deny",
                ..base
            },
            2,
        );
        let entries = &learned_of(&mut learning)[0].entries;
        assert_eq!(entries.len(), variants.len());
        let base_entry = entries
            .iter()
            .find(|e| e.count == 2)
            .expect("the base counted twice");
        assert_eq!(base_entry.decision, "deny", "the later write's decision");
    }

    #[test]
    fn a_length_prefixed_key_keeps_look_alike_fields_apart() {
        let a = key(&KeyParts {
            writer: "a:b",
            field_manager: None,
            operation: "UPDATE",
            subresource: None,
            release: ("ns", "r"),
            group: "",
            kind: "K",
            path: "/p",
            from_pod: false,
        });
        let b = key(&KeyParts {
            writer: "a",
            field_manager: Some("b"),
            ..KeyParts {
                writer: "",
                field_manager: None,
                operation: "UPDATE",
                subresource: None,
                release: ("ns", "r"),
                group: "",
                kind: "K",
                path: "/p",
                from_pod: false,
            }
        });
        assert_ne!(a, b);
        let c = key(&KeyParts {
            release: ("ns/r", ""),
            ..KeyParts {
                writer: "a:b",
                field_manager: None,
                operation: "UPDATE",
                subresource: None,
                release: ("", ""),
                group: "",
                kind: "K",
                path: "/p",
                from_pod: false,
            }
        });
        // `ns` + `/` + `r` and `ns/r` + `/` + `` differ by where the slash is.
        assert_ne!(a, c);
    }

    #[test]
    fn a_delete_is_recorded_with_the_empty_path() {
        let mut learning = Learning::new();
        learning.observe(
            &Observation {
                operation: "DELETE",
                subresource: None,
                delete: true,
                paths: &[],
                ..scale(&[])
            },
            5,
        );
        let entries = &learned_of(&mut learning)[0].entries;
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].path, "");
        assert_eq!(entries[0].operation, "DELETE");
    }

    #[test]
    fn no_value_and_no_secret_key_name_is_ever_stored() {
        let mut learning = Learning::new();
        // A Secret's password changed (its value, base64 and plain, never reaches the
        // recorder; its key name must not be kept either), and a ConfigMap's value.
        learning.observe(
            &Observation {
                writer: "mallory",
                field_manager: Some("kubectl-edit"),
                subresource: None,
                group: "",
                kind: "Secret",
                object: "shop-db",
                paths: &["/data/password", "/data/api-token", "/stringData/extra-key"],
                from_pod: false,
                ..scale(&[])
            },
            10,
        );
        learning.observe(
            &Observation {
                writer: "mallory",
                subresource: None,
                group: "",
                kind: "ConfigMap",
                object: "shop-config",
                paths: &["/data/greeting"],
                ..scale(&[])
            },
            11,
        );
        let dirty = learned_of(&mut learning);
        let (merged, _) = merge(
            Learned {
                namespace: "shop".into(),
                ..Learned::default()
            },
            dirty[0].clone(),
        );
        let json = serde_json::to_string(&merged).unwrap();
        for secret in [
            "password",
            "api-token",
            "extra-key",
            "hunter2",
            "aHVudGVyMg==",
        ] {
            assert!(!json.contains(secret), "{secret} in {json}");
        }
        let secret_paths: Vec<&str> = merged
            .entries
            .iter()
            .filter(|e| e.kind == "Secret")
            .map(|e| e.path.as_str())
            .collect();
        assert_eq!(secret_paths, ["/data", "/stringData"]);
        // A ConfigMap's key names are no secret and say what was changed; its value is not
        // there either (the recorder is given paths only).
        assert!(json.contains("/data/greeting"));
        assert!(!json.contains("hello, shop"));
        // Control: a Secret's other paths (its labels, say) are kept as they are.
        assert_eq!(
            recorded_path("", "Secret", "/metadata/labels/tier"),
            "/metadata/labels/tier"
        );
        // A Secret-named kind of another group is not a Secret.
        assert_eq!(recorded_path("example.com", "Secret", "/data/x"), "/data/x");
        assert_eq!(recorded_path("", "Secret", "/database/x"), "/database/x");
    }

    #[test]
    fn entries_past_the_bound_drop_the_least_recently_seen_and_are_counted() {
        let mut learning = Learning::new();
        let paths: Vec<String> = (0..MAX_ENTRIES_PER_NAMESPACE + 5)
            .map(|i| format!("/spec/p{i}"))
            .collect();
        for (i, path) in paths.iter().enumerate() {
            learning.observe(&scale(&[path.as_str()]), i as i64);
        }
        assert_eq!(learning.len(), MAX_ENTRIES_PER_NAMESPACE);
        assert_eq!(learning.take_dropped(), 5);
        assert_eq!(learning.take_dropped(), 0);
        let entries = &learned_of(&mut learning)[0].entries;
        // The five first seen went.
        assert!(entries.iter().all(|e| e.first_seen >= 5), "{entries:?}");
    }

    #[test]
    fn namespaces_past_the_bound_are_dropped_and_counted_until_the_flush() {
        let mut learning = Learning::new();
        let names: Vec<String> = (0..=MAX_LEARNED_NAMESPACES)
            .map(|i| format!("ns{i}"))
            .collect();
        for ns in &names {
            learning.observe(
                &Observation {
                    release_namespace: ns,
                    ..scale(&["/spec/replicas"])
                },
                1,
            );
        }
        assert_eq!(learning.take_dropped(), 1);
        assert_eq!(learning.take_dirty().len(), MAX_LEARNED_NAMESPACES);
        // Flushed: there is room again.
        learning.observe(&scale(&["/spec/replicas"]), 2);
        assert_eq!(learning.take_dropped(), 0);
        assert_eq!(learning.take_dirty().len(), 1);
    }

    #[test]
    fn object_names_are_bounded_and_distinct_objects_counted() {
        let mut learning = Learning::new();
        let names: Vec<String> = (0..MAX_OBJECT_NAMES + 10)
            .map(|i| format!("pod-{i:03}"))
            .collect();
        for name in &names {
            learning.observe(
                &Observation {
                    object: name,
                    ..scale(&["/spec/replicas"])
                },
                1,
            );
        }
        let entry = &learned_of(&mut learning)[0].entries[0];
        assert_eq!(entry.objects.len(), MAX_OBJECT_NAMES);
        assert_eq!(entry.count, names.len() as u64);
        assert!(entry.distinct_objects >= MAX_OBJECT_NAMES as u64);
    }

    fn entry(path: &str, count: u64, first: i64, last: i64, objects: &[&str]) -> LearnedEntry {
        LearnedEntry {
            writer: SCALER.into(),
            service_account: Some("ops/scaler".into()),
            field_manager: Some("scaler".into()),
            operation: "UPDATE".into(),
            subresource: None,
            release: "shop/shop".into(),
            group: "apps".into(),
            kind: "Deployment".into(),
            path: path.into(),
            from_pod: true,
            decision: "warn".into(),
            count,
            objects: objects.iter().map(|o| o.to_string()).collect(),
            distinct_objects: objects.len() as u64,
            first_seen: first,
            last_seen: last,
        }
    }

    fn learned(entries: Vec<LearnedEntry>, uses: &[(&str, u64, i64)]) -> Learned {
        Learned {
            namespace: "shop".into(),
            entries,
            rule_uses: uses
                .iter()
                .map(|(id, count, last_used)| {
                    (
                        id.to_string(),
                        RuleUse {
                            count: *count,
                            last_used: *last_used,
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn merge_adds_counts_and_widens_the_time_span() {
        let stored = learned(
            vec![entry("/spec/replicas", 3, 100, 200, &["a"])],
            &[("r1", 2, 150)],
        );
        let delta = learned(
            vec![
                entry("/spec/replicas", 2, 250, 300, &["b", "a"]),
                entry("/spec/template", 1, 260, 260, &["a"]),
            ],
            &[("r1", 1, 290), ("r2", 1, 280)],
        );
        let (merged, dropped) = merge(stored, delta);
        assert_eq!(dropped, 0);
        assert_eq!(merged.entries.len(), 2);
        let replicas = &merged.entries[0];
        assert_eq!(replicas.path, "/spec/replicas");
        assert_eq!(replicas.count, 5);
        assert_eq!((replicas.first_seen, replicas.last_seen), (100, 300));
        assert_eq!(replicas.objects, ["a", "b"]);
        assert_eq!(replicas.distinct_objects, 2);
        assert_eq!(
            merged.rule_uses["r1"],
            RuleUse {
                count: 3,
                last_used: 290
            }
        );
        assert_eq!(merged.rule_uses["r2"].count, 1);
    }

    #[test]
    fn merge_is_order_independent() {
        let parts = [
            learned(
                vec![
                    entry("/spec/replicas", 3, 100, 200, &["a", "b"]),
                    entry("/spec/x", 1, 5, 5, &["c"]),
                ],
                &[("r1", 2, 150)],
            ),
            learned(
                vec![entry("/spec/replicas", 2, 50, 300, &["c"])],
                &[("r1", 1, 100)],
            ),
            learned(
                vec![
                    entry("/spec/x", 4, 1, 400, &["d", "a"]),
                    LearnedEntry {
                        decision: "deny".into(),
                        ..entry("/spec/replicas", 1, 300, 300, &["a"])
                    },
                ],
                &[("r3", 7, 1)],
            ),
        ];
        let fold = |order: [usize; 3]| {
            let mut acc = learned(vec![], &[]);
            for i in order {
                acc = merge(acc, parts[i].clone()).0;
            }
            acc
        };
        let first = fold([0, 1, 2]);
        for order in [[0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]] {
            assert_eq!(fold(order), first, "{order:?}");
        }
        // And pairwise: merge(a, b) == merge(b, a).
        assert_eq!(
            merge(parts[0].clone(), parts[2].clone()),
            merge(parts[2].clone(), parts[0].clone())
        );
    }

    #[test]
    fn merge_keeps_the_most_recently_seen_within_the_bound() {
        let stored = learned(
            (0..MAX_ENTRIES_PER_NAMESPACE)
                .map(|i| entry(&format!("/old/{i}"), 100, 1, 10, &["a"]))
                .collect(),
            &[],
        );
        let delta = learned(
            (0..3)
                .map(|i| entry(&format!("/new/{i}"), 1, 20, 20, &["a"]))
                .collect(),
            &[],
        );
        let (merged, dropped) = merge(stored, delta);
        assert_eq!(dropped, 3);
        assert_eq!(merged.entries.len(), MAX_ENTRIES_PER_NAMESPACE);
        assert_eq!(
            merged
                .entries
                .iter()
                .filter(|e| e.path.starts_with("/new/"))
                .count(),
            3
        );
    }

    #[test]
    fn what_could_not_be_written_goes_with_the_next_flush() {
        let mut learning = Learning::new();
        learning.observe(&scale(&["/spec/replicas"]), 100);
        learning.use_rule("shop", "r1", 100);
        let failed = learning.take_dirty();
        learning.observe(&scale(&["/spec/replicas"]), 200);
        for learned in failed {
            learning.give_back(learned);
        }
        let dirty = learning.take_dirty();
        let entry = &dirty[0].entries[0];
        assert_eq!(entry.count, 2);
        assert_eq!((entry.first_seen, entry.last_seen), (100, 200));
        assert_eq!(dirty[0].rule_uses["r1"].count, 1);
    }

    #[test]
    fn merged_evidence_reads_back_as_written() {
        // What the leader writes and a restarted one reads: the same proposals follow.
        let mut learning = Learning::new();
        learning.observe(
            &scale(&["/spec/replicas", "/spec/template/spec/containers/0/image"]),
            1,
        );
        let (merged, _) = merge(learned(vec![], &[]), learning.take_dirty().remove(0));
        let text = serde_json::to_string(&merged).unwrap();
        let read: Learned = serde_json::from_str(&text).unwrap();
        assert_eq!(read, merged);
        assert_eq!(merge(read.clone(), learned(vec![], &[])).0, merged);
    }

    #[test]
    fn a_service_account_is_named_from_its_username() {
        assert_eq!(service_account(SCALER).as_deref(), Some("ops/scaler"));
        assert_eq!(service_account("alice"), None);
        assert_eq!(service_account("system:serviceaccount:ops"), None);
        assert_eq!(service_account("system:serviceaccount::x"), None);
    }
}
