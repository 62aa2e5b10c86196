//! Prometheus metrics for the admin port's `/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

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
pub(crate) struct StatusLabels {
    /// Helm's status of the release's newest revision: deployed, failed, pending-upgrade...
    pub status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResultLabels {
    pub result: &'static str,
}

/// The labels' values of `helm_locker_admissions_total`, in the order of [`Metrics::admitted`]'s
/// table.
const ENDPOINTS: [&str; 2] = ["validate", "mutate"];
const OPERATIONS: [&str; 4] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];
const DECISIONS: [&str; 4] = ["allow", "deny", "warn", "repair"];
const ADMISSION_SERIES: usize = ENDPOINTS.len() * OPERATIONS.len() * DECISIONS.len();

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
    pub attempt_events: Family<ResultLabels, Counter>,
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
    pub confirmations: Family<ResultLabels, Counter>,
    pub reverts: Family<ResultLabels, Counter>,
    pub is_leader: Gauge,
    pub schema_kinds: Gauge,
    pub schema_refreshes: Family<ResultLabels, Counter>,
    pub ownership_mismatches: Counter,
    pub foreign_release_secrets: Counter,
    pub unproven_claims_allowed: Counter,
    pub unproven_objects: Gauge,
    pub missing_objects: Gauge,
    pub author_stamps: Counter,
    pub author_refused_objects: Gauge,
    pub held_objects: Gauge,
    pub pending_release_oldest_seconds: Gauge,
    pub revert_fights: Gauge,
    pub exceptions_open: Gauge,
    pub exception_longest_open_seconds: Gauge,
    pub exceptions_used: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Counts one review in `helm_locker_admissions_total`.
    pub(crate) fn admitted(&self, labels: AdmissionLabels) {
        let position = |values: &[&str], value: &str| values.iter().position(|v| *v == value);
        let slot = position(&ENDPOINTS, labels.endpoint)
            .zip(position(&OPERATIONS, labels.operation))
            .zip(position(&DECISIONS, labels.decision))
            .map(|((e, o), d)| (e * OPERATIONS.len() + o) * DECISIONS.len() + d);
        match slot {
            Some(slot) => self.admission_series[slot]
                .get_or_init(|| self.admissions.get_or_create(&labels).clone())
                .inc(),
            None => self.admissions.get_or_create(&labels).inc(),
        };
    }

    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("helm_locker");
        let admissions = Family::<AdmissionLabels, ShardedCounter>::default();
        registry.register(
            "admissions",
            "Admission reviews answered, by endpoint, operation and decision",
            admissions.clone(),
        );
        // 50 µs .. ~3.3 s
        let admission_seconds = ShardedHistogram::new(
            prometheus_client::metrics::histogram::exponential_buckets(0.00005, 2.0, 17),
        );
        registry.register(
            "admission_duration_seconds",
            "Time to answer an admission review, body read excluded",
            admission_seconds.clone(),
        );
        let bad_requests = Counter::default();
        registry.register(
            "bad_requests",
            "Requests refused as malformed, oversized or too slow",
            bad_requests.clone(),
        );
        let releases = Gauge::default();
        registry.register(
            "releases_indexed",
            "Helm releases in the index",
            releases.clone(),
        );
        let releases_by_status = Family::<StatusLabels, Gauge>::default();
        registry.register(
            "releases_by_status",
            "Indexed Helm releases by the status of their newest revision; deployed and failed ones are locked (failed: the last install, upgrade or rollback failed; locked at that revision, not reverted, until one succeeds)",
            releases_by_status.clone(),
        );
        let certificate_expiry = Gauge::default();
        registry.register(
            "certificate_expiry_timestamp_seconds",
            "When the serving certificate being served expires (Unix time); set when it is loaded or reloaded",
            certificate_expiry.clone(),
        );
        let objects = Gauge::default();
        registry.register(
            "objects_indexed",
            "Objects owned by the newest revision of indexed releases",
            objects.clone(),
        );
        let claim_conflicts = Gauge::default();
        registry.register(
            "claim_conflicts",
            "Objects rendered by more than one release (`helm-locker inspect` lists them); the release the object's meta.helm.sh annotations name owns it",
            claim_conflicts.clone(),
        );
        let denials = Family::<DenialLabels, Counter>::default();
        registry.register(
            "denials",
            "Writes to locked objects denied, warned about or repaired, by release and decision (dry runs included)",
            denials.clone(),
        );
        let attempt_events = Family::<ResultLabels, Counter>::default();
        registry.register(
            "attempt_events",
            "Denials, warnings and repairs offered as Kubernetes Events, by result (published, held_back: within the window of an earlier one, dropped: the queue was full, failed)",
            attempt_events.clone(),
        );
        let schema_kinds = Gauge::default();
        registry.register(
            "schema_kinds",
            "Kinds whose list and map semantics are known (embedded, then the API server's /openapi/v2)",
            schema_kinds.clone(),
        );
        let schema_refreshes = Family::<ResultLabels, Counter>::default();
        registry.register(
            "schema_refreshes",
            "Reads of the API server's /openapi/v2, by result (changed, unchanged, error)",
            schema_refreshes.clone(),
        );
        let ownership_mismatches = Counter::default();
        registry.register(
            "ownership_mismatches",
            "Live objects whose managedFields entry for Helm differs from what helm-locker locks (a schema gap; see the log)",
            ownership_mismatches.clone(),
        );
        let foreign_release_secrets = Counter::default();
        registry.register(
            "foreign_release_secrets",
            "Release Secrets ignored because the release they hold names another namespace than the Secret's own (a release Secret speaks only for its namespace; each gets a Warning Event)",
            foreign_release_secrets.clone(),
        );
        let unproven_claims_allowed = Counter::default();
        registry.register(
            "unproven_claims_allowed",
            "Writes allowed because the object a release renders does not carry that release's meta.helm.sh annotations (Helm neither made nor adopted it)",
            unproven_claims_allowed.clone(),
        );
        let unproven_objects = Gauge::default();
        registry.register(
            "unproven_objects",
            "Live objects that releases render but that do not carry the release's meta.helm.sh annotations: neither locked nor reverted (seen by the reverter's watches)",
            unproven_objects.clone(),
        );
        let missing_objects = Gauge::default();
        registry.register(
            "missing_objects",
            "Objects of locked releases that do not exist and that the reverter leaves to helm upgrade (it never saw them carry the release's annotations, and no HelmRelease vouches for the release); each gets a Warning Event on the release Secret",
            missing_objects.clone(),
        );
        let author_stamps = Counter::default();
        registry.register(
            "author_stamps",
            "Release Secret writes stamped with their author by the author webhook (POST /stamp)",
            author_stamps.clone(),
        );
        let author_refused_objects = Gauge::default();
        registry.register(
            "author_refused_objects",
            "Drifted objects the reverter leaves as they are because the author of their release's newest revision may not write them, or is not known; each gets a Warning Event (AuthorLacksRights, UnknownAuthor) on the release Secret",
            author_refused_objects.clone(),
        );
        let held_objects = Gauge::default();
        registry.register(
            "held_objects",
            "Objects of releases whose newest revision has no known author (written without the author stamp: before helm-locker was installed, or while it was away) that differ from that revision where the reverter first saw them: held at what was live then, never written from the revision; each gets an UnknownAuthor Warning Event on the release Secret",
            held_objects.clone(),
        );
        let pending_release_oldest_seconds = Gauge::default();
        registry.register(
            "pending_release_oldest_seconds",
            "How long the release longest in pending-install, pending-upgrade, pending-rollback or uninstalling has been so (0: none); its objects are open to every writer meanwhile (a Helm killed mid-upgrade leaves it so until helm rollback)",
            pending_release_oldest_seconds.clone(),
        );
        let revert_fights = Gauge::default();
        registry.register(
            "revert_fights",
            "Objects whose fields the reverter stopped reverting: it put them back 3 times within 10 minutes at the same revision and another writer changed them again each time (a RevertFight Warning Event names it); a new revision or a restart resumes",
            revert_fights.clone(),
        );
        let exceptions_open = Gauge::default();
        registry.register(
            "exceptions_open",
            "LockExceptions open now (each opens a release, or objects or paths of it, to named users until a time)",
            exceptions_open.clone(),
        );
        let exception_longest_open_seconds = Gauge::default();
        registry.register(
            "exception_longest_open_seconds",
            "How long the longest-open LockException has been open (0 when none is)",
            exception_longest_open_seconds.clone(),
        );
        let exceptions_used = Counter::default();
        registry.register(
            "exceptions_used",
            "Writes to locked objects let through by an open LockException (each is also an Event naming it, the user and the reason)",
            exceptions_used.clone(),
        );
        let watch_restarts = Counter::default();
        registry.register(
            "watch_restarts",
            "Release Secret watch errors followed by a reconnect",
            watch_restarts.clone(),
        );
        let release_decode_errors = Counter::default();
        registry.register(
            "release_decode_errors",
            "Release Secrets that could not be decoded (skipped)",
            release_decode_errors.clone(),
        );
        let release_secrets_decoded = Counter::default();
        registry.register(
            "release_secrets_decoded",
            "Release Secrets decoded, from lists and watch events (superseded revisions are not watched)",
            release_secrets_decoded.clone(),
        );
        let release_secrets_unchanged = Counter::default();
        registry.register(
            "release_secrets_unchanged",
            "Release Secrets a list again (after a watch expired) found unchanged and kept without decoding them",
            release_secrets_unchanged.clone(),
        );
        let release_secret_lists = Counter::default();
        registry.register(
            "release_secret_lists",
            "Complete lists of release Secrets: one per watched scope at start-up, and one after each watch expiry",
            release_secret_lists.clone(),
        );
        let confirmations = Family::<ResultLabels, Counter>::default();
        registry.register(
            "confirmations",
            "Fresh reads of a release before a deny (rule 7), by result",
            confirmations.clone(),
        );
        let reverts = Family::<ResultLabels, Counter>::default();
        registry.register(
            "reverts",
            "Drift put back by the reverter, by result (reverted, recreated, failed; refused: the revision's author may not make the write, or is not known)",
            reverts.clone(),
        );
        let is_leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the Lease (and reverts), else 0",
            is_leader.clone(),
        );
        // Known results start at 0: a counter first seen at 1 gives increase() nothing, so the
        // first failed revert would not fire HelmLockerRevertsFailing; and the series exist for
        // dashboards before anything happened.
        for (family, results) in [
            (
                &reverts,
                &["reverted", "recreated", "failed", "refused"][..],
            ),
            (
                &confirmations,
                &["pending", "unchanged", "error", "timeout"],
            ),
            (
                &attempt_events,
                &["published", "held_back", "dropped", "failed"],
            ),
            (&schema_refreshes, &["changed", "unchanged", "error"]),
        ] {
            for result in results {
                drop(family.get_or_create(&ResultLabels { result }));
            }
        }
        Metrics {
            registry,
            reverts,
            is_leader,
            schema_kinds,
            schema_refreshes,
            ownership_mismatches,
            foreign_release_secrets,
            unproven_claims_allowed,
            unproven_objects,
            missing_objects,
            author_stamps,
            author_refused_objects,
            held_objects,
            pending_release_oldest_seconds,
            revert_fights,
            exceptions_open,
            exception_longest_open_seconds,
            exceptions_used,
            admissions,
            admission_series: std::array::from_fn(|_| std::sync::OnceLock::new()),
            admission_seconds,
            bad_requests,
            releases,
            releases_by_status,
            certificate_expiry,
            objects,
            claim_conflicts,
            denials,
            attempt_events,
            watch_restarts,
            release_decode_errors,
            release_secrets_decoded,
            release_secrets_unchanged,
            release_secret_lists,
            confirmations,
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
    fn each_review_is_counted_in_its_series_and_a_value_outside_the_table_too() {
        let metrics = Metrics::new();
        let labels = |operation, decision| AdmissionLabels {
            endpoint: "validate",
            operation,
            decision,
        };
        for _ in 0..3 {
            metrics.admitted(labels("UPDATE", "deny"));
        }
        metrics.admitted(labels("CREATE", "allow"));
        metrics.admitted(labels("PATCH", "allow"));
        let text = metrics.render();
        for (series, count) in [
            ("operation=\"UPDATE\",decision=\"deny\"", 3),
            ("operation=\"CREATE\",decision=\"allow\"", 1),
            ("operation=\"PATCH\",decision=\"allow\"", 1),
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
}
