//! Prometheus metrics for the admin port's `/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::core::{DecisionKind, Endpoint, Operation};
use crate::sharded_metrics::{ShardedCounter, ShardedHistogram};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct AdmissionLabels {
    pub endpoint: &'static str,
    pub operation: &'static str,
    pub decision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct DenialLabels {
    /// `namespace/name` of the release.
    pub release: String,
    /// deny, warn or repair.
    pub decision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RuleLabels {
    /// The writer rule's id.
    pub rule: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct StatusLabels {
    /// Helm's status of the release's newest revision: deployed, failed, pending-upgrade...
    pub status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResultLabels {
    pub result: &'static str,
}

/// A `result` label's known values, declared once: the enum the emitting code names, the
/// strings [`TABLE`]'s row lists (so the series start at 0, and scripts/check-docs.py finds
/// each in docs/operations.md's row).
pub(crate) trait ResultValue: Copy {
    const NAMES: &'static [&'static str];
    fn as_str(self) -> &'static str;
}

macro_rules! result_values {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl ResultValue for $name {
            const NAMES: &'static [&'static str] = &[$($text,)+];
            fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }
        }
    };
}

result_values! {
    /// `helm_locker_reverts_total{result}`: what one of the reverter's writes came to.
    RevertResult {
        Reverted = "reverted",
        Recreated = "recreated",
        /// The object's fields given back to Helm's field manager (a restore by another).
        OwnershipReturned = "ownership_returned",
        Failed = "failed",
        /// The revision's author may not make the write, or is not known.
        Refused = "refused",
    }
}

result_values! {
    /// `helm_locker_confirmations_total{result}`: the fresh read of a release before a deny.
    ConfirmResult {
        Pending = "pending",
        Unchanged = "unchanged",
        Error = "error",
        Timeout = "timeout",
    }
}

result_values! {
    /// `helm_locker_attempt_events_total{result}`: an Event about a refused write.
    AttemptResult {
        Published = "published",
        HeldBack = "held_back",
        Dropped = "dropped",
        Failed = "failed",
    }
}

result_values! {
    /// `helm_locker_learned_writes_total{result}`: a write of one namespace's learned evidence.
    LearnedWrite {
        Written = "written",
        /// Another replica wrote it first: read again and merged again.
        Conflict = "conflict",
        /// Given up until the next flush (which writes it with what was seen meanwhile).
        Failed = "failed",
    }
}

result_values! {
    /// `helm_locker_schema_refreshes_total{result}`: a read of the API server's /openapi/v2.
    SchemaRefresh {
        Changed = "changed",
        Unchanged = "unchanged",
        Error = "error",
    }
}

/// A counter by `result`, whose values are `R`'s and each present from start-up at 0 (a
/// counter first seen at 1 gives `increase()` nothing: the first failed revert would not fire
/// `HelmLockerRevertsFailing`).
#[derive(Clone, Debug)]
pub(crate) struct ResultCounter<R> {
    family: Family<ResultLabels, Counter>,
    values: std::marker::PhantomData<fn(R)>,
}

impl<R: ResultValue> ResultCounter<R> {
    fn new() -> Self {
        let family = Family::<ResultLabels, Counter>::default();
        for result in R::NAMES {
            drop(family.get_or_create(&ResultLabels { result }));
        }
        ResultCounter {
            family,
            values: std::marker::PhantomData,
        }
    }

    pub(crate) fn inc(&self, result: R) {
        self.family
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }

    #[cfg(test)]
    pub(crate) fn get(&self, result: R) -> u64 {
        self.family
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .get()
    }
}

/// A label of `helm_locker_admissions_total` whose values are an enum's: the text is the enum's
/// own (`as_str`, one per enum), and `ALL` its values in the order of [`Metrics::admitted`]'s
/// table.
pub(crate) trait AdmissionLabel: Copy + PartialEq + 'static {
    const ALL: &'static [Self];
    fn as_label(self) -> &'static str;
    /// Where it is in [`AdmissionLabel::ALL`].
    fn position(self) -> Option<usize> {
        Self::ALL.iter().position(|value| *value == self)
    }
}

impl AdmissionLabel for Endpoint {
    const ALL: &'static [Self] = &Endpoint::ALL;
    fn as_label(self) -> &'static str {
        self.as_str()
    }
}

impl AdmissionLabel for Operation {
    const ALL: &'static [Self] = &Operation::ALL;
    fn as_label(self) -> &'static str {
        self.as_str()
    }
}

