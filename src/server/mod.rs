//! `helm-locker serve`: the admission webhook (TLS) and the admin port, fed by a release source.

pub mod admin;
pub mod http_admission;
pub mod listen;
pub mod metrics;
pub mod self_managed;
pub mod state;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::index_store::IndexStore;
use crate::policy::Config;
use crate::source;
use metrics::Metrics;
use state::{AppState, Confirm, HttpSettings};

/// Where the serving certificate comes from.
#[derive(Clone, Debug)]
pub enum Certificate {
    /// PEM files, re-read when they change.
    Files { cert: PathBuf, key: PathBuf },
    /// Generated at start (CA and serving certificate); the CA is written to `ca_out`.
    SelfSigned { names: Vec<String>, dir: PathBuf },
    /// Kept in a Secret by the server itself, which also keeps the caBundle of its webhook
    /// configurations current (see [`self_managed`]).
    SelfManaged(self_managed::SelfManaged),
}

/// Where releases come from.
#[derive(Clone, Debug)]
pub enum ReleaseSource {
    /// Release Secret files, polled for changes.
    Folder { dir: PathBuf, interval: Duration },
    /// The API server (kubeconfig or in-cluster configuration).
    Kubernetes,
}

#[derive(Clone, Debug)]
pub struct Settings {
    pub addr: SocketAddr,
    pub admin_addr: SocketAddr,
    pub certificate: Certificate,
    pub client_ca: Option<PathBuf>,
    pub source: ReleaseSource,
    pub config: Config,
    pub http: HttpSettings,
    pub shutdown_grace: Duration,
    /// Leader election, reverter and HelmReleases (Kubernetes source only).
    pub controller: Option<crate::controller::ControllerSettings>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("cannot generate a self-signed certificate: {0}")]
    SelfSigned(String),
    #[error("{0}")]
    Kubernetes(String),
    #[error("self-managed certificate: {0}")]
    SelfManaged(String),
}

/// A server whose ports are bound (so tests and callers know the addresses) but not yet
/// serving.
pub struct BoundServer {
    pub addr: SocketAddr,
    pub admin_addr: SocketAddr,
    /// PEM of the CA that signed the serving certificate, when self-signed.
    pub ca_pem: Option<String>,
    pub state: Arc<AppState>,
    listener: TcpListener,
    admin_listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    source: ReleaseSource,
    kube: Option<kube::Client>,
    self_managed: Option<(kube::Client, self_managed::SelfManaged)>,
    grace: Duration,
    controller: Option<crate::controller::ControllerSettings>,
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })
}

impl BoundServer {
    pub async fn bind(settings: Settings) -> Result<BoundServer, ServeError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut managed = None;
        let (cert_files, ca_pem) = match &settings.certificate {
            Certificate::SelfManaged(wanted) => {
                let client = source::release_secrets::client()
                    .await
                    .map_err(ServeError::Kubernetes)?;
                self_managed::reconcile(&client, wanted)
                    .await
                    .map_err(ServeError::SelfManaged)?;
                let ca = std::fs::read_to_string(wanted.dir.join("ca.crt")).ok();
                managed = Some((client, wanted.clone()));
                ((wanted.dir.join("tls.crt"), wanted.dir.join("tls.key")), ca)
            }
            Certificate::Files { cert, key } => ((cert.clone(), key.clone()), None),
            Certificate::SelfSigned { names, dir } => {
                let pki = certs_gen::generate("helm-locker", names, &Default::default())
                    .map_err(|e| ServeError::SelfSigned(e.to_string()))?;
                let write = |name: &str, text: &str| {
                    std::fs::create_dir_all(dir)
                        .and_then(|()| std::fs::write(dir.join(name), text))
                        .map_err(|e| {
                            ServeError::SelfSigned(format!("{}: {e}", dir.join(name).display()))
                        })
                };
                write("ca.crt", &pki.ca_pem)?;
                write("tls.crt", &pki.cert_pem)?;
                write("tls.key", &pki.key_pem)?;
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    let _ = std::fs::set_permissions(
                        dir.join("tls.key"),
                        std::fs::Permissions::from_mode(0o600),
                    );
                }
                tracing::info!(ca = %dir.join("ca.crt").display(), names = ?names, "self-signed certificate generated; give the CA to clients (curl --cacert)");
                ((dir.join("tls.crt"), dir.join("tls.key")), Some(pki.ca_pem))
            }
        };
        let resolver = Arc::new(tls::ReloadingCert::new(cert_files.0, cert_files.1)?);
        let tls = Arc::new(tls::server_config(resolver, settings.client_ca.as_deref())?);
        let kube = match settings.source {
            ReleaseSource::Kubernetes => Some(
                source::release_secrets::client()
                    .await
                    .map_err(ServeError::Kubernetes)?,
            ),
            ReleaseSource::Folder { .. } => None,
        };
        let confirmer: Option<Arc<dyn Confirm>> = kube.clone().map(|client| {
            Arc::new(source::release_secrets::KubeConfirm { client }) as Arc<dyn Confirm>
        });
        let listener = bind(settings.addr).await?;
        let admin_listener = bind(settings.admin_addr).await?;
        let state = Arc::new(AppState {
            index: Arc::new(IndexStore::default()),
            config: Arc::new(settings.config),
            schema: Arc::new(crate::schema::SharedSchema::new(
                crate::schema::Schema::builtin(),
            )),
            metrics: Arc::new(Metrics::new()),
            ready: Arc::new(AtomicBool::new(false)),
            confirmer,
            settings: settings.http,
        });
        Ok(BoundServer {
            addr: listener.local_addr().map_err(|source| ServeError::Bind {
                addr: settings.addr,
                source,
            })?,
            admin_addr: admin_listener
                .local_addr()
                .map_err(|source| ServeError::Bind {
                    addr: settings.admin_addr,
                    source,
                })?,
            ca_pem,
            state,
            listener,
            admin_listener,
            tls,
            source: settings.source,
            kube,
            self_managed: managed,
            grace: settings.shutdown_grace,
            controller: settings.controller,
        })
    }

    /// Serves until `shutdown` completes, then drains in-flight requests.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()> + Send + 'static) {
        let state = self.state;
        let certificate_task = self
            .self_managed
            .map(|(client, wanted)| tokio::spawn(self_managed::run(client, wanted)));
        let source_task = match self.source {
            ReleaseSource::Folder { dir, interval } => tokio::spawn(source::folder::run(
                dir,
                state.index.clone(),
                state.metrics.clone(),
                state.ready.clone(),
                interval,
            )),
            ReleaseSource::Kubernetes => {
                let client = self.kube.expect("a client for the Kubernetes source");
                let scopes: Vec<Option<String>> = if state.config.namespaces.is_empty() {
                    vec![None]
                } else {
                    state.config.namespaces.iter().cloned().map(Some).collect()
                };
                let registration_ns = state.config.registration_namespace.clone();
                let total = scopes.len() + usize::from(registration_ns.is_some());
                let ready_scopes = Arc::new(AtomicUsize::new(0));
                let mut tasks: Vec<_> = scopes
                    .into_iter()
                    .map(|ns| {
                        tokio::spawn(source::release_secrets::watch(
                            client.clone(),
                            ns,
                            state.index.clone(),
                            state.metrics.clone(),
                            state.ready.clone(),
                            ready_scopes.clone(),
                            total,
                        ))
                    })
                    .collect();
                tasks.push(tokio::spawn(source::openapi::run(
                    client.clone(),
                    state.schema.clone(),
                    state.metrics.clone(),
                    // A 304 when unchanged: cheap. A chart's CRD is known seconds after install.
                    Duration::from_secs(5),
                )));
                tasks.extend(start_controllers(
                    client,
                    &state,
                    self.controller,
                    registration_ns,
                    ready_scopes,
                    total,
                ));
                tokio::spawn(async move {
                    for task in tasks {
                        let _ = task.await;
                    }
                })
            }
        };
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let wait = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|stop| *stop).await;
        };
        let header_timeout = state.settings.read_timeout;
        let webhook = tokio::spawn(listen::serve(
            self.listener,
            Some(self.tls),
            http_admission::router(state.clone()),
            header_timeout,
            self.grace,
            wait(stop_rx.clone()),
        ));
        let admin = tokio::spawn(listen::serve(
            self.admin_listener,
            None,
            admin::router(state.clone()),
            header_timeout,
            self.grace,
            wait(stop_rx),
        ));
        shutdown.await;
        tracing::info!("shutting down: no new connections, finishing in-flight requests");
        let _ = stop_tx.send(true);
        let _ = webhook.await;
        let _ = admin.await;
        source_task.abort();
        if let Some(task) = certificate_task {
            task.abort();
        }
    }
}

