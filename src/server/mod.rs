//! `helm-locker serve`: the admission webhook (TLS) and the admin port, fed by a release source.

pub(crate) mod admin;
pub(crate) mod http_admission;
pub(crate) mod listen;
pub(crate) mod pending_clock;
pub mod self_managed;
pub mod state;
mod supervisor;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::confirm::Confirm;
use crate::core::Config;
use crate::index_store::IndexStore;
use crate::metrics::Metrics;
use crate::readiness;
use crate::source;
pub use crate::source::initial_list::InitialList;
use state::{AppState, HttpSettings};
use supervisor::Supervisor;

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

/// The Secret that holds the author stamp's key (`--author-key-secret`, in the locker's
/// namespace).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorKeyPlace {
    pub namespace: String,
    pub name: String,
}

impl Default for AuthorKeyPlace {
    fn default() -> Self {
        AuthorKeyPlace {
            namespace: "default".into(),
            name: "helm-locker-author-key".into(),
        }
    }
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
    /// After SIGTERM: not ready, yet still serving this long, so that the Service's endpoints
    /// and kube-proxy stop routing here before the listener closes.
    pub shutdown_delay: Duration,
    /// Leader election, reverter and HelmReleases (Kubernetes source only).
    pub controller: Option<crate::controller::ControllerSettings>,
    /// Record denials, warnings and repairs as Events on the objects (Kubernetes source only).
    pub events: bool,
    /// Learn from would-be denials into ConfigMaps of this name prefix, in the locker's own
    /// namespace (`--learn`, `--learned-configmap-prefix`); `None`: learn nothing.
    pub learned_configmap_prefix: Option<String>,
    /// How often the learned evidence is written (`--learn-interval`).
    pub learn_interval: Duration,
    /// Honour LockExceptions, open at most this long (Kubernetes source only).
    pub lock_exceptions: Option<Duration>,
    /// A LockException also ends when its release's next revision is deployed.
    pub exceptions_end_on_upgrade: bool,
    /// The ConfigMap of switches in the locker's own namespace (`--switches-configmap`): its
    /// `mode` and `revert` act on the running server as they change.
    pub switches_configmap: Option<String>,
    /// The ConfigMap of writer rules in the locker's own namespace (`--writers-configmap`): one
    /// rule per key, added to the configuration's as they change.
    pub writers_configmap: Option<String>,
    /// Storage namespaces whose releases of other namespaces count without a known author
    /// (`--trusted-storage-namespace`; [`crate::core::speaks_for_its_namespace`]).
    pub trusted_storage_namespaces: Vec<crate::core::TrustedStorage>,
    /// The kinds Helm's releases are read from: Secrets, ConfigMaps, or both
    /// (`--release-drivers`; Kubernetes source only). One watch per kind and scope.
    pub release_drivers: Vec<crate::core::ReleaseDriver>,
    /// How each release watch reads what is stored when it starts (`--initial-list`): a paged
    /// list, a streamed watch, or by the API server's version.
    pub initial_list: InitialList,
    /// The embedded schema a folder of releases is decided with (the Kubernetes source reads
    /// the API server's own).
    pub kube_version: crate::core::KubeVersion,
    /// The Secret that holds the author stamp's key (Kubernetes source only).
    pub author_key: AuthorKeyPlace,
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
    #[error("no usable Kubernetes configuration")]
    Kubernetes(#[source] kube::Error),
    #[error("self-managed certificate")]
    SelfManaged(#[from] self_managed::SelfManagedError),
    #[error("stopped: {0}")]
    TaskEnded(String),
}

/// A server whose ports are bound (so tests and callers know the addresses) but not yet
/// serving.
pub struct BoundServer {
    pub addr: SocketAddr,
    pub admin_addr: SocketAddr,
    /// PEM of the CA that signed the serving certificate, when self-signed.
    pub ca_pem: Option<String>,
    pub(crate) state: Arc<AppState>,
    listener: TcpListener,
    admin_listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    source: ReleaseSource,
    kube: Option<kube::Client>,
    self_managed: Option<(kube::Client, self_managed::SelfManaged)>,
    grace: Duration,
    delay: Duration,
    controller: Option<crate::controller::ControllerSettings>,
    attempts: Option<tokio::sync::mpsc::Receiver<crate::attempts::Attempt>>,
    /// Writes what `state.learning` learned (Kubernetes source, `--learn`).
    learned: Option<crate::learning::Flusher>,
    learn_interval: Duration,
    lock_exceptions: Option<Duration>,
    exceptions_end_on_upgrade: bool,
    switches_configmap: Option<String>,
    writers_configmap: Option<String>,
    /// The gate of releases stored in another namespace (Kubernetes source only).
    gate: Option<Arc<source::storage_gate::StorageGate>>,
    release_drivers: Vec<crate::core::ReleaseDriver>,
    initial_list: source::initial_list::InitialList,
    author_key: AuthorKeyPlace,
    stamping: tokio::sync::watch::Sender<Option<Arc<crate::core::Stamping>>>,
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })
}

