//! Who tried: every write helm-locker denies, warns about or repairs is recorded as a Kubernetes
//! Event on the object (type Warning, the user, the locked paths), so the platform team sees it
//! with `kubectl get events --field-selector reason=LockedFieldChangeDenied`.
//!
//! Off the admission path: the request handler only offers the attempt to a bounded channel
//! (never waiting; a full channel drops it and counts it), and one task publishes. A loop of
//! retries cannot flood the API server: per object, reason and user, one Event per
//! [`EventLimiter::WINDOW`]; the attempts in between are counted and the next Event says how
//! many. Each published attempt is its own Event (kube's recorder would fold a second user's
//! attempt into the first user's Event). Dry runs (`kubectl diff`) record nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::Client;
use tokio::sync::mpsc;

use crate::events::Reason;
use crate::metrics::{AttemptResult, Metrics};

/// One write helm-locker stopped or changed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Attempt {
    pub regarding: ObjectReference,
    /// `LockedFieldChangeDenied`, `LockedObjectDeleteDenied`, `LockedFieldChangeWarned`,
    /// `LockedFieldChangeRepaired`, `WriterRuleUsed`, `LockExceptionUsed` (its type and action
    /// are the reason's).
    pub reason: Reason,
    pub user: String,
    /// What the user was told (the decision's message).
    pub message: String,
}

/// The request handlers' end: offers attempts without ever waiting.
#[derive(Clone)]
pub(crate) struct AttemptSink {
    tx: mpsc::Sender<Attempt>,
    metrics: Arc<Metrics>,
}

impl AttemptSink {
    pub(crate) fn record(&self, attempt: Attempt) {
        if self.tx.try_send(attempt).is_err() {
            self.metrics.attempt_events.inc(AttemptResult::Dropped);
        }
    }
}

/// The sink and the receiving end for [`publish`].
/// What an Event is about, or relates to: one object, by apiVersion, kind, namespace (`None`
/// when cluster-scoped) and name. Every Event helm-locker writes names its objects through
/// these three.
pub(crate) fn reference(
    api_version: String,
    kind: String,
    namespace: Option<String>,
    name: String,
) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version),
        kind: Some(kind),
        namespace,
        name: Some(name),
        ..Default::default()
    }
}

/// A release's stored revision: its Secret, or its ConfigMap under Helm's ConfigMap driver.
pub(crate) fn revision_reference(secret: &crate::core::SecretRef) -> ObjectReference {
    reference(
        "v1".into(),
        secret.driver.kind().into(),
        Some(secret.namespace.clone()),
        secret.name.clone(),
    )
}

/// An object a release locks.
pub(crate) fn locked_reference(object: &crate::core::LockedObject) -> ObjectReference {
    reference(
        object.api_version(),
        object.kind.to_string(),
        object.namespace.as_deref().map(str::to_string),
        object.name.to_string(),
    )
}

pub(crate) fn channel(
    metrics: Arc<Metrics>,
    capacity: usize,
) -> (AttemptSink, mpsc::Receiver<Attempt>) {
    let (tx, rx) = mpsc::channel(capacity);
    (AttemptSink { tx, metrics }, rx)
}

/// Which attempts become Events: at most one per object, reason and user per window.
#[derive(Default)]
pub(crate) struct EventLimiter {
    last: HashMap<(String, Reason, String), (Instant, u64)>,
}

/// What to do with one attempt.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Publish it; this many like it were held back since the last one.
    Publish {
        held_back: u64,
    },
    HoldBack,
}

impl EventLimiter {
    pub(crate) const WINDOW: Duration = Duration::from_secs(30);

    pub(crate) fn admit(&mut self, attempt: &Attempt, now: Instant) -> Verdict {
        let r = &attempt.regarding;
        let object = format!(
            "{}/{}/{}/{}",
            r.api_version.as_deref().unwrap_or_default(),
            r.kind.as_deref().unwrap_or_default(),
            r.namespace.as_deref().unwrap_or_default(),
            r.name.as_deref().unwrap_or_default()
        );
        // Entries idle for a whole window have nothing held back worth reporting.
        if self.last.len() > 10_000 {
            self.last
                .retain(|_, (at, held)| now.duration_since(*at) < Self::WINDOW || *held > 0);
        }
        let key = (object, attempt.reason, attempt.user.clone());
        match self.last.get_mut(&key) {
            Some((at, held)) if now.duration_since(*at) < Self::WINDOW => {
                *held += 1;
                Verdict::HoldBack
            }
            Some((at, held)) => {
                let held_back = std::mem::take(held);
                *at = now;
                Verdict::Publish { held_back }
            }
            None => {
                self.last.insert(key, (now, 0));
                Verdict::Publish { held_back: 0 }
            }
        }
    }
}