impl AdmissionLabel for DecisionKind {
    const ALL: &'static [Self] = &DecisionKind::ALL;
    fn as_label(self) -> &'static str {
        self.as_str()
    }
}

const ADMISSION_SERIES: usize = <Endpoint as AdmissionLabel>::ALL.len()
    * <Operation as AdmissionLabel>::ALL.len()
    * <DecisionKind as AdmissionLabel>::ALL.len();

/// What kind of metric a row is, as `/metrics` types it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Exported with `_total`.
    Counter,
    Gauge,
    Histogram,
}

/// One metric `/metrics` exports: its name without `helm_locker_` (and without a counter's
/// `_total`), its kind, its labels and its help. docs/operations.md's metrics table is checked
/// against these rows (scripts/check-docs.py), and the registry against them (the tests below).
#[derive(Debug)]
#[cfg_attr(
    not(test),
    allow(
        dead_code,
        reason = "kind and labels are read by the tests and scripts/check-docs.py"
    )
)]
pub(crate) struct Row {
    pub name: &'static str,
    pub kind: Kind,
    pub labels: &'static [&'static str],
    /// The `result` label's values (a [`ResultValue`]'s names), else empty.
    pub results: &'static [&'static str],
    pub help: &'static str,
}

/// Every metric, one row each.
pub(crate) const TABLE: &[Row] = &[
    Row {
        name: "admissions",
        kind: Kind::Counter,
        labels: &["endpoint", "operation", "decision"],
        results: &[],
        help: "Admission reviews answered, by endpoint, operation and decision",
    },
    Row {
        name: "admission_duration_seconds",
        kind: Kind::Histogram,
        labels: &[],
        results: &[],
        help: "Time to answer an admission review, body read excluded",
    },
    Row {
        name: "bad_requests",
        kind: Kind::Counter,
        labels: &[],
        results: &[],
        help: "Requests refused as malformed, oversized or too slow",
    },
    Row {
        name: "releases_indexed",
        kind: Kind::Gauge,
        labels: &[],
        results: &[],
        help: "Helm releases in the index",
    },
    Row {
        name: "releases_by_status",
        kind: Kind::Gauge,
        labels: &["status"],
        results: &[],
        help: "Indexed Helm releases by the status of their newest revision; deployed and failed ones are locked (failed: the last install, upgrade or rollback failed; locked at that revision, not reverted, until one succeeds)",
    },
    Row {
        name: "certificate_expiry_timestamp_seconds",
        kind: Kind::Gauge,
        labels: &[],
        results: &[],
        help: "When the serving certificate being served expires (Unix time); set when it is loaded or reloaded",
    },
    Row {
        name: "objects_indexed",
        kind: Kind::Gauge,
        labels: &[],
        results: &[],
        help: "Objects owned by the newest revision of indexed releases",
    },
    Row {
        name: "claim_conflicts",
        kind: Kind::Gauge,
        labels: &[],
        results: &[],
        help: "Objects rendered by more than one release (`helm-locker inspect` lists them); the release the object's meta.helm.sh annotations name owns it",
    },
    Row {
        name: "denials",
        kind: Kind::Counter,
        labels: &["release", "decision"],
        results: &[],
        help: "Writes to locked objects denied, warned about or repaired, by release and decision (dry runs included)",
    },
    Row {
        name: "attempt_events",
        kind: Kind::Counter,
        labels: &["result"],
        results: <AttemptResult as ResultValue>::NAMES,
        help: "Denials, warnings and repairs offered as Kubernetes Events, by result (published, held_back: within the window of an earlier one, dropped: the queue was full, failed)",
    },
    Row {
        name: "learned_entries",
        kind: Kind::Gauge,
        labels: &[],
        results: &[],
        help: "Would-be denials kept as learned evidence (entries of the learned ConfigMaps this replica last read or wrote)",
    },
    Row {
        name: "learned_dropped",
        kind: Kind::Counter,
        labels: &[],
        results: &[],
        help: "Would-be denials not kept as learned evidence: past the entries kept per namespace, or the namespaces held between two flushes",
    },
    Row {
        name: "learned_writes",
        kind: Kind::Counter,
        labels: &["result"],
        results: <LearnedWrite as ResultValue>::NAMES,
        help: "Writes of a namespace's learned ConfigMap, by result (written, conflict: another replica wrote first, read and merged again; failed: kept for the next flush)",
    },
    Row {
        name: "schema_kinds",
        kind: Kind::Gauge,
        labels: &[],
        results: &[],
        help: "Kinds whose list and map semantics are known (embedded, then the API server's /openapi/v2)",
    },
    Row {
        name: "schema_refreshes",
        kind: Kind::Counter,
        labels: &["result"],
        results: <SchemaRefresh as ResultValue>::NAMES,
        help: "Reads of the API server's /openapi/v2, by result (changed, unchanged, error)",
    },
    Row {
        name: "ownership_mismatches",
        kind: Kind::Counter,
        labels: &[],
        results: &[],
        help: "Live objects whose managedFields entry for Helm differs from what helm-locker locks (a schema gap; see the log)",
    },
    Row {
        name: "foreign_release_secrets",
        kind: Kind::Counter,
        labels: &[],
        results: &[],
        help: "Release Secrets ignored because the release they hold names another namespace than the Secret's own, or is kept by another driver than the release's, and its author may not write there (each gets a Warning Event)",
    },
    Row {
        name: "releases_too_large",
        kind: Kind::Counter,
        labels: &[],
        results: &[],
        help: "Release Secrets skipped because their release is larger than --max-release-bytes once decompressed (not decompressed past it; each gets a Warning Event)",
    },
    Row {
        name: "releases_too_many_objects",
        kind: Kind::Counter,
        labels: &[],
        results: &[],
        help: "Release Secrets skipped because their release renders more objects (manifest documents and hooks) than --max-release-objects (counted before any is parsed; each gets a ReleaseTooLarge Warning Event)",
    },
    Row {
        name: "releases_over_namespace_bound",
        kind: Kind::Counter,
        labels: &[],
        results: &[],
        help: "Releases not indexed (they lock nothing) because the releases stored in their namespace would keep more objects than --max-namespace-objects; the earliest-created are kept (each refusal is one log line and a ReleaseTooLarge Warning Event)",
    },
    Row {
        name: "unproven_claims_allowed",
        kind: Kind::Counter,
        labels: &[],
        results: &[],
        help: "Writes allowed because the object a release renders does not carry that release's meta.helm.sh annotations (Helm neither made nor adopted it)",
    },
    Row {
        name: "unproven_objects",
        kind: Kind::Gauge,
        labels: &[],
        results: &[],
        help: "Live objects that releases render but that do not carry the release's meta.helm.sh annotations: neither locked nor reverted (seen by the reverter's watches)",
    },
    Row {
        name: "missing_objects",
        kind: Kind::Gauge,
        labels: &[],
        results: &[],
        help: "Objects of locked releases that do not exist and that the reverter leaves to helm upgrade (it never saw them carry the release's annotations, and no HelmRelease vouches for the release); each gets a Warning Event on the release Secret",
    },
    Row {
        name: "author_stamps",
        kind: Kind::Counter,
        labels: &[],
        results: &[],
        help: "Release Secret writes stamped with their author by the author webhook (POST /stamp)",
    },
    Row {
        name: "author_refused_objects",
        kind: Kind::Gauge,
        labels: &[],
        results: &[],
        help: "Drifted objects the reverter leaves as they are because the author of their release's newest revision may not write them, or is not known; each gets a Warning Event (AuthorLacksRights, UnknownAuthor) on the release Secret",
    },
    Row {
        name: "held_objects",
        kind: Kind::Gauge,
        labels: &[],
        results: &[],
        help: "Objects of releases whose newest revision has no known author (written without the author stamp: before helm-locker was installed, or while it was away) that differ from that revision where the reverter first saw them: held at what was live then, never written from the revision; each gets an UnknownAuthor Warning Event on the release Secret",
    },
    Row {
        name: "unknown_author_releases",
        kind: Kind::Gauge,
        labels: &[],
        results: &[],
        help: "Releases whose newest revision has no known author (found at install, written while the author webhook was away, or under an author key made again): their objects are held, their RBAC and cluster-scoped objects never written, until a helm upgrade or kubectl locker vouch",
    },
    Row {
        name: "pending_release_oldest_seconds",
        kind: Kind::Gauge,
        labels: &[],
        results: &[],
        help: "How long the release longest in pending-install, pending-upgrade, pending-rollback or uninstalling has been so (0: none): a pending revision since its Secret was created, uninstalling since this process saw it; its objects are open to every writer meanwhile (a Helm killed mid-upgrade leaves it so until helm rollback, or helm uninstall for pending-install and uninstalling)",
    },
    Row {
        name: "revert_fights",
        kind: Kind::Gauge,
        labels: &[],
        results: &[],
        help: "Objects whose fields the reverter stopped reverting: it put them back 3 times within 10 minutes at the same revision and another writer changed them again each time (a RevertFight Warning Event names it); a new revision or a restart resumes",
    },
    Row {
        name: "exceptions_open",
        kind: Kind::Gauge,
        labels: &[],
        results: &[],
        help: "LockExceptions open now (each opens a release, or objects or paths of it, to named users until a time)",
    },
    Row {
        name: "exception_longest_open_seconds",
        kind: Kind::Gauge,
        labels: &[],
        results: &[],
        help: "How long the longest-open LockException has been open (0 when none is)",
    },
    Row {
        name: "exceptions_used",
        kind: Kind::Counter,
        labels: &[],
        results: &[],
        help: "Writes to locked objects let through by an open LockException (each is also an Event naming it, the user and the reason)",
    },
    Row {
        name: "writer_rule_uses",
        kind: Kind::Counter,
        labels: &["rule"],
        results: &[],
        help: "Writes to locked objects let through by a writer rule, by the rule's id (each is also a WriterRuleUsed Event; dry runs not counted)",
    },
    Row {
        name: "writer_rules_refused",
        kind: Kind::Counter,
        labels: &[],
        results: &[],
        help: "Writer rules refused when read (invalid, an id used twice, or a HelmRelease's rule naming another release): each is logged and skipped, the others stay",
    },
    Row {
        name: "watch_restarts",
        kind: Kind::Counter,
        labels: &[],
        results: &[],
        help: "Watch errors followed by a reconnect: the release Secret, LockException and reverter watches together",
    },
    Row {
        name: "release_decode_errors",
        kind: Kind::Counter,
        labels: &[],
        results: &[],
        help: "Release Secrets (and release ConfigMaps) that could not be decoded (skipped)",
    },
    Row {
        name: "release_secrets_decoded",
        kind: Kind::Counter,
        labels: &[],
        results: &[],
        help: "Release Secrets (and release ConfigMaps) decoded, from lists and watch events (superseded revisions are not watched)",
    },
    Row {
        name: "release_secrets_unchanged",
        kind: Kind::Counter,
        labels: &[],
        results: &[],
        help: "Release Secrets a list again (after a watch expired) found unchanged and kept without decoding them",
    },
    Row {
        name: "release_secret_lists",
        kind: Kind::Counter,
        labels: &[],
        results: &[],
        help: "Complete lists of release Secrets (or release ConfigMaps): one per watched kind and scope at start-up, and one after each watch expiry",
    },
    Row {
        name: "confirmations",
        kind: Kind::Counter,
        labels: &["result"],
        results: <ConfirmResult as ResultValue>::NAMES,
        help: "Fresh reads of a release before a deny (rule 7), by result",
    },
    Row {
        name: "reverts",
        kind: Kind::Counter,
        labels: &["result"],
        results: <RevertResult as ResultValue>::NAMES,
        help: "Drift put back by the reverter, by result (reverted, recreated, ownership_returned: a restore's fields given back to Helm's field manager, failed; refused: the revision's author may not make the write, or is not known)",
    },
    Row {
        name: "leader",
        kind: Kind::Gauge,
        labels: &[],
        results: &[],
        help: "1 while this replica holds the Lease (and reverts), else 0",
    },
];

