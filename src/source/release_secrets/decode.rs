//! A release object decoded for the index, by name in any log and never its content: its
//! revision, who wrote it (its stamp), and the Warning Event on one that is not indexed.

use std::collections::{BTreeMap, HashSet};

use kube::runtime::events::{Recorder, Reporter};
use kube::Client;

use crate::core::{
    authorship_seen, release_secret_from_parts, Authorship, DecodeError, ReleaseSecret,
    ReportBudget, SecretError, Stamping, StoredSecret,
};
use crate::events::Reason;
use crate::metrics::Metrics;
use crate::source::release_object::HoldsRevision;
use crate::source::storage_gate::StorageGate;

/// Decodes a watched Secret; failures are logged by name only, never with content.
pub(super) fn decode<R: HoldsRevision>(
    secret: &R,
    stamping: &Stamping,
    metrics: &Metrics,
) -> Option<ReleaseSecret> {
    decode_or_foreign(secret, stamping, metrics).ok().flatten()
}

/// [`decode`], but a Secret whose release is too large is returned as the error, to warn
/// about it on the Secret.
pub(super) fn decode_or_foreign<R: HoldsRevision>(
    secret: &R,
    stamping: &Stamping,
    metrics: &Metrics,
) -> Result<Option<ReleaseSecret>, SecretError> {
    let reference = secret.place();
    metrics.release_secrets_decoded.inc();
    let labels: BTreeMap<String, String> = secret.metadata().labels.clone().unwrap_or_default();
    let Some(payload) = secret.helm_layer() else {
        metrics.release_decode_errors.inc();
        tracing::warn!(secret = %reference, "release Secret has no data.release; skipped");
        return Ok(None);
    };
    match release_secret_from_parts(reference.clone(), labels, payload) {
        Ok(mut decoded) => {
            read_author(secret, &mut decoded, stamping, payload);
            if let Authorship::Unknown(why) = &decoded.author {
                tracing::debug!(secret = %reference, why = why.as_str(), "release revision has no known author");
            }
            Ok(Some(decoded))
        }
        Err(e @ SecretError::Decode(DecodeError::TooLarge { .. })) => {
            // Bounded before decoded: never decompressed past the limit (by name, no content).
            metrics.release_decode_errors.inc();
            metrics.releases_too_large.inc();
            tracing::warn!(secret = %reference, error = %e, "release Secret too large; skipped, no revision: it opens and locks nothing (--max-release-bytes)");
            Err(e)
        }
        Err(e @ SecretError::Decode(DecodeError::TooManyObjects { .. })) => {
            // Bounded in objects before the index is built (by name and count, no content).
            metrics.release_decode_errors.inc();
            metrics.releases_too_many_objects.inc();
            tracing::warn!(secret = %reference, error = %e, "release Secret renders too many objects; skipped, no revision: it opens and locks nothing (--max-release-objects)");
            Err(e)
        }
        Err(e) => {
            metrics.release_decode_errors.inc();
            tracing::warn!(secret = %reference, error = %e, "release Secret does not decode; skipped (its release keeps its other revisions)");
            Ok(None)
        }
    }
}

/// Sets who wrote `decoded` (and when its Secret was created) from `secret`'s stamp.
pub(super) fn read_author<R: HoldsRevision>(
    secret: &R,
    decoded: &mut ReleaseSecret,
    stamping: &Stamping,
    payload: &[u8],
) {
    let metadata = secret.metadata();
    decoded.created = metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second());
    decoded.author = authorship_seen(
        stamping,
        StoredSecret {
            driver: decoded.secret.driver,
            namespace: &decoded.secret.namespace,
            name: &decoded.secret.name,
            annotations: metadata.annotations.as_ref(),
            resource_version: metadata.resource_version.as_deref(),
            created: decoded.created,
            release: payload,
        },
        metadata.uid.as_deref().unwrap_or_default(),
        unix_now(),
    );
}

/// Binds the stamp of a release object the watch saw go (deleted, or out of the watch as
/// `superseded`) to it, so that a copy created again carrying it names nobody
/// ([`authorship_seen`]). No decoding: the stamp is over Helm's layer as it is.
pub(super) fn spend_stamp<R: HoldsRevision>(secret: &R, stamping: &Stamping) {
    let metadata = secret.metadata();
    let Some(payload) = secret.helm_layer() else {
        return;
    };
    let reference = secret.place();
    authorship_seen(
        stamping,
        StoredSecret {
            driver: reference.driver,
            namespace: &reference.namespace,
            name: &reference.name,
            annotations: metadata.annotations.as_ref(),
            resource_version: metadata.resource_version.as_deref(),
            created: metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_second()),
            release: payload,
        },
        metadata.uid.as_deref().unwrap_or_default(),
        unix_now(),
    );
}