/// The Event's note: who, and what they were told (Events cap notes at 1 kB).
pub(crate) fn note(attempt: &Attempt, held_back: u64) -> String {
    let mut note = format!("{}: {}", attempt.user, attempt.message);
    if held_back > 0 {
        note.push_str(&format!(
            " ({held_back} more such attempts by this user in the last {} s)",
            EventLimiter::WINDOW.as_secs()
        ));
    }
    if note.len() > 1000 {
        let mut end = 997;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push_str("...");
    }
    note
}

/// The Event for an attempt (events.k8s.io/v1), in the object's namespace.
pub(crate) fn event(
    attempt: &Attempt,
    held_back: u64,
    instance: &str,
    now: k8s_openapi::jiff::Timestamp,
) -> Event {
    event_about(
        &attempt.regarding,
        Note {
            type_: attempt.reason.type_name(),
            reason: attempt.reason.as_str(),
            action: attempt.reason.action(),
            note: note(attempt, held_back),
        },
        ("helm-locker.io/webhook", instance),
        now,
    )
}

/// What an Event says.
pub(crate) struct Note<'a> {
    /// `Normal` or `Warning`.
    pub type_: &'a str,
    pub reason: &'a str,
    pub action: &'a str,
    pub note: String,
}

/// An Event (events.k8s.io/v1) about `regarding`, reported by `(controller, instance)`.
///
/// A cluster-scoped object's reference has no namespace: an empty one (as admission requests
/// carry it) is absent, and the API server refuses an Event whose `regarding` names the
/// namespace `""` (`involvedObject.namespace "" does not match event.namespace`). Such an Event
/// goes to [`CLUSTER_EVENTS`] (`default`, where client-go's and kube-rs's recorders put it);
/// [`create`] moves it to `kube-system` where the API server accepts only that (1.20).
pub(crate) fn event_about(
    regarding: &ObjectReference,
    what: Note<'_>,
    reporter: (&str, &str),
    now: k8s_openapi::jiff::Timestamp,
) -> Event {
    let mut regarding = regarding.clone();
    regarding.namespace = regarding.namespace.filter(|ns| !ns.is_empty());
    let (controller, instance) = reporter;
    Event {
        metadata: ObjectMeta {
            // As client-go names Events: the object's name and the time in hex.
            name: Some(event_name(
                regarding.name.as_deref().unwrap_or("object"),
                now,
            )),
            namespace: Some(
                regarding
                    .namespace
                    .clone()
                    .unwrap_or_else(|| CLUSTER_EVENTS.into()),
            ),
            ..Default::default()
        },
        event_time: Some(MicroTime(now)),
        type_: Some(what.type_.into()),
        reason: Some(what.reason.into()),
        action: Some(what.action.into()),
        note: Some(what.note),
        regarding: Some(regarding),
        reporting_controller: Some(controller.into()),
        reporting_instance: Some(instance.into()),
        ..Default::default()
    }
}

/// Where Events about cluster-scoped objects go.
pub(crate) const CLUSTER_EVENTS: &str = "default";
/// Where they go when the API server refuses [`CLUSTER_EVENTS`]: before Kubernetes 1.22 (checked
/// on 1.20), an events.k8s.io Event whose `regarding` has no namespace must be in `kube-system`.
pub(crate) const CLUSTER_EVENTS_FALLBACK: &str = "kube-system";

/// Set once the API server refused an Event about a cluster-scoped object in [`CLUSTER_EVENTS`]:
/// later ones go straight to [`CLUSTER_EVENTS_FALLBACK`].
static CLUSTER_EVENTS_REFUSED: AtomicBool = AtomicBool::new(false);

/// Whether an Event is about a cluster-scoped object.
fn cluster_scoped(event: &Event) -> bool {
    event
        .regarding
        .as_ref()
        .is_none_or(|r| r.namespace.as_deref().unwrap_or_default().is_empty())
}

/// Whether the API server refused a cluster-scoped object's Event for its namespace.
fn namespace_refused(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status)
        if status.code == 422 && status.message.contains("does not match event.namespace"))
}

