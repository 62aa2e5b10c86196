//! Accept loops: TLS (HTTP/2 and HTTP/1.1 by ALPN) for the webhook, plain HTTP for admin.
//! Both stop accepting on shutdown and let in-flight requests finish.
//!
//! Nothing here runs per request but the count of requests a connection has begun and ended.
//! Each connection waits on one signal of its own, which says either "shut down" or "you
//! look idle"; one sweeper task per port looks at every connection's progress once per read
//! timeout. Measured on 2 cores at full load (scripts/load.sh's `max h1`): hyper-util's
//! graceful watcher (one channel that every connection polls at each wake-up), hyper's
//! per-request header timer and a timer per connection each cost throughput.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulConnection;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio_rustls::TlsAcceptor;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

fn builder(header_timeout: Option<Duration>) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    let http1 = &mut builder.http1();
    http1.keep_alive(true);
    if let Some(header_timeout) = header_timeout {
        http1
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout);
    }
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(256);
    builder
}

/// What a connection is told.
enum Signal {
    /// Finish the requests in flight and close.
    Shutdown,
    /// The sweeper saw this many requests begun at two looks a period apart, and none in
    /// flight: close, unless a request began since.
    Idle(u64),
}

/// An open connection, as the accept loop and the sweeper see it.
struct Open {
    /// Taken when a signal is sent; the connection puts a new one back after a false alarm.
    signal: Option<oneshot::Sender<Signal>>,
    /// An HTTP/1.1 connection on the TLS port, once its handshake is done.
    watched: Option<Watched>,
}

struct Watched {
    progress: Arc<Progress>,
    /// Requests begun at the sweeper's last look; `None` before its first.
    seen: Option<u64>,
}

/// The open connections by number.
#[derive(Clone, Default)]
struct Registry(Arc<Mutex<HashMap<u64, Open>>>);

impl Registry {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Open>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn open(&self, id: u64) -> oneshot::Receiver<Signal> {
        let (signal, rx) = oneshot::channel();
        self.lock().insert(
            id,
            Open {
                signal: Some(signal),
                watched: None,
            },
        );
        rx
    }

    fn watch(&self, id: u64, progress: Arc<Progress>) {
        if let Some(open) = self.lock().get_mut(&id) {
            open.watched = Some(Watched {
                progress,
                seen: None,
            });
        }
    }

    /// A new signal after a false alarm; one that says "shut down" when shutdown has begun.
    fn rearm(&self, id: u64) -> oneshot::Receiver<Signal> {
        let (signal, rx) = oneshot::channel();
        match self.lock().get_mut(&id) {
            Some(open) => open.signal = Some(signal),
            None => {
                let _ = signal.send(Signal::Shutdown);
            }
        }
        rx
    }