/// Registers each metric under its row's name and help.
struct Registrar {
    registry: Registry,
}

impl Default for Registrar {
    fn default() -> Self {
        Registrar {
            registry: Registry::with_prefix("helm_locker"),
        }
    }
}

impl Registrar {
    /// Registers a counter by `result` whose values are `R`'s, each at 0, and checks that they
    /// are the values `name`'s row lists.
    fn results<R: ResultValue>(&mut self, name: &'static str) -> ResultCounter<R> {
        let counter = ResultCounter::<R>::new();
        let row = TABLE.iter().find(|row| row.name == name);
        assert!(
            row.is_some_and(|row| row.results == R::NAMES && row.labels == ["result"]),
            "metric {name}'s row does not list its result values"
        );
        self.add(name, counter.family.clone());
        counter
    }

    /// Registers `metric` with the help of `name`'s row; every metric has one (the tests build
    /// [`Metrics`], so a row missing is found there, never in production).
    fn add<M: prometheus_client::registry::Metric + Clone>(
        &mut self,
        name: &'static str,
        metric: M,
    ) -> M {
        let row = TABLE
            .iter()
            .find(|row| row.name == name)
            .unwrap_or_else(|| panic!("metric {name} has no row in metrics::TABLE"));
        self.registry.register(name, row.help, metric.clone());
        metric
    }
}

