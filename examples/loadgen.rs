//! Load generator for admission webhooks over TLS: POSTs a mix of AdmissionReview bodies over
//! HTTP/1.1 keep-alive or HTTP/2, at the highest rate it can or at a fixed rate, and prints one
//! JSON line: throughput, latency percentiles (HdrHistogram; at a fixed rate measured from when
//! each request was due, so a stalled server is not hidden), errors, denials, and the server's
//! CPU and RSS read from /proc. Used by scripts/load.sh and scripts/scale.sh.
//!
//!   cargo run --release --example loadgen -- --url https://127.0.0.1:8443/validate \
//!       --ca certs/ca.crt --mix mix.txt --connections 32 [--http2 --streams 8] \
//!       [--rate 5000] --seconds 10 [--server-pid PID]
//!
//! `--mix` names a file with one review path per line; each worker walks it from its own offset,
//! so a path written 9 times is sent 9 times as often as one written once.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};

#[derive(Parser, Clone)]
struct Args {
    /// Webhook URL (https://HOST:PORT/PATH).
    #[arg(long)]
    url: String,
    /// CA certificate (PEM) that signed the server's certificate.
    #[arg(long)]
    ca: PathBuf,
    /// File listing review paths, one per line (repeat a line to weight it).
    #[arg(long)]
    mix: PathBuf,
    /// TCP connections.
    #[arg(long, default_value_t = 32)]
    connections: usize,
    /// HTTP/2 (ALPN h2) instead of HTTP/1.1 keep-alive.
    #[arg(long)]
    http2: bool,
    /// Concurrent streams per HTTP/2 connection.
    #[arg(long, default_value_t = 8)]
    streams: usize,
    /// Total requests per second (0: as fast as the server answers).
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Length of the measured run.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Unmeasured warm-up before the run.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Report this process's CPU time and RSS over the run.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Open a new connection (a new TLS handshake) every this many requests per worker, 0 for
    /// never (HTTP/1.1 only).
    #[arg(long, default_value_t = 0)]
    new_connection_every: u64,
    /// A label copied into the output.
    #[arg(long, default_value = "")]
    label: String,
}

struct Target {
    host: String,
    port: u16,
    path: String,
}

fn parse_url(url: &str) -> Target {
    let rest = url.strip_prefix("https://").expect("an https:// URL");
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (host, port) = authority.rsplit_once(':').expect("HOST:PORT");
    Target {
        host: host.into(),
        port: port.parse().expect("a port"),
        path: format!("/{path}"),
    }
}

#[derive(Default)]
struct Tally {
    histogram: Option<Histogram<u64>>,
    ok: u64,
    /// Requests sent that got no answer, or a non-200 one.
    errors: u64,
    /// Requests never sent: the connection was closed or refused before (server shut down).
    unsent: u64,
    denied: u64,
}

impl Tally {
    fn new() -> Self {
        Tally {
            histogram: Some(Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram")),
            ..Tally::default()
        }
    }
    fn merge(&mut self, other: Tally) {
        if let (Some(a), Some(b)) = (&mut self.histogram, &other.histogram) {
            a.add(b).expect("same bounds");
        }
        self.ok += other.ok;
        self.errors += other.errors;
        self.unsent += other.unsent;
        self.denied += other.denied;
    }
}

/// utime + stime of a process in clock ticks, and its RSS in KiB.
fn proc_usage(pid: u32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches(" kB")
        .parse()
        .ok()?;
    Some((ticks, rss))
}

enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

/// Whether a failed request was processed: over HTTP/2 a stream the server refused
/// (REFUSED_STREAM, or above the last stream a GOAWAY accepted) never reached it, and clients
/// such as the API server's retry it.
fn classify(e: &hyper::Error) -> SendError {
    let mut chain = format!("{e:?}");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        chain.push_str(&format!(" {s:?}"));
        source = s.source();
    }
    if std::env::var_os("LOADGEN_DEBUG").is_some() {
        eprintln!("request failed: {chain}");
    }
    if e.is_canceled() || chain.contains("REFUSED_STREAM") || chain.contains("GoAway") {
        SendError::NotSent
    } else {
        SendError::InFlight
    }
}