/// The serving certificate's files, the CA's PEM when the server made or keeps it, and the
/// client and place of a self-managed certificate (renewed by a task).
async fn serving_certificate(
    certificate: &Certificate,
) -> Result<
    (
        (PathBuf, PathBuf),
        Option<String>,
        Option<(kube::Client, self_managed::SelfManaged)>,
    ),
    ServeError,
> {
    let mut managed = None;
    let (cert_files, ca_pem) = match certificate {
        Certificate::SelfManaged(wanted) => {
            let client = kube::Client::try_default()
                .await
                .map_err(ServeError::Kubernetes)?;
            self_managed::reconcile(&client, wanted).await?;
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
    Ok((cert_files, ca_pem, managed))
}

/// Where a denial's chart files are read: the release objects in the cluster, or the folder.
fn chart_reader(
    kube: Option<&kube::Client>,
    source: &ReleaseSource,
    drivers: &[crate::core::ReleaseDriver],
) -> Box<dyn crate::chart_files::ReadChartFiles> {
    match (kube, source) {
        (Some(client), _) => Box::new(crate::chart_files::KubeChartFiles {
            client: client.clone(),
            drivers: drivers.to_vec(),
        }),
        (None, ReleaseSource::Folder { dir, .. }) => {
            Box::new(crate::chart_files::FolderChartFiles { dir: dir.clone() })
        }
        (None, ReleaseSource::Kubernetes) => {
            unreachable!("a Kubernetes source has a client")
        }
    }
}

/// With `--learn` (a ConfigMap name `prefix`), the recorder of would-be denials, and with a
/// cluster the writer of what it learned into ConfigMaps of the locker's `namespace`.
fn learning(
    kube: Option<&kube::Client>,
    prefix: Option<&str>,
    namespace: &str,
    metrics: &Arc<Metrics>,
) -> (
    Option<Arc<crate::learning::Recorder>>,
    Option<crate::learning::Flusher>,
) {
    // Without a cluster (--releases-dir) what is learned stays in memory, bounded as ever.
    let recorder = prefix
        .is_some()
        .then(|| Arc::new(crate::learning::Recorder::new()));
    let learned = match (kube, prefix, &recorder) {
        (Some(client), Some(prefix), Some(recorder)) => Some(crate::learning::Flusher::new(
            recorder.clone(),
            crate::learning::LearnedConfigMaps {
                client: client.clone(),
                namespace: namespace.to_string(),
                prefix: prefix.to_string(),
            },
            metrics.clone(),
        )),
        _ => None,
    };
    (recorder, learned)
}

impl BoundServer {
    pub async fn bind(settings: Settings) -> Result<BoundServer, ServeError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (cert_files, ca_pem, managed) = serving_certificate(&settings.certificate).await?;
        let metrics = Arc::new(Metrics::new());
        let resolver = Arc::new(tls::ReloadingCert::new(
            cert_files.0,
            cert_files.1,
            metrics.certificate_expiry.clone(),
        )?);
        let tls = Arc::new(tls::server_config(resolver, settings.client_ca.as_deref())?);
        let kube = match settings.source {
            ReleaseSource::Kubernetes => Some(
                kube::Client::try_default()
                    .await
                    .map_err(ServeError::Kubernetes)?,
            ),
            ReleaseSource::Folder { .. } => None,
        };
        let (stamping, stamping_rx) = tokio::sync::watch::channel(None);
        let gate = kube.clone().map(|client| {
            Arc::new(source::storage_gate::StorageGate::new(
                client,
                settings.trusted_storage_namespaces.clone(),
            ))
        });
        let confirmer: Option<Arc<dyn Confirm>> =
            kube.clone().zip(gate.clone()).map(|(client, gate)| {
                Arc::new(source::release_secrets::KubeConfirm {
                    client,
                    stamping: stamping_rx.clone(),
                    gate,
                    drivers: settings.release_drivers.clone(),
                }) as Arc<dyn Confirm>
            });
        let chart_files = Arc::new(crate::chart_files::ChartFilesCache::new(chart_reader(
            kube.as_ref(),
            &settings.source,
            &settings.release_drivers,
        )));
        let scopes = source_scopes(
            &settings.source,
            &settings.config,
            settings.release_drivers.len(),
        ) + usize::from(
            settings.switches_configmap.is_some()
                && matches!(settings.source, ReleaseSource::Kubernetes),
        );
        let (attempt_sink, attempts) = match (&kube, settings.events) {
            (Some(_), true) => {
                let (sink, rx) = crate::attempts::channel(metrics.clone(), 1024);
                (Some(sink), Some(rx))
            }
            _ => (None, None),
        };
        let (recorder, learned) = learning(
            kube.as_ref(),
            settings.learned_configmap_prefix.as_deref(),
            &settings.author_key.namespace,
            &metrics,
        );
        let listener = bind(settings.addr).await?;
        let admin_listener = bind(settings.admin_addr).await?;
        let state = Arc::new(AppState {
            index: Arc::new(IndexStore::default()),
            config: Arc::new(crate::live_config::LiveConfig::new(settings.config)),
            // Replaced by the API server's own document before the server is ready; a folder
            // of releases is decided with the embedded schema of --kube-version.
            schema: Arc::new(source::openapi::SharedSchema::new(
                crate::core::Schema::embedded(settings.kube_version),
            )),
            metrics,
            readiness: Arc::new(readiness::Readiness::new(scopes)),
            confirmer,
            chart_files: Some(chart_files),
            attempts: attempt_sink,
            learning: recorder,
            settings: settings.http,
            stamping: stamping_rx,
            pending: Default::default(),
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
            delay: settings.shutdown_delay,
            controller: settings.controller,
            attempts,
            learned,
            learn_interval: settings.learn_interval,
            lock_exceptions: settings.lock_exceptions,
            exceptions_end_on_upgrade: settings.exceptions_end_on_upgrade,
            gate,
            release_drivers: settings.release_drivers,
            initial_list: settings.initial_list,
            switches_configmap: settings.switches_configmap,
            writers_configmap: settings.writers_configmap,
            author_key: settings.author_key,
            stamping,
        })
    }

    /// Serves until `shutdown` completes, then drains in-flight requests. An error when a
    /// long-running task ended first (see [`Supervisor`]): `/readyz` turned 503 and the
    /// server drained as on shutdown.
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let mut tasks = Supervisor::default();
        // Shutdown has begun: the leader hands its Lease over at once.
        let (leaving_tx, leaving_rx) = tokio::sync::watch::channel(false);
        let serving = self.start_tasks(&mut tasks, leaving_rx);
        serving.serve(tasks, shutdown, leaving_tx).await
    }

    /// Starts the long-running tasks of the release source (a folder, or the API server's
    /// watches, readers and controllers) under `tasks`; what is left serves.
    fn start_tasks(
        self,
        tasks: &mut Supervisor,
        leaving_rx: tokio::sync::watch::Receiver<bool>,
    ) -> Serving {
        let state = self.state;
        if let Some((client, wanted)) = self.self_managed {
            tasks.spawn("the certificate renewal", self_managed::run(client, wanted));
        }
        match self.source {
            ReleaseSource::Folder { dir, interval } => tasks.spawn(
                "the release folder source",
                source::folder::run(
                    dir,
                    state.index.clone(),
                    state.metrics.clone(),
                    state.readiness.clone(),
                    interval,
                ),
            ),
            ReleaseSource::Kubernetes => {
                let client = self.kube.expect("a client for the Kubernetes source");
                spawn_own_namespace_watches(
                    tasks,
                    &client,
                    &state,
                    &self.author_key,
                    self.stamping,
                    self.switches_configmap.clone(),
                    self.writers_configmap.clone(),
                );
                let gate = self.gate.clone().expect("a gate for the Kubernetes source");
                let drivers = self.release_drivers.clone();
                spawn_release_watches(tasks, &client, &state, &gate, &drivers, self.initial_list);
                tasks.spawn(
                    "the schema refresher",
                    source::openapi::run(
                        client.clone(),
                        state.schema.clone(),
                        state.metrics.clone(),
                        state.readiness.clone(),
                        // A 304 when unchanged: cheap. A chart's CRD is known seconds after install.
                        Duration::from_secs(5),
                    ),
                );
                if let Some(attempts) = self.attempts {
                    let identity = self
                        .controller
                        .as_ref()
                        .map(|c| c.identity.clone())
                        .unwrap_or_else(|| "helm-locker".into());
                    tasks.spawn(
                        "the Events publisher",
                        crate::attempts::publish(
                            client.clone(),
                            identity,
                            attempts,
                            state.metrics.clone(),
                        ),
                    );
                }
                if let Some(learned) = self.learned.clone() {
                    tasks.spawn(
                        "the learned evidence writer",
                        learned.run(self.learn_interval),
                    );
                }
                if let Some(max) = self.lock_exceptions {
                    spawn_lock_exception_watches(
                        tasks,
                        &client,
                        &state,
                        max,
                        self.exceptions_end_on_upgrade,
                    );
                }
                start_controllers(
                    tasks,
                    client,
                    &state,
                    self.controller,
                    gate,
                    drivers,
                    leaving_rx,
                );
            }
        }
        Serving {
            state,
            listener: self.listener,
            admin_listener: self.admin_listener,
            tls: self.tls,
            grace: self.grace,
            delay: self.delay,
            learned: self.learned,
        }
    }
}