/// The locker's clock, in Unix seconds.
pub(super) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Warning Events on release Secrets that are not indexed: a release stored in another
/// namespace that may not speak for its own ([`StorageGate`]), a release too large to decode,
/// one over its namespace's bound. One per Secret (by uid) for the life of the process, and at
/// most [`ReportBudget::per_minute`] a namespace with the log lines that go with them: whoever
/// may create Secrets in a namespace decides how many are refused.
pub(super) struct ForeignWarnings {
    recorder: Recorder,
    warned: HashSet<String>,
    budget: ReportBudget,
}

impl ForeignWarnings {
    pub(super) fn new(client: &Client) -> Self {
        ForeignWarnings {
            recorder: Recorder::new(
                client.clone(),
                Reporter {
                    controller: "helm-locker".into(),
                    instance: std::env::var("HOSTNAME").ok(),
                },
            ),
            warned: HashSet::new(),
            budget: ReportBudget::per_minute(),
        }
    }

    /// Whether a report (its log line, its Event) on a Secret of `namespace` is written now;
    /// one that is not is counted, told by [`summarize`](Self::summarize).
    pub(super) fn may_report(&mut self, namespace: &str) -> bool {
        self.budget
            .allow(namespace, u64::try_from(unix_now()).unwrap_or(0))
    }

    /// One line for each namespace whose reports were held back since the last: how many.
    pub(super) fn summarize(&mut self) {
        let burst = self.budget.burst();
        for (namespace, held_back) in self.budget.take_held_back() {
            tracing::warn!(namespace = %namespace, held_back, "{held_back} more release Secrets of this namespace not indexed, not each logged and warned on (at most {burst} a minute a namespace); helm_locker_releases_over_namespace_bound_total, helm_locker_foreign_release_secrets_total and helm_locker_releases_too_large_total count every one");
        }
    }

    /// Decodes `secret` and passes it through the storage gate; warns once on it when it is
    /// too large or its release may not speak for its namespace.
    pub(super) async fn decode<R: HoldsRevision>(
        &mut self,
        secret: &R,
        stamping: &Stamping,
        gate: &StorageGate,
        metrics: &Metrics,
    ) -> Option<ReleaseSecret> {
        match decode_or_foreign(secret, stamping, metrics) {
            Ok(Some(decoded)) => self.admit(secret, decoded, gate, metrics).await,
            Ok(None) => None,
            Err(note) => {
                self.warn(secret, note).await;
                None
            }
        }
    }

    /// `decoded` when its release may speak for its namespace; else reported (log, metric,
    /// an Event on the Secret) and `None`.
    pub(super) async fn admit<R: HoldsRevision>(
        &mut self,
        secret: &R,
        decoded: ReleaseSecret,
        gate: &StorageGate,
        metrics: &Metrics,
    ) -> Option<ReleaseSecret> {
        match gate.admit(&decoded).await {
            Ok(()) => Some(decoded),
            Err(note) => {
                metrics.foreign_release_secrets.inc();
                if self.may_report(&decoded.secret.namespace) {
                    tracing::warn!(secret = %decoded.secret, error = %note, "release Secret ignored");
                    self.warn(secret, note).await;
                }
                None
            }
        }
    }

    /// Warns once on the Secret (or ConfigMap) of a release refused by its namespace's bound
    /// (its caller asked [`may_report`](Self::may_report)).
    pub(super) async fn warn_over_bound(&mut self, refused: &crate::core::Refused) {
        let secret = &refused.secret;
        if !self
            .warned
            .insert(format!("bound/{secret}/{}", refused.objects))
        {
            return;
        }
        let note = crate::core::notes::release_ignored(
            secret.driver.kind(),
            format!(
                "its release renders {} objects and the releases of this namespace created before it keep {}: more than {} (--max-namespace-objects); not indexed, it locks nothing",
                refused.objects, refused.before, refused.limit
            ),
        );
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some(secret.driver.kind().into()),
            namespace: Some(secret.namespace.clone()),
            name: Some(secret.name.clone()),
            ..Default::default()
        };
        crate::events::publish(&self.recorder, &reference, Reason::ReleaseTooLarge, note).await;
    }

    /// Warns once on `secret`, which names another namespace's release, or whose release is
    /// too large to decode (`note`).
    pub(super) async fn warn<R: HoldsRevision>(&mut self, secret: &R, note: SecretError) {
        let uid = secret.metadata().uid.clone().unwrap_or_default();
        if self.warned.insert(uid) {
            let reason = match note {
                SecretError::Decode(
                    DecodeError::TooLarge { .. } | DecodeError::TooManyObjects { .. },
                ) => Reason::ReleaseTooLarge,
                _ => Reason::ForeignRelease,
            };
            let note = crate::core::notes::release_ignored(secret.place().driver.kind(), note);
            crate::events::publish(&self.recorder, &secret.reference(), reason, note).await;
        }
    }
}