enum SendError {
    /// The connection was gone before the request left.
    NotSent,
    /// The request was sent; the answer never came.
    InFlight,
}

impl Sender {
    async fn send(
        &mut self,
        request: hyper::Request<Full<Bytes>>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, SendError> {
        match self {
            Sender::H1(s) => {
                s.ready().await.map_err(|_| SendError::NotSent)?;
                s.send_request(request).await.map_err(|e| classify(&e))
            }
            Sender::H2(s) => {
                s.ready().await.map_err(|_| SendError::NotSent)?;
                s.send_request(request).await.map_err(|e| classify(&e))
            }
        }
    }
}

async fn connect(
    target: &Target,
    tls: &tokio_rustls::TlsConnector,
    http2: bool,
) -> std::io::Result<Sender> {
    let tcp = tokio::net::TcpStream::connect((target.host.as_str(), target.port)).await?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from(target.host.clone()).expect("server name");
    let stream = TokioIo::new(tls.connect(name, tcp).await?);
    let io_error = |e: hyper::Error| std::io::Error::other(e.to_string());
    if http2 {
        let (sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), stream)
            .await
            .map_err(io_error)?;
        tokio::spawn(conn);
        Ok(Sender::H2(sender))
    } else {
        let (sender, conn) = hyper::client::conn::http1::handshake(stream)
            .await
            .map_err(io_error)?;
        tokio::spawn(conn);
        Ok(Sender::H1(sender))
    }
}