/// What serves once the tasks are started: the two ports and what shutdown finishes.
struct Serving {
    state: Arc<AppState>,
    listener: TcpListener,
    admin_listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    grace: Duration,
    delay: Duration,
    learned: Option<crate::learning::Flusher>,
}

impl Serving {
    /// Serves the webhook and the admin port until `shutdown` completes or a task ends first
    /// (`leaving` tells the leader), turns unready, drains, writes what was learned and stops
    /// the tasks.
    async fn serve(
        self,
        mut tasks: Supervisor,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
        leaving_tx: tokio::sync::watch::Sender<bool>,
    ) -> Result<(), ServeError> {
        let state = self.state;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let wait = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|stop| *stop).await;
        };
        let header_timeout = state.settings.read_timeout;
        let webhook = tokio::spawn(listen::serve(
            self.listener,
            Some(self.tls),
            http_admission::Webhook::new(state.clone()),
            header_timeout,
            self.grace,
            wait(stop_rx.clone()),
        ));
        let admin = tokio::spawn(listen::serve(
            self.admin_listener,
            None,
            hyper_util::service::TowerToHyperService::new(admin::router(state.clone())),
            header_timeout,
            self.grace,
            wait(stop_rx),
        ));
        let failure = tokio::select! {
            () = shutdown => None,
            why = tasks.first_exit() => Some(why),
        };
        let _ = leaving_tx.send(true);
        turn_unready(&state, failure.as_deref(), self.delay).await;
        let _ = stop_tx.send(true);
        let _ = webhook.await;
        let _ = admin.await;
        // What was learned since the last flush, answered reviews included.
        if let Some(learned) = &self.learned {
            let _ = tokio::time::timeout(Duration::from_secs(5), learned.flush()).await;
        }
        tasks.shutdown().await;
        failure.map_or(Ok(()), |why| Err(ServeError::TaskEnded(why)))
    }
}