/// Completes on SIGTERM or Ctrl-C.
/// Leader election, the reverter and the HelmRelease watch, as configured.
fn start_controllers(
    client: kube::Client,
    state: &Arc<AppState>,
    settings: Option<crate::controller::ControllerSettings>,
    registration_ns: Option<String>,
    ready_scopes: Arc<AtomicUsize>,
    total_scopes: usize,
) -> Vec<tokio::task::JoinHandle<()>> {
    use crate::controller::{helmreleases::HelmReleases, lease, reverter::Reverter};
    use kube::runtime::events::{Recorder, Reporter};
    let mut tasks = Vec::new();
    let settings = settings.unwrap_or_else(|| crate::controller::ControllerSettings {
        revert: false,
        lease_namespace: String::new(),
        lease_name: String::new(),
        identity: String::new(),
        lease_duration: Duration::from_secs(15),
    });
    let (leader_tx, leader_rx) = tokio::sync::watch::channel(false);
    let elects = settings.revert || registration_ns.is_some();
    if elects {
        let metrics = state.metrics.clone();
        let mut watch_leader = leader_rx.clone();
        tasks.push(tokio::spawn(async move {
            while watch_leader.changed().await.is_ok() {
                metrics.is_leader.set(i64::from(*watch_leader.borrow()));
            }
        }));
        tasks.push(tokio::spawn(
            lease::Election {
                client: client.clone(),
                namespace: settings.lease_namespace.clone(),
                name: settings.lease_name.clone(),
                identity: settings.identity.clone(),
                timing: lease::Timing::for_duration(settings.lease_duration),
            }
            .run(leader_tx),
        ));
    }
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "helm-locker".into(),
            instance: Some(settings.identity.clone()),
        },
    );
    if settings.revert {
        let reverter = Arc::new(Reverter::new(
            client.clone(),
            state.index.clone(),
            state.config.clone(),
            state.schema.clone(),
            Arc::new(source::release_secrets::KubeConfirm {
                client: client.clone(),
            }),
            leader_rx.clone(),
            state.metrics.clone(),
            recorder.clone(),
        ));
        let ready = state.ready.clone();
        tasks.push(tokio::spawn(async move {
            // Revert against a complete index only.
            while !ready.load(std::sync::atomic::Ordering::Acquire) {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            reverter.run().await;
        }));
    }
    if let Some(namespace) = registration_ns {
        tasks.push(tokio::spawn(
            HelmReleases {
                client,
                namespace,
                index: state.index.clone(),
                config: state.config.clone(),
                leader: leader_rx,
                recorder,
                metrics: state.metrics.clone(),
                ready: state.ready.clone(),
                ready_scopes,
                total_scopes,
            }
            .run(),
        ));
    }
    tasks
}

pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
