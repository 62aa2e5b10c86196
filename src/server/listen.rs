//! Accept loops: TLS (HTTP/2 and HTTP/1.1 by ALPN) for the webhook, plain HTTP for admin.
//! Both stop accepting on shutdown and let in-flight requests finish.
//!
//! Nothing here runs per request but the count of requests a connection has begun and ended.
//! Shutdown reaches each connection through a signal of its own, and the webhook port watches
//! each connection's progress once per read timeout, not each request with a timer. Measured
//! on 2 cores at full load (scripts/load.sh's `max h1`): hyper-util's graceful watcher (one
//! channel that every connection polls at each wake-up) and hyper's per-request header timer
//! each cost a few percent of the throughput.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulConnection;
use hyper_util::service::TowerToHyperService;
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

/// The open connections' shutdown signals, by connection number.
type Stops = Arc<Mutex<HashMap<u64, oneshot::Sender<()>>>>;

/// Serves `router` on `listener`, with TLS when `tls` is given, until `shutdown` completes;
/// then waits up to `grace` for open requests.
///
/// A client has `read_timeout` to send a request's headers. With TLS (the webhook port), an
/// HTTP/1.1 connection that in a whole `read_timeout` began no request and has none in flight
/// is closed: an idle keep-alive connection, or one whose headers are arriving too slowly,
/// goes after one to two `read_timeout`s. The plain port (admin) leaves it to hyper's
/// per-request header timer.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    router: Router,
    read_timeout: Duration,
    grace: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = tls.map(TlsAcceptor::from);
    let stops: Stops = Arc::default();
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
        let (stop_tx, stop) = oneshot::channel();
        stops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, stop_tx);
        let (stops, open, router, acceptor) = (
            stops.clone(),
            open_tx.clone(),
            router.clone(),
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
                            stops.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                            return tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        }
                        Err(_) => {
                            stops.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                            return tracing::debug!(%peer, "TLS handshake timed out");
                        }
                    };
                    // HTTP/2 has no per-request header phase to watch; its streams are
                    // bounded by `max_concurrent_streams`.
                    let watch =
                        (tls.get_ref().1.alpn_protocol() != Some(b"h2")).then_some(read_timeout);
                    let progress = Arc::new(Progress::default());
                    let service = Counted {
                        inner: TowerToHyperService::new(router),
                        progress: progress.clone(),
                    };
                    let conn = builder(None)
                        .serve_connection(TokioIo::new(tls), service)
                        .into_owned();
                    run(conn, stop, watch.map(|period| (period, progress)), peer).await;
                }
                None => {
                    let conn = builder(Some(read_timeout))
                        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(router))
                        .into_owned();
                    run(conn, stop, None, peer).await;
                }
            }
            stops.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        });
    }
    drop(listener);
    for (_, stop) in stops.lock().unwrap_or_else(|e| e.into_inner()).drain() {
        let _ = stop.send(());
    }
    drop(open_tx);
    if tokio::time::timeout(grace, open_rx.recv()).await.is_err() {
        tracing::warn!(
            ?grace,
            "connections still open after the shutdown grace period"
        );
    }
}

/// Serves one connection until it ends, or is told to stop (then it finishes its requests
/// and closes), or, with `watch`, in a whole period began no request and has none in flight.
async fn run<C>(
    conn: C,
    stop: oneshot::Receiver<()>,
    watch: Option<(Duration, Arc<Progress>)>,
    peer: std::net::SocketAddr,
) where
    C: GracefulConnection,
    C::Error: std::fmt::Display,
{
    tokio::pin!(conn, stop);
    let mut check = watch.as_ref().map(|(period, progress)| {
        let mut every = tokio::time::interval_at(tokio::time::Instant::now() + *period, *period);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        (every, progress.clone(), progress.begun.load(Relaxed))
    });
    let ended = loop {
        tokio::select! {
            biased;
            ended = conn.as_mut() => break ended,
            _ = stop.as_mut() => {
                conn.as_mut().graceful_shutdown();
                break conn.as_mut().await;
            }
            Some((progress, seen)) = next_check(&mut check) => {
                let begun = progress.begun.load(Relaxed);
                if begun == *seen && !progress.in_flight() {
                    return tracing::debug!(%peer, "no request begun in the read timeout; closing the connection");
                }
                *seen = begun;
            }
        }
    };
    if let Err(e) = ended {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// The watch's next period, then its progress and the requests begun at the last check;
/// never, for a connection not watched.
async fn next_check(
    check: &mut Option<(tokio::time::Interval, Arc<Progress>, u64)>,
) -> Option<(&Progress, &mut u64)> {
    match check {
        Some((every, progress, seen)) => {
            every.tick().await;
            Some((progress, seen))
        }
        None => std::future::pending().await,
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

impl<S, R> hyper::service::Service<R> for Counted<S>
where
    S: hyper::service::Service<R>,
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