pub(crate) struct Metrics {
    registry: Registry,
    admissions: Family<AdmissionLabels, ShardedCounter>,
    /// Each series of `admissions`, looked up once: the family's lookup hashes the labels
    /// under a lock, and every review is counted.
    admission_series: [std::sync::OnceLock<ShardedCounter>; ADMISSION_SERIES],
    pub admission_seconds: ShardedHistogram,
    pub bad_requests: Counter,
    pub releases: Gauge,
    pub releases_by_status: Family<StatusLabels, Gauge>,
    pub certificate_expiry: Gauge,
    pub objects: Gauge,
    pub claim_conflicts: Gauge,
    pub denials: Family<DenialLabels, Counter>,
    pub attempt_events: ResultCounter<AttemptResult>,
    pub learned_entries: Gauge,
    pub learned_dropped: Counter,
    pub learned_writes: ResultCounter<LearnedWrite>,
    pub watch_restarts: Counter,
    pub release_decode_errors: Counter,
    /// Release Secrets decoded (lists and watch events): a superseded revision is never listed.
    pub release_secrets_decoded: Counter,
    /// Release Secrets a list again found as indexed (the same resourceVersion): kept, not
    /// decoded.
    pub release_secrets_unchanged: Counter,
    /// Complete lists of release Secrets (the first in each scope, and each after a watch
    /// expired).
    pub release_secret_lists: Counter,
    pub confirmations: ResultCounter<ConfirmResult>,
    pub reverts: ResultCounter<RevertResult>,
    pub is_leader: Gauge,
    pub schema_kinds: Gauge,
    pub schema_refreshes: ResultCounter<SchemaRefresh>,
    pub ownership_mismatches: Counter,
    pub foreign_release_secrets: Counter,
    pub releases_too_large: Counter,
    pub releases_too_many_objects: Counter,
    pub releases_over_namespace_bound: Counter,
    pub unproven_claims_allowed: Counter,
    pub unproven_objects: Gauge,
    pub missing_objects: Gauge,
    pub author_stamps: Counter,
    pub author_refused_objects: Gauge,
    pub held_objects: Gauge,
    pub unknown_author_releases: Gauge,
    pub pending_release_oldest_seconds: Gauge,
    pub revert_fights: Gauge,
    pub exceptions_open: Gauge,
    pub exception_longest_open_seconds: Gauge,
    pub exceptions_used: Counter,
    /// By the rule's id.
    pub writer_rule_uses: Family<RuleLabels, Counter>,
    pub writer_rules_refused: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Counts one review in `helm_locker_admissions_total`.
    pub(crate) fn admitted(
        &self,
        endpoint: Endpoint,
        operation: Operation,
        decision: DecisionKind,
    ) {
        let labels = AdmissionLabels {
            endpoint: endpoint.as_label(),
            operation: operation.as_label(),
            decision: decision.as_label(),
        };
        let operations = <Operation as AdmissionLabel>::ALL.len();
        let decisions = <DecisionKind as AdmissionLabel>::ALL.len();
        // A value missing from its enum's ALL has no slot: still counted, by the family.
        let slot = endpoint
            .position()
            .zip(operation.position())
            .zip(decision.position())
            .map(|((e, o), d)| (e * operations + o) * decisions + d);
        match slot {
            Some(slot) => self.admission_series[slot]
                .get_or_init(|| self.admissions.get_or_create(&labels).clone())
                .inc(),
            None => self.admissions.get_or_create(&labels).inc(),
        };
    }

