//! The server's supervisor: its long-running tasks, each in a span naming it, and which one
//! ended first.

use tracing::Instrument as _;

/// The server's long-running tasks (watches, the schema refresher, controllers, certificate
/// renewal). None may end before shutdown: when one does, returning or panicking, the server
/// stops serving and exits non-zero, so Kubernetes restarts it instead of keeping a pod that
/// answers from an index nobody updates.
#[derive(Default)]
pub(super) struct Supervisor {
    tasks: tokio::task::JoinSet<()>,
    names: std::collections::HashMap<tokio::task::Id, &'static str>,
}

impl Supervisor {
    /// Runs `task` in a span naming it (`task{task="the schema refresher"}`, inside the span
    /// entered where it is spawned, if any), so each task's log lines say whose they are.
    pub(super) fn spawn(
        &mut self,
        name: &'static str,
        task: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let span = tracing::info_span!("task", task = name);
        let handle = self.tasks.spawn(task.instrument(span));
        self.names.insert(handle.id(), name);
    }

    /// Stops every task still running, and waits until they have stopped.
    pub(super) async fn shutdown(&mut self) {
        self.tasks.shutdown().await;
    }

    /// Completes when a task ends, saying which and how; never when there are none.
    pub(super) async fn first_exit(&mut self) -> String {
        match self.tasks.join_next_with_id().await {
            None => std::future::pending().await,
            Some(Ok((id, ()))) => {
                format!("{} ended", self.names.get(&id).copied().unwrap_or("a task"))
            }
            Some(Err(e)) => {
                let name = self.names.get(&e.id()).copied().unwrap_or("a task");
                if e.is_panic() {
                    format!("{name} panicked")
                } else {
                    format!("{name} was cancelled")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn the_supervisor_names_the_task_that_ended_or_panicked() {
        let mut tasks = Supervisor::default();
        tasks.spawn("a watch that runs", std::future::pending());
        tasks.spawn("a release Secret watch", async {});
        assert_eq!(tasks.first_exit().await, "a release Secret watch ended");
        tasks.spawn("the schema refresher", async { panic!("bug") });
        assert_eq!(tasks.first_exit().await, "the schema refresher panicked");
        // The one still running never completes first_exit.
        let waited = tokio::time::timeout(Duration::from_millis(50), tasks.first_exit()).await;
        assert!(waited.is_err());
    }

    /// The log lines formatted as the server writes them (text), read back by the test.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    #[tokio::test]
    async fn a_tasks_log_lines_name_it_and_the_watch_it_was_spawned_for() {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(captured.clone())
            .with_ansi(false)
            .finish();
        // This thread's only (a current-thread runtime polls the tasks here).
        let _default = tracing::subscriber::set_default(subscriber);
        let mut tasks = Supervisor::default();
        tasks.spawn("the schema refresher", async {
            tracing::info!("schema read");
        });
        {
            let _scope =
                tracing::info_span!("release_watch", namespace = "shop", driver = "Secret")
                    .entered();
            tasks.spawn("a release Secret watch", async {
                tracing::warn!("watch failed; retrying with backoff");
            });
        }
        tasks.first_exit().await;
        tasks.first_exit().await;
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let line = |message: &str| {
            text.lines()
                .find(|l| l.contains(message))
                .unwrap_or_else(|| panic!("no line says {message:?} in {text}"))
                .to_string()
        };
        let schema = line("schema read");
        assert!(
            schema.contains(r#"task{task="the schema refresher"}"#),
            "{schema}"
        );
        assert!(!schema.contains("release_watch"), "{schema}");
        let watch = line("watch failed");
        assert!(
            watch.contains(
                r#"release_watch{namespace="shop" driver="Secret"}:task{task="a release Secret watch"}"#
            ),
            "{watch}"
        );
    }
}