    fn close(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// One look at every watched connection: those that began no request since the last
    /// look and have none in flight are told they look idle.
    fn sweep(&self) {
        for open in self.lock().values_mut() {
            let Some(watched) = &mut open.watched else {
                continue;
            };
            let begun = watched.progress.begun.load(Relaxed);
            if watched.seen == Some(begun) && !watched.progress.in_flight() {
                if let Some(signal) = open.signal.take() {
                    let _ = signal.send(Signal::Idle(begun));
                }
            }
            watched.seen = Some(begun);
        }
    }

    /// Tells every connection to shut down, and forgets them.
    fn shut_down(&self) {
        for (_, open) in self.lock().drain() {
            if let Some(signal) = open.signal {
                let _ = signal.send(Signal::Shutdown);
            }
        }
    }
}

/// Serves `service` on `listener`, with TLS when `tls` is given, until `shutdown` completes;
/// then waits up to `grace` for open requests.
///
/// A client has `read_timeout` to send a request's headers. With TLS (the webhook port), an
/// HTTP/1.1 connection that began no request and had none in flight between two looks of the
/// sweeper, `read_timeout` apart, is closed: an idle keep-alive connection, or one whose
/// headers are arriving too slowly, goes after one to two `read_timeout`s. The plain port
/// (admin) leaves it to hyper's per-request header timer.
pub(crate) async fn serve<S, B>(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    service: S,
    read_timeout: Duration,
    grace: Duration,
    shutdown: impl Future<Output = ()>,
) where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    let acceptor = tls.map(TlsAcceptor::from);
    let registry = Registry::default();
    let sweeper = acceptor.is_some().then(|| {
        let registry = registry.clone();
        tokio::spawn(async move {
            let mut every =
                tokio::time::interval_at(tokio::time::Instant::now() + read_timeout, read_timeout);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                registry.sweep();
            }
        })
    });
    // Each connection's task holds a clone; `recv` returns `None` once all have ended.
    let (open_tx, mut open_rx) = mpsc::channel::<()>(1);
    let mut next_connection: u64 = 0;
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let id = next_connection;
        next_connection += 1;
        let signal = registry.open(id);
        let (registry, open, service, acceptor) = (
            registry.clone(),
            open_tx.clone(),
            service.clone(),
            acceptor.clone(),
        );
        tokio::spawn(async move {
            let _open = open;
            match acceptor {
                Some(acceptor) => {
                    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream))
                        .await
                    {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(e)) => {
                            registry.close(id);
                            return tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        }
                        Err(_) => {
                            registry.close(id);
                            return tracing::debug!(%peer, "TLS handshake timed out");
                        }
                    };
                    // HTTP/2 has no per-request header phase to watch; its streams are
                    // bounded by `max_concurrent_streams`.
                    let progress = Arc::new(Progress::default());
                    if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
                        registry.watch(id, progress.clone());
                    }
                    let service = Counted {
                        inner: service,
                        progress: progress.clone(),
                    };
                    let conn = builder(None)
                        .serve_connection(TokioIo::new(tls), service)
                        .into_owned();
                    run(conn, signal, (&registry, id, &progress), peer).await;
                }
                None => {
                    let conn = builder(Some(read_timeout))
                        .serve_connection(TokioIo::new(stream), service)
                        .into_owned();
                    run(conn, signal, (&registry, id, &Progress::default()), peer).await;
                }
            }
            registry.close(id);
        });
    }
    drop(listener);
    if let Some(sweeper) = sweeper {
        sweeper.abort();
    }
    registry.shut_down();
    drop(open_tx);
    if tokio::time::timeout(grace, open_rx.recv()).await.is_err() {
        tracing::warn!(
            ?grace,
            "connections still open after the shutdown grace period"
        );
    }
}