    pub(crate) fn new() -> Self {
        let mut table = Registrar::default();
        Metrics {
            admissions: table.add("admissions", Family::default()),
            admission_series: std::array::from_fn(|_| std::sync::OnceLock::new()),
            // 50 µs .. ~3.3 s
            admission_seconds: table.add(
                "admission_duration_seconds",
                ShardedHistogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                    0.00005, 2.0, 17,
                )),
            ),
            bad_requests: table.add("bad_requests", Counter::default()),
            releases: table.add("releases_indexed", Gauge::default()),
            releases_by_status: table.add("releases_by_status", Family::default()),
            certificate_expiry: table.add("certificate_expiry_timestamp_seconds", Gauge::default()),
            objects: table.add("objects_indexed", Gauge::default()),
            claim_conflicts: table.add("claim_conflicts", Gauge::default()),
            denials: table.add("denials", Family::default()),
            attempt_events: table.results("attempt_events"),
            learned_entries: table.add("learned_entries", Gauge::default()),
            learned_dropped: table.add("learned_dropped", Counter::default()),
            learned_writes: table.results("learned_writes"),
            schema_kinds: table.add("schema_kinds", Gauge::default()),
            schema_refreshes: table.results("schema_refreshes"),
            ownership_mismatches: table.add("ownership_mismatches", Counter::default()),
            foreign_release_secrets: table.add("foreign_release_secrets", Counter::default()),
            releases_too_large: table.add("releases_too_large", Counter::default()),
            releases_too_many_objects: table.add("releases_too_many_objects", Counter::default()),
            releases_over_namespace_bound: table
                .add("releases_over_namespace_bound", Counter::default()),
            unproven_claims_allowed: table.add("unproven_claims_allowed", Counter::default()),
            unproven_objects: table.add("unproven_objects", Gauge::default()),
            missing_objects: table.add("missing_objects", Gauge::default()),
            author_stamps: table.add("author_stamps", Counter::default()),
            author_refused_objects: table.add("author_refused_objects", Gauge::default()),
            held_objects: table.add("held_objects", Gauge::default()),
            unknown_author_releases: table.add("unknown_author_releases", Gauge::default()),
            pending_release_oldest_seconds: table
                .add("pending_release_oldest_seconds", Gauge::default()),
            revert_fights: table.add("revert_fights", Gauge::default()),
            exceptions_open: table.add("exceptions_open", Gauge::default()),
            exception_longest_open_seconds: table
                .add("exception_longest_open_seconds", Gauge::default()),
            exceptions_used: table.add("exceptions_used", Counter::default()),
            writer_rule_uses: table.add("writer_rule_uses", Family::default()),
            writer_rules_refused: table.add("writer_rules_refused", Counter::default()),
            watch_restarts: table.add("watch_restarts", Counter::default()),
            release_decode_errors: table.add("release_decode_errors", Counter::default()),
            release_secrets_decoded: table.add("release_secrets_decoded", Counter::default()),
            release_secrets_unchanged: table.add("release_secrets_unchanged", Counter::default()),
            release_secret_lists: table.add("release_secret_lists", Counter::default()),
            confirmations: table.results("confirmations"),
            reverts: table.results("reverts"),
            is_leader: table.add("leader", Gauge::default()),
            registry: table.registry,
        }
    }

    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_review_is_counted_in_its_series() {
        let metrics = Metrics::new();
        for _ in 0..3 {
            metrics.admitted(Endpoint::Validate, Operation::Update, DecisionKind::Deny);
        }
        metrics.admitted(Endpoint::Validate, Operation::Create, DecisionKind::Allow);
        metrics.admitted(Endpoint::Mutate, Operation::Connect, DecisionKind::Repair);
        let text = metrics.render();
        assert!(
            text.contains("helm_locker_admissions_total{endpoint=\"mutate\",operation=\"CONNECT\",decision=\"repair\"} 1"),
            "{text}"
        );
        for (series, count) in [
            ("operation=\"UPDATE\",decision=\"deny\"", 3),
            ("operation=\"CREATE\",decision=\"allow\"", 1),
        ] {
            let line =
                format!("helm_locker_admissions_total{{endpoint=\"validate\",{series}}} {count}");
            assert!(text.contains(&line), "{line} in\n{text}");
        }
        assert!(
            !text.contains("decision=\"warn\""),
            "no series before its first review"
        );
    }

    /// Every endpoint, operation and decision has a slot of its own: one review of each is a
    /// series at 1, none counted in another's.
    #[test]
    fn each_label_set_of_the_enums_is_its_own_series() {
        let metrics = Metrics::new();
        let all = || {
            Endpoint::ALL.into_iter().flat_map(|e| {
                Operation::ALL
                    .into_iter()
                    .flat_map(move |o| DecisionKind::ALL.into_iter().map(move |d| (e, o, d)))
            })
        };
        assert_eq!(all().count(), ADMISSION_SERIES);
        for (e, o, d) in all() {
            metrics.admitted(e, o, d);
        }
        let text = metrics.render();
        for (e, o, d) in all() {
            let line = format!(
                "helm_locker_admissions_total{{endpoint=\"{}\",operation=\"{}\",decision=\"{}\"}} 1",
                e.as_str(),
                o.as_str(),
                d.as_str()
            );
            assert!(text.contains(&line), "{line} in\n{text}");
        }
    }

    #[test]
    fn the_admission_histogram_renders_cumulative_buckets_its_sum_and_count() {
        let metrics = Metrics::new();
        for micros in [30, 60, 60, 250, 9_000_000] {
            metrics
                .admission_seconds
                .observe(std::time::Duration::from_micros(micros));
        }
        let text = metrics.render();
        for line in [
            "helm_locker_admission_duration_seconds_bucket{le=\"0.00005\"} 1",
            "helm_locker_admission_duration_seconds_bucket{le=\"0.0001\"} 3",
            "helm_locker_admission_duration_seconds_bucket{le=\"0.0004\"} 4",
            "helm_locker_admission_duration_seconds_bucket{le=\"+Inf\"} 5",
            "helm_locker_admission_duration_seconds_count 5",
            "helm_locker_admission_duration_seconds_sum 9.0004",
            "# TYPE helm_locker_admission_duration_seconds histogram",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }

    /// Every known result of every counter by result is a series at 0 before anything
    /// happened (ownership_returned included), so its first increase is seen.
    #[test]
    fn every_known_result_starts_at_zero() {
        let text = Metrics::new().render();
        let mut seen = 0;
        for row in TABLE.iter().filter(|row| !row.results.is_empty()) {
            for result in row.results {
                let line = format!("helm_locker_{}_total{{result=\"{result}\"}} 0", row.name);
                assert!(text.contains(&line), "{line} in\n{text}");
                seen += 1;
            }
        }
        assert!(text.contains("helm_locker_reverts_total{result=\"ownership_returned\"} 0"));
        assert_eq!(seen, 19);
        let metrics = Metrics::new();
        metrics.reverts.inc(RevertResult::OwnershipReturned);
        assert_eq!(metrics.reverts.get(RevertResult::OwnershipReturned), 1);
        assert_eq!(metrics.reverts.get(RevertResult::Reverted), 0);
    }

    /// Each row of the table is exported with its kind and help, under labels that are the
    /// row's, and nothing is exported without a row.
    #[test]
    fn every_metric_is_exported_as_its_row_says() {
        let metrics = Metrics::new();
        // A family shows its labels once it has a series.
        metrics.admitted(Endpoint::Validate, Operation::Update, DecisionKind::Deny);
        metrics
            .denials
            .get_or_create(&DenialLabels {
                release: "shop/shop".into(),
                decision: "deny",
            })
            .inc();
        metrics
            .releases_by_status
            .get_or_create(&StatusLabels { status: "deployed" })
            .set(1);
        metrics
            .writer_rule_uses
            .get_or_create(&RuleLabels {
                rule: "shop-web-scaler".into(),
            })
            .inc();
        let text = metrics.render();
        let typed: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("# TYPE "))
            .collect();
        assert_eq!(typed.len(), TABLE.len(), "{text}");
        for row in TABLE {
            let name = format!("helm_locker_{}", row.name);
            let kind = match row.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
                Kind::Histogram => "histogram",
            };
            assert!(
                typed.contains(&format!("# TYPE {name} {kind}").as_str()),
                "{name}"
            );
            assert!(
                text.contains(&format!("# HELP {name} {}", row.help)),
                "{name}"
            );
            let series = match row.kind {
                Kind::Counter => format!("{name}_total"),
                Kind::Gauge => name.clone(),
                Kind::Histogram => format!("{name}_count"),
            };
            for line in text
                .lines()
                .filter(|l| l.starts_with(&format!("{series}{{")))
            {
                let inside = &line[series.len() + 1..line.find('}').unwrap()];
                let labels: Vec<&str> = inside
                    .split(',')
                    .map(|pair| pair.split('=').next().unwrap())
                    .collect();
                assert_eq!(labels, row.labels, "{line}");
            }
            if !row.labels.is_empty() {
                assert!(
                    text.lines().any(|l| l.starts_with(&format!("{series}{{"))),
                    "{name} has a series in this test"
                );
            }
        }
    }
}