/// Creates an Event; one about a cluster-scoped object goes to [`CLUSTER_EVENTS`], or to
/// [`CLUSTER_EVENTS_FALLBACK`] where the API server accepts only that.
pub(crate) async fn create(client: &Client, mut event: Event) -> Result<(), kube::Error> {
    let cluster = cluster_scoped(&event);
    if cluster && CLUSTER_EVENTS_REFUSED.load(Ordering::Relaxed) {
        event.metadata.namespace = Some(CLUSTER_EVENTS_FALLBACK.into());
    }
    let namespace = event.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
    match api.create(&PostParams::default(), &event).await {
        Err(e) if cluster && namespace != CLUSTER_EVENTS_FALLBACK && namespace_refused(&e) => {
            CLUSTER_EVENTS_REFUSED.store(true, Ordering::Relaxed);
            tracing::debug!(error = %e, "Events about cluster-scoped objects go to {CLUSTER_EVENTS_FALLBACK} on this API server");
            event.metadata.namespace = Some(CLUSTER_EVENTS_FALLBACK.into());
            let api: Api<Event> = Api::namespaced(client.clone(), CLUSTER_EVENTS_FALLBACK);
            api.create(&PostParams::default(), &event).await.map(drop)
        }
        result => result.map(drop),
    }
}

/// An Event's name from its object's: a DNS subdomain as the API server requires (lowercase
/// letters, digits, `-` and `.`, starting and ending with a letter or digit). Object names may
/// hold what Event names may not (cert-manager's and Kubernetes' own `system:...` RBAC objects):
/// each such character becomes `-`, or the Event would be refused and the attempt unrecorded.
fn event_name(object: &str, now: k8s_openapi::jiff::Timestamp) -> String {
    let name: String = object
        .chars()
        .take(200)
        .map(|c| c.to_ascii_lowercase())
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = name.trim_matches(['.', '-']);
    let name = if name.is_empty() { "object" } else { name };
    format!("{name}.{:x}", now.as_nanosecond())
}

