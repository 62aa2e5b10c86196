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
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::Client;
use tokio::sync::mpsc;

use crate::metrics::{Metrics, ResultLabels};

/// One write helm-locker stopped or changed.
#[derive(Clone, Debug, PartialEq)]
pub struct Attempt {
    pub regarding: ObjectReference,
    /// `LockedFieldChangeDenied`, `LockedObjectDeleteDenied`, `LockedFieldChangeWarned`,
    /// `LockedFieldChangeRepaired`.
    pub reason: &'static str,
    /// `Deny`, `Warn` or `Repair`.
    pub action: &'static str,
    pub user: String,
    /// What the user was told (the decision's message).
    pub message: String,
}

/// The request handlers' end: offers attempts without ever waiting.
#[derive(Clone)]
pub struct AttemptSink {
    tx: mpsc::Sender<Attempt>,
    metrics: Arc<Metrics>,
}

impl AttemptSink {
    pub fn record(&self, attempt: Attempt) {
        if self.tx.try_send(attempt).is_err() {
            self.count("dropped");
        }
    }

    fn count(&self, result: &'static str) {
        self.metrics
            .attempt_events
            .get_or_create(&ResultLabels { result })
            .inc();
    }
}

/// The sink and the receiving end for [`publish`].
pub fn channel(metrics: Arc<Metrics>, capacity: usize) -> (AttemptSink, mpsc::Receiver<Attempt>) {
    let (tx, rx) = mpsc::channel(capacity);
    (AttemptSink { tx, metrics }, rx)
}

/// Which attempts become Events: at most one per object, reason and user per window.
#[derive(Default)]
pub struct EventLimiter {
    last: HashMap<(String, &'static str, String), (Instant, u64)>,
}

/// What to do with one attempt.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Publish it; this many like it were held back since the last one.
    Publish {
        held_back: u64,
    },
    HoldBack,
}

impl EventLimiter {
    pub const WINDOW: Duration = Duration::from_secs(30);

    pub fn admit(&mut self, attempt: &Attempt, now: Instant) -> Verdict {
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
pub fn note(attempt: &Attempt, held_back: u64) -> String {
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

/// The Event for an attempt (events.k8s.io/v1), in the object's namespace (`default` for a
/// cluster-scoped one, as kubectl shows them).
pub fn event(
    attempt: &Attempt,
    held_back: u64,
    instance: &str,
    now: k8s_openapi::jiff::Timestamp,
) -> Event {
    let r = &attempt.regarding;
    Event {
        metadata: ObjectMeta {
            // As client-go names Events: the object's name and the time in hex.
            name: Some(event_name(r.name.as_deref().unwrap_or("object"), now)),
            namespace: Some(r.namespace.clone().unwrap_or_else(|| "default".into())),
            ..Default::default()
        },
        event_time: Some(MicroTime(now)),
        type_: Some("Warning".into()),
        reason: Some(attempt.reason.into()),
        action: Some(attempt.action.into()),
        note: Some(note(attempt, held_back)),
        regarding: Some(r.clone()),
        reporting_controller: Some("helm-locker.io/webhook".into()),
        reporting_instance: Some(instance.into()),
        ..Default::default()
    }
}

fn event_name(object: &str, now: k8s_openapi::jiff::Timestamp) -> String {
    let mut name: String = object.chars().take(200).collect();
    name = name.trim_end_matches(['.', '-']).to_lowercase();
    format!("{name}.{:x}", now.as_nanosecond())
}

/// Publishes attempts as Events until the sink is dropped.
pub async fn publish(
    client: Client,
    instance: String,
    mut rx: mpsc::Receiver<Attempt>,
    metrics: Arc<Metrics>,
) {
    let mut limiter = EventLimiter::default();
    let count = |result: &'static str| {
        metrics
            .attempt_events
            .get_or_create(&ResultLabels { result })
            .inc();
    };
    while let Some(attempt) = rx.recv().await {
        let Verdict::Publish { held_back } = limiter.admit(&attempt, Instant::now()) else {
            count("held_back");
            continue;
        };
        let event = event(
            &attempt,
            held_back,
            &instance,
            k8s_openapi::jiff::Timestamp::now(),
        );
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
        match api.create(&PostParams::default(), &event).await {
            Ok(_) => count("published"),
            Err(e) => {
                count("failed");
                tracing::warn!(error = %e, reason = attempt.reason, "could not record the attempt as an Event");
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
            reason: "LockedFieldChangeDenied",
            action: "Deny",
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
}