/// The watches of the locker's own namespace: the author key's Secret, and the switches and
/// writer rules ConfigMaps when configured.
fn spawn_own_namespace_watches(
    tasks: &mut Supervisor,
    client: &kube::Client,
    state: &AppState,
    author_key: &AuthorKeyPlace,
    stamping: tokio::sync::watch::Sender<Option<Arc<crate::core::Stamping>>>,
    switches_configmap: Option<String>,
    writers_configmap: Option<String>,
) {
    tasks.spawn(
        "the author key loader",
        source::author_key::AuthorKeySecret {
            client: client.clone(),
            namespace: author_key.namespace.clone(),
            name: author_key.name.clone(),
        }
        .run(stamping),
    );
    if let Some(name) = switches_configmap {
        tasks.spawn(
            "the switches watch",
            source::switches::SwitchesConfigMap {
                client: client.clone(),
                namespace: author_key.namespace.clone(),
                name,
                config: state.config.clone(),
                metrics: state.metrics.clone(),
                readiness: state.readiness.clone(),
            }
            .run(),
        );
    }
    if let Some(name) = writers_configmap {
        tasks.spawn(
            "the writer rules watch",
            source::writer_rules::WriterRulesConfigMap {
                client: client.clone(),
                namespace: author_key.namespace.clone(),
                name,
                config: state.config.clone(),
                metrics: state.metrics.clone(),
            }
            .run(),
        );
    }
}