/// Publishes attempts as Events until the sink is dropped.
pub(crate) async fn publish(
    client: Client,
    instance: String,
    mut rx: mpsc::Receiver<Attempt>,
    metrics: Arc<Metrics>,
) {
    let mut limiter = EventLimiter::default();
    let count = |result| metrics.attempt_events.inc(result);
    while let Some(attempt) = rx.recv().await {
        let Verdict::Publish { held_back } = limiter.admit(&attempt, Instant::now()) else {
            count(AttemptResult::HeldBack);
            continue;
        };
        let event = event(
            &attempt,
            held_back,
            &instance,
            k8s_openapi::jiff::Timestamp::now(),
        );
        match create(&client, event).await {
            Ok(_) => count(AttemptResult::Published),
            Err(e) => {
                count(AttemptResult::Failed);
                tracing::warn!(error = %e, reason = attempt.reason.as_str(), "could not record the attempt as an Event");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(name: &str, user: &str) -> Attempt {
        Attempt {
            regarding: ObjectReference {
                api_version: Some("apps/v1".into()),
                kind: Some("Deployment".into()),
                namespace: Some("shop".into()),
                name: Some(name.into()),
                ..Default::default()
            },
            reason: Reason::LockedFieldChangeDenied,
            user: user.into(),
            message: "Deployment shop/web is locked by Helm release shop/shop".into(),
        }
    }

    #[test]
    fn a_retry_loop_becomes_one_event_per_window_that_counts_the_rest() {
        let mut limiter = EventLimiter::default();
        let start = Instant::now();
        let web = attempt("web", "alice");
        assert_eq!(
            limiter.admit(&web, start),
            Verdict::Publish { held_back: 0 }
        );
        for i in 1..=50 {
            let at = start + Duration::from_millis(100 * i);
            assert_eq!(limiter.admit(&web, at), Verdict::HoldBack);
        }
        // Another user, another object: their own events at once.
        assert_eq!(
            limiter.admit(&attempt("web", "bob"), start),
            Verdict::Publish { held_back: 0 }
        );
        assert_eq!(
            limiter.admit(&attempt("api", "alice"), start),
            Verdict::Publish { held_back: 0 }
        );
        let later = start + EventLimiter::WINDOW + Duration::from_secs(1);
        assert_eq!(
            limiter.admit(&web, later),
            Verdict::Publish { held_back: 50 }
        );
        assert!(note(&web, 50).starts_with("alice: Deployment shop/web is locked"));
        assert!(note(&web, 50).ends_with("(50 more such attempts by this user in the last 30 s)"));
    }

    #[test]
    fn an_event_names_the_object_and_the_user() {
        let now = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let event = event(&attempt("web", "alice"), 2, "pod-1", now);
        assert_eq!(event.metadata.name.as_deref(), Some("web.18fae27693b40000"));
        assert_eq!(event.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(event.type_.as_deref(), Some("Warning"));
        assert_eq!(event.reason.as_deref(), Some("LockedFieldChangeDenied"));
        assert!(event.note.unwrap().starts_with("alice: "));
        assert_eq!(event.regarding.unwrap().name.as_deref(), Some("web"));
        let mut cluster = attempt("reader", "alice");
        cluster.regarding.namespace = None;
        let event = super::event(&cluster, 0, "pod-1", now);
        assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
    }

    #[test]
    fn a_cluster_scoped_object_has_no_namespace_in_its_event_not_an_empty_one() {
        let now = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap();
        // An admission request names a ClusterRole's namespace as "".
        let mut role = attempt("reader", "admin");
        role.regarding.api_version = Some("rbac.authorization.k8s.io/v1".into());
        role.regarding.kind = Some("ClusterRole".into());
        role.regarding.namespace = Some(String::new());
        let event = event(&role, 0, "pod-1", now);
        assert_eq!(event.metadata.namespace.as_deref(), Some(CLUSTER_EVENTS));
        let regarding = event.regarding.as_ref().unwrap();
        assert_eq!(regarding.namespace, None);
        assert_eq!(regarding.name.as_deref(), Some("reader"));
        assert!(cluster_scoped(&event));
        // As the API server sends it: no "namespace" key at all.
        let json = serde_json::to_value(&event).unwrap();
        assert!(json["regarding"].get("namespace").is_none(), "{json}");
        assert_eq!(json["metadata"]["namespace"], "default");
        assert!(!cluster_scoped(&super::event(
            &attempt("web", "alice"),
            0,
            "pod-1",
            now
        )));
    }

    #[test]
    fn a_refused_namespace_is_told_from_other_errors() {
        // What kube-apiserver 1.20 answers for an Event about a ClusterRole in `default`.
        let refused = kube::Error::Api(Box::new(
            serde_json::from_value(serde_json::json!({
                "status": "Failure", "code": 422, "reason": "Invalid",
                "message": "Event \"sig-reader.18ead4735f4a660b\" is invalid: involvedObject.namespace: Invalid value: \"\": does not match event.namespace"
            }))
            .unwrap(),
        ));
        assert!(namespace_refused(&refused));
        let forbidden = kube::Error::Api(Box::new(
            serde_json::from_value(serde_json::json!({
                "status": "Failure", "code": 403, "reason": "Forbidden",
                "message": "events is forbidden: does not match event.namespace"
            }))
            .unwrap(),
        ));
        assert!(!namespace_refused(&forbidden));
    }

    #[test]
    fn a_revert_event_is_normal_and_names_its_reporter() {
        let now = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let regarding = ObjectReference {
            api_version: Some("rbac.authorization.k8s.io/v1".into()),
            kind: Some("ClusterRole".into()),
            name: Some("reader".into()),
            ..Default::default()
        };
        let event = event_about(
            &regarding,
            Note {
                type_: Reason::Reverted.type_name(),
                reason: Reason::Reverted.as_str(),
                action: Reason::Reverted.action(),
                note: "helm-locker put back /rules".into(),
            },
            ("helm-locker", "pod-1"),
            now,
        );
        assert_eq!(event.type_.as_deref(), Some("Normal"));
        assert_eq!(event.reporting_controller.as_deref(), Some("helm-locker"));
        assert_eq!(event.reporting_instance.as_deref(), Some("pod-1"));
        assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
    }

    #[test]
    fn a_long_message_is_cut_to_what_an_event_holds() {
        let mut long = attempt("web", "alice");
        long.message = "é".repeat(2000);
        let text = note(&long, 0);
        assert!(text.len() <= 1000, "{}", text.len());
        assert!(text.ends_with("..."));
    }

    #[tokio::test]
    async fn a_full_channel_drops_and_counts_instead_of_waiting() {
        let metrics = Arc::new(Metrics::new());
        let (sink, _rx) = channel(metrics.clone(), 1);
        sink.record(attempt("web", "alice"));
        sink.record(attempt("web", "alice"));
        assert!(metrics
            .render()
            .contains("helm_locker_attempt_events_total{result=\"dropped\"} 1"));
    }

    #[test]
    fn an_event_is_named_as_the_api_server_accepts_whatever_its_objects_name() {
        let now = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let valid = |name: &str| {
            name.len() <= 253
                && name.starts_with(|c: char| c.is_ascii_alphanumeric())
                && name.ends_with(|c: char| c.is_ascii_alphanumeric())
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        };
        for object in [
            "web",
            "system:controller:cert-manager-cainjector",
            "Ops_Agent",
            ":::",
            "-lead.",
            &"x".repeat(300),
        ] {
            let name = event_name(object, now);
            assert!(valid(&name), "{object:?} gave {name:?}");
        }
        assert!(event_name("system:controller:x", now).starts_with("system-controller-x."));
    }
}