/// Serves one connection until it ends, or is told to shut down (then it finishes its
/// requests and closes), or is told it looks idle and began no request since the look.
async fn run<C>(
    conn: C,
    mut signal: oneshot::Receiver<Signal>,
    (registry, id, progress): (&Registry, u64, &Progress),
    peer: std::net::SocketAddr,
) where
    C: GracefulConnection,
    C::Error: std::fmt::Display,
{
    tokio::pin!(conn);
    let ended = loop {
        tokio::select! {
            biased;
            ended = conn.as_mut() => break ended,
            told = &mut signal => match told {
                // Only this task begins requests, and it is not inside the connection now:
                // no request can begin between this check and the close.
                Ok(Signal::Idle(seen))
                    if progress.begun.load(Relaxed) == seen && !progress.in_flight() =>
                {
                    return tracing::debug!(%peer, "no request begun in the read timeout; closing the connection");
                }
                Ok(Signal::Idle(_)) => signal = registry.rearm(id),
                Ok(Signal::Shutdown) | Err(_) => {
                    conn.as_mut().graceful_shutdown();
                    break conn.as_mut().await;
                }
            },
        }
    };
    if let Err(e) = ended {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// The requests one connection has begun and ended.
#[derive(Default)]
struct Progress {
    begun: AtomicU64,
    ended: AtomicU64,
}

impl Progress {
    fn in_flight(&self) -> bool {
        self.begun.load(Relaxed) != self.ended.load(Relaxed)
    }
}

/// Counts the requests of one connection.
#[derive(Clone)]
struct Counted<S> {
    inner: S,
    progress: Arc<Progress>,
}

/// Counts the request as ended when its response is ready, or when it is dropped unanswered.
struct Ending(Arc<Progress>);

impl Drop for Ending {
    fn drop(&mut self) {
        self.0.ended.fetch_add(1, Relaxed);
    }
}

impl<S, R> Service<R> for Counted<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = CountedFuture<S::Future>;

    fn call(&self, request: R) -> Self::Future {
        self.progress.begun.fetch_add(1, Relaxed);
        CountedFuture {
            inner: self.inner.call(request),
            _ending: Ending(self.progress.clone()),
        }
    }
}

pin_project_lite::pin_project! {
    struct CountedFuture<F> {
        #[pin]
        inner: F,
        _ending: Ending,
    }
}

impl<F: Future> Future for CountedFuture<F> {
    type Output = F::Output;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().inner.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched(registry: &Registry, id: u64) -> (oneshot::Receiver<Signal>, Arc<Progress>) {
        let signal = registry.open(id);
        let progress = Arc::new(Progress::default());
        registry.watch(id, progress.clone());
        (signal, progress)
    }

    #[test]
    fn a_connection_is_told_it_looks_idle_only_after_a_whole_period_without_a_new_request() {
        let registry = Registry::default();
        let (mut signal, progress) = watched(&registry, 1);
        // The first look only notes where the connection is: it may have opened just before.
        registry.sweep();
        assert!(signal.try_recv().is_err());
        progress.begun.fetch_add(1, Relaxed);
        progress.ended.fetch_add(1, Relaxed);
        // A request began since the last look.
        registry.sweep();
        assert!(signal.try_recv().is_err());
        // None began since, and none is in flight.
        registry.sweep();
        assert!(matches!(signal.try_recv(), Ok(Signal::Idle(1))));
    }

    #[test]
    fn a_request_in_flight_keeps_its_connection() {
        let registry = Registry::default();
        let (mut signal, progress) = watched(&registry, 1);
        progress.begun.fetch_add(1, Relaxed);
        for _ in 0..3 {
            registry.sweep();
        }
        assert!(signal.try_recv().is_err());
    }

    #[test]
    fn a_connection_not_watched_is_never_told_it_looks_idle() {
        let registry = Registry::default();
        let mut signal = registry.open(1);
        for _ in 0..3 {
            registry.sweep();
        }
        assert!(signal.try_recv().is_err());
        registry.shut_down();
        assert!(matches!(signal.try_recv(), Ok(Signal::Shutdown)));
    }

    #[test]
    fn after_a_false_alarm_the_connection_can_still_be_told_to_shut_down_or_close() {
        let registry = Registry::default();
        let (mut signal, progress) = watched(&registry, 1);
        registry.sweep();
        registry.sweep();
        assert!(matches!(signal.try_recv(), Ok(Signal::Idle(0))));
        // A request began before the connection acted on it: it asks for a new signal.
        progress.begun.fetch_add(1, Relaxed);
        progress.ended.fetch_add(1, Relaxed);
        let mut signal = registry.rearm(1);
        registry.sweep();
        assert!(signal.try_recv().is_err());
        registry.sweep();
        assert!(matches!(signal.try_recv(), Ok(Signal::Idle(1))));
        let mut signal = registry.rearm(1);
        registry.shut_down();
        assert!(matches!(signal.try_recv(), Ok(Signal::Shutdown)));
    }

    #[test]
    fn a_false_alarm_during_shutdown_is_told_to_shut_down() {
        let registry = Registry::default();
        let (mut signal, _progress) = watched(&registry, 1);
        registry.sweep();
        registry.sweep();
        assert!(matches!(signal.try_recv(), Ok(Signal::Idle(0))));
        // Shutdown drained the registry while the signal was out.
        registry.shut_down();
        let mut signal = registry.rearm(1);
        assert!(matches!(signal.try_recv(), Ok(Signal::Shutdown)));
    }
}