/// One release watch per namespace scope and driver, each in a span naming both (its task's
/// span inside it names the kind).
fn spawn_release_watches(
    tasks: &mut Supervisor,
    client: &kube::Client,
    state: &AppState,
    gate: &Arc<source::storage_gate::StorageGate>,
    drivers: &[crate::core::ReleaseDriver],
    initial_list: source::initial_list::InitialList,
) {
    let drivers = drivers.to_vec();
    for ns in watch_scopes(&state.config.load()) {
        for driver in &drivers {
            // Entered only while the watch is spawned: its task's span is a child of this one.
            let _scope = tracing::info_span!(
                "release_watch",
                namespace = ns.as_deref().unwrap_or("(all)"),
                driver = ?driver,
            )
            .entered();
            let watch = source::release_secrets::ReleaseObjectsWatch {
                client: client.clone(),
                namespace: ns.clone(),
                index: state.index.clone(),
                metrics: state.metrics.clone(),
                readiness: state.readiness.clone(),
                stamping: state.stamping.clone(),
                gate: gate.clone(),
                drivers: drivers.clone(),
                initial_list,
            };
            let (name, task) = source::release_object::with_kind(*driver, watch);
            tasks.spawn(name, task);
        }
    }
}

/// One LockException watch per namespace scope, each in a span naming its namespace.
fn spawn_lock_exception_watches(
    tasks: &mut Supervisor,
    client: &kube::Client,
    state: &AppState,
    max: Duration,
    end_on_upgrade: bool,
) {
    for namespace in watch_scopes(&state.config.load()) {
        let _scope = tracing::info_span!(
            "lock_exception_watch",
            namespace = namespace.as_deref().unwrap_or("(all)"),
        )
        .entered();
        tasks.spawn(
            "a LockException watch",
            source::lock_exceptions::LockExceptions {
                client: client.clone(),
                namespace,
                index: state.index.clone(),
                metrics: state.metrics.clone(),
                max,
                end_on_upgrade,
            }
            .run(),
        );
    }
}

