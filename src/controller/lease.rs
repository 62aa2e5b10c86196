//! Leader election on a `coordination.k8s.io/v1` Lease: every replica serves admission, one
//! reverts drift and writes HelmRelease status. Like client-go's leader election, expiry is
//! judged by when this replica last saw the Lease *change*, never by comparing clocks.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::Client;
use tokio::sync::watch;

/// What the Lease allows this replica to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// No Lease yet: create it, holding it.
    Create,
    /// Held by us: renew.
    Renew,
    /// Free, or its holder stopped renewing: take it.
    Acquire,
    /// Held by someone else who is renewing.
    Follow,
}

/// Decides from the Lease as read, and since when it has looked the same to us.
pub(crate) fn step(
    lease: Option<&LeaseSpec>,
    identity: &str,
    unchanged_since: Instant,
    now: Instant,
) -> Step {
    let Some(spec) = lease else {
        return Step::Create;
    };
    match spec.holder_identity.as_deref() {
        Some(holder) if holder == identity => Step::Renew,
        None | Some("") => Step::Acquire,
        Some(_) => {
            let duration =
                Duration::from_secs(spec.lease_duration_seconds.unwrap_or(15).max(1) as u64);
            if now.saturating_duration_since(unchanged_since) >= duration {
                Step::Acquire
            } else {
                Step::Follow
            }
        }
    }
}

/// Timing of the election.
#[derive(Clone, Debug)]
pub(crate) struct Timing {
    /// How long a Lease not renewed stays with its holder.
    pub duration: Duration,
    /// How often the holder renews and the others look.
    pub retry: Duration,
    /// A holder that could not renew for this long stops acting as leader.
    pub renew_deadline: Duration,
}

impl Timing {
    pub(crate) fn for_duration(duration: Duration) -> Timing {
        Timing {
            duration,
            retry: duration / 5,
            renew_deadline: duration * 2 / 3,
        }
    }
}

pub(crate) struct Election {
    pub client: Client,
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub timing: Timing,
}

fn observed(spec: Option<&LeaseSpec>) -> (Option<String>, Option<String>) {
    (
        spec.and_then(|s| s.holder_identity.clone()),
        spec.and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0.to_string()),
    )
}

impl Election {
    /// Runs until `leaving` turns true (shutdown), publishing whether this replica leads; a
    /// leader then stops acting and frees the Lease, so that another replica takes over at its
    /// next look instead of after the whole lease duration (measured on a real node: 14-16 s).
    pub(crate) async fn run(self, leader: watch::Sender<bool>, mut leaving: watch::Receiver<bool>) {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.namespace);
        let mut last_seen = (None, None);
        let mut unchanged_since = Instant::now();
        let mut last_renewal: Option<Instant> = None;
        loop {
            let now = Instant::now();
            let read = tokio::time::timeout(
                self.timing.retry.max(Duration::from_secs(1)),
                api.get_opt(&self.name),
            )
            .await;
            match read {
                Ok(Ok(lease)) => {
                    let spec = lease.as_ref().and_then(|l| l.spec.as_ref());
                    let seen = observed(spec);
                    if seen != last_seen {
                        last_seen = seen;
                        unchanged_since = now;
                    }
                    let step = step(spec, &self.identity, unchanged_since, now);
                    let wrote = match step {
                        Step::Follow => false,
                        Step::Create => self.write(&api, None).await,
                        Step::Renew | Step::Acquire => self.write(&api, lease).await,
                    };
                    if wrote {
                        if last_renewal.is_none() || step != Step::Renew {
                            tracing::info!(lease = %format!("{}/{}", self.namespace, self.name), identity = %self.identity, "became leader: reverting drift");
                        }
                        last_renewal = Some(now);
                        leader.send_if_modified(|l| !std::mem::replace(l, true));
                    } else if step == Step::Follow {
                        if last_renewal.take().is_some() {
                            tracing::warn!(holder = ?last_seen.0, "lost the lease: stopped reverting");
                        }
                        leader.send_if_modified(|l| std::mem::replace(l, false));
                    }
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "cannot read the leader Lease"),
                Err(_) => tracing::warn!("reading the leader Lease timed out"),
            }
            if let Some(renewed) = last_renewal {
                if renewed.elapsed() > self.timing.renew_deadline {
                    last_renewal = None;
                    tracing::warn!("could not renew the lease in time: stopped reverting");
                    leader.send_if_modified(|l| std::mem::replace(l, false));
                }
            }
            tokio::select! {
                () = tokio::time::sleep(self.timing.retry) => {}
                () = async { let _ = leaving.wait_for(|leaving| *leaving).await; } => {
                    leader.send_if_modified(|l| std::mem::replace(l, false));
                    if last_renewal.is_some() {
                        self.release(&api).await;
                    }
                    return;
                }
            }
        }
    }

    /// Frees the Lease if this replica still holds it: no holder, which [`step`] reads as free.
    async fn release(&self, api: &Api<Lease>) {
        let Ok(Some(mut lease)) = api.get_opt(&self.name).await else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        match api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                tracing::info!(lease = %format!("{}/{}", self.namespace, self.name), "shutting down: released the lease")
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot release the leader Lease; another replica takes it when it expires")
            }
        }
    }

    /// Creates, renews or takes the Lease; false when another replica won the race.
    async fn write(&self, api: &Api<Lease>, current: Option<Lease>) -> bool {
        let now = MicroTime(Timestamp::now());
        let result = match current {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        namespace: Some(self.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.identity.clone()),
                        lease_duration_seconds: Some(self.timing.duration.as_secs().max(1) as i32),
                        acquire_time: Some(now.clone()),
                        renew_time: Some(now),
                        lease_transitions: Some(0),
                        ..LeaseSpec::default()
                    }),
                };
                api.create(&PostParams::default(), &lease).await.map(|_| ())
            }
            Some(mut lease) => {
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
                    spec.holder_identity = Some(self.identity.clone());
                    spec.acquire_time = Some(now.clone());
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                }
                spec.lease_duration_seconds = Some(self.timing.duration.as_secs().max(1) as i32);
                spec.renew_time = Some(now);
                // The resourceVersion read makes this a compare-and-swap.
                api.replace(&self.name, &PostParams::default(), &lease)
                    .await
                    .map(|_| ())
            }
        };
        match result {
            Ok(()) => true,
            Err(kube::Error::Api(e)) if e.code == 409 => false,
            Err(e) => {
                tracing::warn!(error = %e, "cannot write the leader Lease");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(holder: &str) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_lease_is_taken_only_when_free_or_left_unrenewed_for_its_duration() {
        let t0 = Instant::now();
        let later = |s| t0 + Duration::from_secs(s);
        assert_eq!(step(None, "a", t0, t0), Step::Create);
        assert_eq!(step(Some(&held_by("a")), "a", t0, later(100)), Step::Renew);
        assert_eq!(step(Some(&held_by("")), "a", t0, t0), Step::Acquire);
        assert_eq!(step(Some(&held_by("b")), "a", t0, later(14)), Step::Follow);
        assert_eq!(step(Some(&held_by("b")), "a", t0, later(15)), Step::Acquire);
        let unset = LeaseSpec::default();
        assert_eq!(step(Some(&unset), "a", t0, t0), Step::Acquire);
    }

    #[test]
    fn timing_renews_well_within_the_duration() {
        let t = Timing::for_duration(Duration::from_secs(15));
        assert_eq!(t.retry, Duration::from_secs(3));
        assert_eq!(t.renew_deadline, Duration::from_secs(10));
    }
}