/// One worker: sends the mix from `offset`, paced by `interval` when set, until `end`. A
/// failed request counts as an error and the worker reconnects (HTTP/1.1).
#[allow(clippy::too_many_arguments)]
async fn worker(
    mut sender: Sender,
    target: Arc<Target>,
    tls: tokio_rustls::TlsConnector,
    bodies: Arc<Vec<Bytes>>,
    offset: usize,
    interval: Option<Duration>,
    new_connection_every: u64,
    start: Instant,
    measure_from: Instant,
    end: Instant,
) -> Tally {
    let mut tally = Tally::new();
    let mut i = offset;
    let mut due = start;
    let mut previous_done = start;
    loop {
        // Latency counts from when the request was sent, or, when the server's previous answer
        // came after this request was due, from when it was due (no coordinated omission).
        // Timer lateness (tokio's timer has 1 ms resolution) is the generator's, not counted.
        let sent_at;
        if let Some(interval) = interval {
            due += interval;
            tokio::time::sleep_until(due.into()).await;
            sent_at = if previous_done > due {
                due
            } else {
                Instant::now()
            };
        } else {
            due = Instant::now();
            sent_at = due;
        }
        if due >= end {
            return tally;
        }
        let body = bodies[i % bodies.len()].clone();
        i += 1;
        let request = hyper::Request::post(target.path.as_str())
            .header("host", format!("{}:{}", target.host, target.port))
            .header("content-type", "application/json")
            .body(Full::new(body))
            .expect("request");
        let outcome = match sender.send(request).await {
            Ok(response) => {
                let ok = response.status() == 200;
                match response.into_body().collect().await {
                    Ok(body) if ok => Ok(body.to_bytes()),
                    _ => Err(SendError::InFlight),
                }
            }
            Err(e) => Err(e),
        };
        previous_done = Instant::now();
        let h1 = matches!(sender, Sender::H1(_));
        let renew = new_connection_every > 0 && (i as u64) % new_connection_every == 0;
        if h1 && (outcome.is_err() || renew) {
            match connect(&target, &tls, false).await {
                Ok(fresh) => sender = fresh,
                // Refused (the server is gone): try again a little later.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
        if due < measure_from {
            continue;
        }
        let micros = previous_done.duration_since(sent_at).as_micros().max(1) as u64;
        match outcome {
            Ok(body) => {
                tally.ok += 1;
                if memchr(b"\"allowed\":false", &body) {
                    tally.denied += 1;
                }
                if let Some(h) = &mut tally.histogram {
                    h.saturating_record(micros);
                }
            }
            Err(SendError::InFlight) => tally.errors += 1,
            Err(SendError::NotSent) => tally.unsent += 1,
        }
    }
}

fn memchr(needle: &[u8], haystack: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let target = Arc::new(parse_url(&args.url));
    let mix = std::fs::read_to_string(&args.mix).expect("mix file");
    let bodies: Vec<Bytes> = mix
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|path| Bytes::from(std::fs::read(path.trim()).expect("review file")))
        .collect();
    assert!(!bodies.is_empty(), "the mix is empty");
    let bodies = Arc::new(bodies);

    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(&args.ca).expect("CA file") {
        roots.add(cert.expect("CA certificate")).expect("CA");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![if args.http2 {
        b"h2".to_vec()
    } else {
        b"http/1.1".to_vec()
    }];
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config));

    let per_connection = if args.http2 { args.streams } else { 1 };
    let workers = args.connections * per_connection;
    let interval =
        (args.rate > 0).then(|| Duration::from_secs_f64(workers as f64 / args.rate as f64));
    let mut senders = Vec::new();
    for _ in 0..args.connections {
        let sender = connect(&target, &tls, args.http2)
            .await
            .expect("connect to the server");
        match sender {
            Sender::H2(s) => {
                for _ in 0..per_connection {
                    senders.push(Sender::H2(s.clone()));
                }
            }
            h1 => senders.push(h1),
        }
    }
    let start = Instant::now();
    let measure_from = start + Duration::from_secs_f64(args.warmup);
    let end = measure_from + Duration::from_secs_f64(args.seconds);
    let mut tasks = Vec::new();
    for (n, sender) in senders.into_iter().enumerate() {
        // Spread the workers' first requests over one interval, and their place in the mix.
        let stagger = interval.map_or(Duration::ZERO, |i| i * n as u32 / workers as u32);
        tasks.push(tokio::spawn(worker(
            sender,
            target.clone(),
            tls.clone(),
            bodies.clone(),
            n * 7919,
            interval,
            args.new_connection_every,
            start + stagger,
            measure_from,
            end,
        )));
    }
    tokio::time::sleep_until(measure_from.into()).await;
    let before = args.server_pid.and_then(proc_usage);
    let mut tally = Tally::new();
    for task in tasks {
        tally.merge(task.await.expect("worker"));
    }
    let after = args.server_pid.and_then(proc_usage);
    let elapsed = args.seconds;
    let h = tally.histogram.as_ref().expect("histogram");
    let ticks_per_second = 100.0; // USER_HZ on Linux
    let (cpu, rss) = match (before, after) {
        (Some((t0, _)), Some((t1, rss))) => (
            format!(
                "{:.1}",
                (t1 - t0) as f64 / ticks_per_second / elapsed * 100.0
            ),
            rss.to_string(),
        ),
        _ => ("null".into(), "null".into()),
    };
    println!(
        "{{\"label\":{:?},\"protocol\":\"{}\",\"rate\":{},\"requests\":{},\"errors\":{},\"unsent\":{},\"denied\":{},\"rps\":{:.0},\"p50_us\":{},\"p99_us\":{},\"p999_us\":{},\"max_us\":{},\"server_cpu_percent\":{},\"server_rss_kib\":{}}}",
        args.label,
        if args.http2 { "h2" } else { "http/1.1" },
        args.rate,
        tally.ok,
        tally.errors,
        tally.unsent,
        tally.denied,
        tally.ok as f64 / elapsed,
        h.value_at_quantile(0.50),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999),
        h.max(),
        cpu,
        rss,
    );
}