/// The namespaces each watch covers: one watch per `--namespace`, or one for all of them.
fn watch_scopes(config: &Config) -> Vec<Option<String>> {
    if config.namespaces.is_empty() {
        vec![None]
    } else {
        config.namespaces.iter().cloned().map(Some).collect()
    }
}

/// `/readyz` turns 503 before the listeners stop. On a clean shutdown the server keeps
/// serving for `delay` while the endpoints are updated (a second signal ends the wait); when
/// a task ended (`failure`) it says which and drains at once.
async fn turn_unready(state: &AppState, failure: Option<&str>, delay: Duration) {
    match failure {
        None => {
            state.readiness.fail("shutting down".into());
            if !delay.is_zero() {
                tracing::info!(delay = ?delay, "shutting down: not ready, still serving while the endpoints are updated (a second signal ends the wait)");
                tokio::select! {
                    () = tokio::time::sleep(delay) => {},
                    () = shutdown_signal() => tracing::info!("a second signal: not waiting any longer"),
                }
            }
            tracing::info!("shutting down: no new connections, finishing in-flight requests")
        }
        Some(why) => {
            tracing::error!(task = %why, "a task the server needs ended; not ready, draining and exiting");
            state.readiness.fail(why.to_owned());
        }
    }
}

/// How many scopes must list before the server is ready: each release Secret watch, the
/// HelmRelease watch and the API server's schema, or the folder's first read.
fn source_scopes(source: &ReleaseSource, config: &Config, drivers: usize) -> usize {
    match source {
        ReleaseSource::Folder { .. } => 1,
        ReleaseSource::Kubernetes => {
            // A watch per release driver and namespace scope.
            config.namespaces.len().max(1) * drivers
                + usize::from(config.registration_namespace.is_some())
                + 1
        }
    }
}

/// Leader election, the reverter and the HelmRelease watch, as configured.
fn start_controllers(
    tasks: &mut Supervisor,
    client: kube::Client,
    state: &Arc<AppState>,
    settings: Option<crate::controller::ControllerSettings>,
    gate: Arc<source::storage_gate::StorageGate>,
    drivers: Vec<crate::core::ReleaseDriver>,
    leaving: tokio::sync::watch::Receiver<bool>,
) {
    use crate::controller::{helmreleases::HelmReleases, lease, reverter::Reverter};
    use kube::runtime::events::{Recorder, Reporter};
    let registration_ns = state.config.load().registration_namespace.clone();
    let settings = settings.unwrap_or_else(|| crate::controller::ControllerSettings {
        revert: false,
        recreate: false,
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
        tasks.spawn("the leader metric", async move {
            while watch_leader.changed().await.is_ok() {
                metrics.is_leader.set(i64::from(*watch_leader.borrow()));
            }
        });
        tasks.spawn(
            "the leader election",
            lease::Election {
                client: client.clone(),
                namespace: settings.lease_namespace.clone(),
                name: settings.lease_name.clone(),
                identity: settings.identity.clone(),
                timing: lease::Timing::for_duration(settings.lease_duration),
            }
            .run(leader_tx, leaving),
        );
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
                stamping: state.stamping.clone(),
                gate,
                drivers,
            }),
            leader_rx.clone(),
            state.metrics.clone(),
            recorder.clone(),
            settings.recreate,
        ));
        let readiness = state.readiness.clone();
        tasks.spawn("the drift reverter", async move {
            // Revert against a complete index only.
            if readiness.wait_ready().await {
                reverter.run().await;
            }
        });
    }
    if let Some(namespace) = registration_ns {
        tasks.spawn(
            "the HelmRelease watch",
            HelmReleases {
                client,
                namespace,
                index: state.index.clone(),
                config: state.config.clone(),
                leader: leader_rx,
                recorder,
                metrics: state.metrics.clone(),
                readiness: state.readiness.clone(),
            }
            .run(),
        );
    }
}

/// Completes on SIGTERM or Ctrl-C.
pub(crate) async fn shutdown_signal() {
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
