//! Whether the server may answer admission requests: ready once every source scope has listed
//! completely (each release Secret watch, the HelmRelease watch), and never again once a
//! long-running task has ended unexpectedly. A `watch` channel: `/readyz` reads it, the
//! reverter waits on it, nobody polls.

use tokio::sync::watch;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ReadyState {
    /// This many scopes have not completed their first list.
    Starting {
        pending: usize,
    },
    Ready,
    /// A task the server needs has ended; the process is stopping.
    Failed(String),
}

pub(crate) struct Readiness {
    state: watch::Sender<ReadyState>,
}

impl Readiness {
    /// Ready after `scopes` calls to [`scope_listed`](Self::scope_listed) (at once for 0).
    pub(crate) fn new(scopes: usize) -> Readiness {
        let first = if scopes == 0 {
            ReadyState::Ready
        } else {
            ReadyState::Starting { pending: scopes }
        };
        Readiness {
            state: watch::channel(first).0,
        }
    }

    /// One scope has completed its first list; call once per scope.
    pub(crate) fn scope_listed(&self) {
        self.state.send_if_modified(|state| match state {
            ReadyState::Starting { pending } if *pending > 1 => {
                *pending -= 1;
                true
            }
            ReadyState::Starting { .. } => {
                *state = ReadyState::Ready;
                true
            }
            ReadyState::Ready | ReadyState::Failed(_) => false,
        });
    }

    /// Not ready, for good: `why` is shown by `/readyz`.
    pub(crate) fn fail(&self, why: String) {
        self.state.send_replace(ReadyState::Failed(why));
    }

    pub(crate) fn current(&self) -> ReadyState {
        self.state.borrow().clone()
    }

    #[cfg(test)]
    fn is_ready(&self) -> bool {
        *self.state.borrow() == ReadyState::Ready
    }

    /// Completes when ready; `false` if the server failed first.
    pub(crate) async fn wait_ready(&self) -> bool {
        let mut rx = self.state.subscribe();
        let ready = match rx
            .wait_for(|s| matches!(s, ReadyState::Ready | ReadyState::Failed(_)))
            .await
        {
            Ok(state) => *state == ReadyState::Ready,
            Err(_) => false,
        };
        ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn ready_after_every_scope_and_never_after_a_failure() {
        let readiness = Arc::new(Readiness::new(2));
        let waiter = {
            let r = readiness.clone();
            tokio::spawn(async move { r.wait_ready().await })
        };
        readiness.scope_listed();
        assert_eq!(readiness.current(), ReadyState::Starting { pending: 1 });
        assert!(!waiter.is_finished());
        readiness.scope_listed();
        assert!(readiness.is_ready());
        assert!(waiter.await.unwrap());
        readiness.fail("release Secret watch ended".into());
        readiness.scope_listed();
        assert!(!readiness.is_ready());
        assert!(!readiness.wait_ready().await);
        assert!(Readiness::new(0).is_ready());
    }
}
