//! The composition root: the command line (`helm-locker --help`), and each command wired from
//! the core and the shell. `main.rs` only calls [`main`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};

use crate::core::{
    decide, inspect, inspect_text, parse_review, render_response, validate_config,
    ChartsByRevision, Config, Index, KubeVersion, Mode, Schema,
};
use crate::source::files;

/// Makes Helm the only way to change what Helm installed.
///
/// helm-locker is a Kubernetes admission webhook: it indexes the objects that deployed Helm
/// releases own (from their release Secrets) and denies writes to them from anyone but Helm.
#[derive(Parser)]
#[command(name = "helm-locker", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the admission webhook (HTTPS) and the admin port (health, readiness, metrics).
    ///
    /// Every flag can also be set as the environment variable shown with it (`--help`; lists
    /// take plural names, e.g. HELM_LOCKER_NAMESPACES), and the
    /// lock policy (mode per namespace or release, exemptions, ignore rules) in --config.
    /// Local run: helm-locker serve --self-signed --releases-dir examples/releases
    Serve(Box<ServeArgs>),
    /// Print each release (name, namespace, revision, status) and the objects it locks.
    ///
    /// Reads release Secrets as `kubectl get secret -l owner=helm -o json|yaml` prints them
    /// (one Secret, a List, several YAML documents) or a bare `data.release` value.
    /// Example: kubectl get secret -A -l owner=helm -o json | helm-locker inspect -
    Inspect {
        /// Files or folders of release Secrets; `-` reads standard input.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// Print the HelmRelease CustomResourceDefinition (helm.cattle.io/v1alpha1) as YAML, or
    /// with --lock-exception the LockException one (helm-locker.io/v1alpha1).
    ///
    /// The chart ships the same files under charts/helm-locker/crds/.
    Crd {
        /// The LockException CRD (time-boxed exceptions to the lock).
        #[arg(long)]
        lock_exception: bool,
    },
    /// Decide one AdmissionReview offline, exactly as the server would, and print the response.
    ///
    /// Exit status is 0 for allow and deny alike; non-zero only when the input is unusable.
    Review {
        /// Files or folders of release Secrets (.json/.yaml); the last path given here is
        /// taken as REVIEW when REVIEW is not given separately.
        #[arg(long = "releases", required = true, num_args = 1..)]
        releases: Vec<PathBuf>,
        /// The AdmissionReview JSON (`-` reads standard input).
        review: Option<PathBuf>,
        /// Configuration file (YAML): mode, exemptions, ignore rules, which releases are locked.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Override the configured mode.
        #[arg(long, value_parser = mode_parser())]
        mode: Option<Mode>,
        /// Decide as a server with this --revert (its default too): with the reverter, a CREATE
        /// of what Helm wrote by another field manager (a restore) is allowed, since the
        /// reverter hands the fields back to Helm.
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1,
              default_missing_value = "true", value_name = "BOOL")]
        revert: bool,
        /// Decide as a server with this --own-release (NAMESPACE/NAME): that release is never
        /// locked.
        #[arg(long, value_parser = release_key, value_name = "NAMESPACE/NAME")]
        own_release: Option<crate::core::ReleaseKey>,
        /// Explain the decision in one sentence on standard error.
        #[arg(long)]
        explain: bool,
        /// The API server's OpenAPI v2 document (`kubectl get --raw /openapi/v2`), for custom
        /// resources and kinds newer than the embedded Kubernetes 1.20 schema.
        #[arg(long)]
        openapi: Option<PathBuf>,
        /// Without --openapi: the embedded schema of this Kubernetes version's built-in kinds
        /// (1.20, 1.28, 1.34, 1.36; another minor reads as the nearest older one). What Helm owns
        /// differs between versions (a Service's selector is atomic on 1.28 and later).
        #[arg(long, value_parser = kube_version, default_value = KubeVersion::NEWEST.as_str())]
        kube_version: KubeVersion,
        /// CustomResourceDefinitions (files or folders of YAML or JSON, several documents or a
        /// List; repeatable): their schemas' list types and map keys (a Gateway's `listeners`
        /// keyed by `name`), which kind a resource's `scale` writes and through which
        /// `specReplicasPath`, as the server learns them from the API server. CRDs the releases
        /// render, and those in their charts' `crds/` folders, are read too.
        #[arg(long = "crd")]
        crds: Vec<PathBuf>,
    },
    /// Compare what helm-locker locks in live objects with what the API server attributes to
    /// Helm's field manager (the `Apply` entry of `metadata.managedFields`).
    ///
    /// Prints one JSON line per object: the fields Helm owns that helm-locker does not lock
    /// (`missing`) and those it locks beyond Helm's entry (`extra`). Exit status 1 when any
    /// object differs, 2 when the input is unusable.
    /// Example: kubectl get deploy,svc,cm -n shop -o json > live.json;
    ///          kubectl get secret -n shop -l owner=helm -o json > releases.json;
    ///          helm-locker owned-fields --releases releases.json live.json
    OwnedFields {
        /// Files or folders of release Secrets; the last path given here is taken as OBJECTS
        /// when OBJECTS is not given separately.
        #[arg(long = "releases", required = true, num_args = 1..)]
        releases: Vec<PathBuf>,
        /// Live objects as `kubectl get -o json` prints them (one object or a List).
        objects: Vec<PathBuf>,
        /// The API server's OpenAPI v2 document (`kubectl get --raw /openapi/v2`).
        #[arg(long)]
        openapi: Option<PathBuf>,
        /// Without --openapi: the embedded schema of this Kubernetes version's built-in kinds
        /// (1.20, 1.28, 1.34, 1.36; another minor reads as the nearest older one). What Helm owns
        /// differs between versions (a Service's selector is atomic on 1.28 and later).
        #[arg(long, value_parser = kube_version, default_value = KubeVersion::NEWEST.as_str())]
        kube_version: KubeVersion,
        /// Helm's field manager (default: the Apply entry that owns Helm's release annotation).
        #[arg(long)]
        manager: Option<String>,
    },
    /// The kubectl plugin, `kubectl locker status|why|diff` (the same as running this binary
    /// under the name kubectl-locker: ln -s $(which helm-locker) /usr/local/bin/kubectl-locker).
    ///
    /// Read-only, with your kubeconfig like kubectl (--kubeconfig, --context, -n, -A).
    Kubectl(crate::plugin::PluginArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address of the webhook (HTTPS) port.
    #[arg(long, env = "HELM_LOCKER_ADDR", default_value = "0.0.0.0:8443")]
    addr: std::net::SocketAddr,
    /// Address of the admin port (plain HTTP: /healthz, /readyz, /metrics).
    #[arg(long, env = "HELM_LOCKER_ADMIN_ADDR", default_value = "0.0.0.0:8080")]
    admin_addr: std::net::SocketAddr,
    /// Serving certificate (PEM); re-read when the file changes.
    #[arg(
        long,
        env = "HELM_LOCKER_TLS_CERT",
        requires = "tls_key",
        conflicts_with = "self_signed"
    )]
    tls_cert: Option<PathBuf>,
    /// Private key of the serving certificate (PEM).
    #[arg(long, env = "HELM_LOCKER_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Generate a CA and serving certificate at start (for local runs).
    #[arg(long, env = "HELM_LOCKER_SELF_SIGNED")]
    self_signed: bool,
    /// Names of the self-signed certificate (DNS names or IPs).
    #[arg(long = "self-signed-name", env = "HELM_LOCKER_SELF_SIGNED_NAMES", value_delimiter = ',', default_values_t = ["localhost".to_string(), "127.0.0.1".to_string()])]
    self_signed_names: Vec<String>,
    /// Where --self-signed and --self-managed-secret write ca.crt, tls.crt and tls.key.
    #[arg(
        long,
        env = "HELM_LOCKER_SELF_SIGNED_DIR",
        default_value = "helm-locker-certs"
    )]
    self_signed_dir: PathBuf,
    /// Require client certificates signed by this CA (the API server's).
    #[arg(long, env = "HELM_LOCKER_CLIENT_CA")]
    client_ca: Option<PathBuf>,
    /// Read release Secrets from this folder instead of the API server (re-read on change).
    #[arg(long, env = "HELM_LOCKER_RELEASES_DIR")]
    releases_dir: Option<PathBuf>,
    /// Lock policy file (YAML): mode, releases, exempt, ignore, namespaces, excludeNamespaces,
    /// releaseSelector. Flags below add to it.
    #[arg(long, env = "HELM_LOCKER_CONFIG")]
    config: Option<PathBuf>,
    /// Default mode: deny, warn, repair or off.
    #[arg(long, env = "HELM_LOCKER_MODE", value_parser = mode_parser())]
    mode: Option<Mode>,
    /// A ConfigMap in the locker's own namespace (--lease-namespace) whose `mode` (deny, warn,
    /// repair, off: the default mode, over --mode) and `revert` (false pauses the reverter, true
    /// resumes it) act on the running server within a second, ready or not, with no restart.
    /// The chart creates `<fullname>-switches` from its `mode` and `revert.enabled` values. A
    /// missing ConfigMap leaves the flags in force.
    #[arg(long, env = "HELM_LOCKER_SWITCHES_CONFIGMAP", value_name = "NAME")]
    switches_configmap: Option<String>,
    /// Lock (and watch) only releases in these namespaces.
    #[arg(
        long = "namespace",
        env = "HELM_LOCKER_NAMESPACES",
        value_delimiter = ','
    )]
    namespaces: Vec<String>,
    /// Never lock releases in these namespaces.
    #[arg(
        long = "exclude-namespace",
        env = "HELM_LOCKER_EXCLUDE_NAMESPACES",
        value_delimiter = ','
    )]
    exclude_namespaces: Vec<String>,
    /// The Helm release helm-locker was installed from, as NAMESPACE/NAME (the chart sets it).
    /// It is never locked, reverted or re-created, so that deleting helm-locker's webhook
    /// configurations or scaling it to 0 stays done in an incident.
    #[arg(long, env = "HELM_LOCKER_OWN_RELEASE", value_parser = release_key, value_name = "NAMESPACE/NAME")]
    own_release: Option<crate::core::ReleaseKey>,
    /// Lock only releases whose Secret labels match (k=v,k!=v,k,!k).
    #[arg(long, env = "HELM_LOCKER_RELEASE_SELECTOR")]
    release_selector: Option<crate::core::LabelSelector>,
    /// Users whose writes are never blocked (in addition to the control plane's).
    #[arg(
        long = "exempt-user",
        env = "HELM_LOCKER_EXEMPT_USERS",
        value_delimiter = ','
    )]
    exempt_users: Vec<String>,
    /// Groups whose writes are never blocked.
    #[arg(
        long = "exempt-group",
        env = "HELM_LOCKER_EXEMPT_GROUPS",
        value_delimiter = ','
    )]
    exempt_groups: Vec<String>,
    /// Service accounts (namespace/name) whose writes are never blocked; helm-locker's own
    /// belongs here.
    #[arg(
        long = "exempt-service-account",
        env = "HELM_LOCKER_EXEMPT_SERVICE_ACCOUNTS",
        value_delimiter = ','
    )]
    exempt_service_accounts: Vec<String>,
    /// Lock only releases registered by a HelmRelease (helm.cattle.io/v1alpha1) in this
    /// namespace, and keep those HelmReleases' status current (rancher/helm-locker uses
    /// cattle-helm-system). Without it every deployed release is locked.
    #[arg(long, env = "HELM_LOCKER_REGISTRATION_NAMESPACE")]
    registration_namespace: Option<String>,
    /// Revert drift that got past the webhook (only the replica holding the Lease does).
    /// --revert=false writes no object of a release (the locker still writes its author key
    /// Secret, Events, and its certificate when self-managed).
    #[arg(long, env = "HELM_LOCKER_REVERT", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    revert: bool,
    /// Let the reverter create a locked object that was deleted, when it saw the object carry
    /// the release's meta.helm.sh annotations before it went, or a HelmRelease in the
    /// registration namespace vouches for the release. Others are only reported (a Warning
    /// Event on the release Secret, helm_locker_missing_objects) and left to helm upgrade.
    /// --recreate=false reports every deleted object and needs no create permission.
    #[arg(long, env = "HELM_LOCKER_RECREATE", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    recreate: bool,
    /// Honour LockExceptions (helm-locker.io/v1alpha1, `helm-locker crd --lock-exception`):
    /// time-boxed, audited openings of a release of the exception's own namespace to named
    /// users or groups. Needs the CRD installed and list/watch on lockexceptions.
    #[arg(long, env = "HELM_LOCKER_LOCK_EXCEPTIONS", default_value_t = false, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    lock_exceptions: bool,
    /// The longest a LockException stays open from its creation, whatever its `until` says
    /// (30m, 4h, 1d).
    #[arg(long, env = "HELM_LOCKER_EXCEPTION_MAX_DURATION", default_value = "1d", value_parser = duration)]
    exception_max_duration: std::time::Duration,
    /// A LockException also ends when its release's next revision is deployed (a successful
    /// helm upgrade or rollback), whatever its `until`.
    #[arg(long, env = "HELM_LOCKER_EXCEPTIONS_END_ON_UPGRADE", default_value_t = false, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    exceptions_end_on_upgrade: bool,
    /// A namespace where only controllers the admin runs write release Secrets (Flux's
    /// `flux-system`; repeat the flag, or separate with commas). A release stored in one
    /// namespace whose objects are in another (a Flux HelmRelease with `targetNamespace`) is
    /// locked only when the author stamped on its Secret may create Secrets in the release's
    /// namespace; in a trusted namespace, a revision without a known author (written before
    /// helm-locker, or while its author webhook was away) counts too. A known author without
    /// that right never counts.
    #[arg(
        long,
        env = "HELM_LOCKER_TRUSTED_STORAGE_NAMESPACE",
        value_delimiter = ',',
        value_name = "NAMESPACE"
    )]
    trusted_storage_namespace: Vec<String>,
    /// Where Helm keeps releases, as its storage drivers (HELM_DRIVER) do: `secret` (Helm's
    /// default) and `configmap` (HELM_DRIVER=configmap, k3s's helm-controller with
    /// spec.driver: configmap), comma-separated. Each is one list and one watch per namespace
    /// scope, of `owner=helm` objects of that kind; needs get, list and watch on it. Helm's
    /// SQL driver writes to a database, never through the API server: not seen.
    #[arg(
        long,
        env = "HELM_LOCKER_RELEASE_DRIVERS",
        value_delimiter = ',',
        value_parser = release_driver,
        default_value = "secret,configmap",
        value_name = "DRIVER"
    )]
    release_drivers: Vec<crate::core::ReleaseDriver>,
    /// How a release watch reads what is stored when it starts, and again after the watch
    /// expires: `list` (one paged list, then a watch; every server), `stream` (a watch that
    /// streams the stored objects first, sendInitialEvents: the API server's WatchList
    /// feature), or `auto`: stream from Kubernetes 1.34 (WatchList on by default), list
    /// before, and list if the server refuses the stream (the feature gate off, or an etcd
    /// before 3.4.31 and 3.5.13).
    #[arg(
        long,
        env = "HELM_LOCKER_INITIAL_LIST",
        value_enum,
        default_value = "auto",
        value_name = "MODE"
    )]
    initial_list: crate::source::initial_list::InitialList,
    /// With --releases-dir: the embedded schema of this Kubernetes version decides (1.20, 1.28,
    /// 1.34, 1.36). From the API server, its own /openapi/v2 does, and the server is not ready
    /// until it has read it.
    #[arg(long, env = "HELM_LOCKER_KUBE_VERSION", value_parser = kube_version, default_value = KubeVersion::NEWEST.as_str())]
    kube_version: KubeVersion,
    /// Record every denial, warning and repair as a Warning Event on the object (who, which
    /// paths), at most one per object, reason and user every 30 s; dry runs are not recorded.
    /// Needs create and patch on events.
    #[arg(long, env = "HELM_LOCKER_EVENTS", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    events: bool,
    /// Namespace of the leader-election Lease (default: the pod's namespace, else default).
    #[arg(long, env = "HELM_LOCKER_LEASE_NAMESPACE")]
    lease_namespace: Option<String>,
    /// The Secret (in the lease namespace) that holds the key of the author stamp: every
    /// release Secret write is stamped with who made it (POST /stamp), and the reverter writes
    /// from a revision only what its author could (docs/security.md). Created when missing
    /// (needs get and create on that Secret).
    #[arg(
        long,
        env = "HELM_LOCKER_AUTHOR_KEY_SECRET",
        default_value = "helm-locker-author-key"
    )]
    author_key_secret: String,
    /// Name of the leader-election Lease.
    #[arg(long, env = "HELM_LOCKER_LEASE_NAME", default_value = "helm-locker")]
    lease_name: String,
    /// How long a Lease not renewed stays with its holder (15s, 1m; a bare number is seconds).
    #[arg(long, env = "HELM_LOCKER_LEASE_DURATION", default_value = "15s", value_parser = duration)]
    lease_duration: std::time::Duration,
    /// This replica's name in the Lease and in Events (default: the host name, i.e. the pod).
    #[arg(long, env = "HELM_LOCKER_IDENTITY")]
    identity: Option<String>,
    /// Largest accepted request body, in bytes.
    #[arg(long, env = "HELM_LOCKER_MAX_BODY_BYTES", default_value_t = 4 * 1024 * 1024)]
    max_body_bytes: usize,
    /// Largest release, in bytes once decompressed: a release Secret whose payload is larger is
    /// not decompressed past it, and is skipped (no revision: it opens and locks nothing) and
    /// reported (a log line, helm_locker_releases_too_large_total, a ReleaseTooLarge Warning
    /// Event on the Secret). Helm stores a release in one Secret of at most 1 MiB; real
    /// releases decompress to a few MiB at most.
    #[arg(long, env = "HELM_LOCKER_MAX_RELEASE_BYTES", default_value_t = crate::core::DEFAULT_MAX_RELEASE_BYTES,
          value_parser = clap::value_parser!(u64).range(1024..))]
    max_release_bytes: u64,
    /// Time allowed to send request headers and body (10s, 500ms; a bare number is seconds). On
    /// the webhook port, an HTTP/1.1 connection that begins no request in a whole read timeout
    /// (idle, or its headers arriving too slowly) is closed after one to two of them.
    #[arg(long, env = "HELM_LOCKER_READ_TIMEOUT", default_value = "10s", value_parser = duration)]
    read_timeout: std::time::Duration,
    /// Time allowed for the fresh read of a release before a deny (2s; a bare number is seconds).
    #[arg(long, env = "HELM_LOCKER_CONFIRM_TIMEOUT", default_value = "2s", value_parser = duration)]
    confirm_timeout: std::time::Duration,
    /// How long in-flight requests may take to finish after SIGTERM (25s; a bare number is seconds).
    #[arg(long, env = "HELM_LOCKER_SHUTDOWN_GRACE", default_value = "25s", value_parser = duration)]
    shutdown_grace: std::time::Duration,
    /// After SIGTERM, how long to go on serving while not ready, so that the Service stops
    /// routing here before the listener closes (5s; 0 outside Kubernetes). A second SIGTERM or
    /// Ctrl-C ends the wait.
    #[arg(long, env = "HELM_LOCKER_SHUTDOWN_DELAY", default_value = "5s", value_parser = duration)]
    shutdown_delay: std::time::Duration,
    /// How often --releases-dir is checked for changes (1s, 250ms; a bare number is seconds).
    #[arg(long, env = "HELM_LOCKER_POLL_INTERVAL", default_value = "1s", value_parser = duration)]
    poll_interval: std::time::Duration,
    /// Log format.
    #[arg(long, env = "HELM_LOCKER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Log filter (tracing EnvFilter syntax), e.g. info or helm_locker=debug. rustls is kept
    /// at error by default: clients that send an IP address as SNI would log a warning each.
    #[arg(long, env = "HELM_LOCKER_LOG", default_value = "info,rustls=error")]
    log: String,
    #[command(flatten)]
    self_managed: SelfManagedArgs,
}

/// `--own-release`: NAMESPACE/NAME of a release.
fn release_key(text: &str) -> Result<crate::core::ReleaseKey, String> {
    match text.split_once('/') {
        Some((namespace, name))
            if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
        {
            Ok(crate::core::ReleaseKey::new(namespace, name))
        }
        _ => Err(format!("{text:?} is not NAMESPACE/NAME")),
    }
}

/// `--mode`: one of the core's modes, listed in `--help`.
fn mode_parser() -> impl clap::builder::TypedValueParser<Value = Mode> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Mode::ALL.map(Mode::as_str))
        .try_map(|s| s.parse::<Mode>())
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Text,
    Json,
}

#[cfg(unix)]
#[allow(unsafe_code)]
fn restore_default_sigpipe() {
    // SAFETY: called at the start of main, before any thread exists; SIG_DFL is a valid handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn restore_default_sigpipe() {}

/// The whole program: parses the command line and runs the command; `main.rs` only calls this.
pub fn main() -> ExitCode {
    // The one-shot commands print to standard output: `helm-locker inspect | head` should end
    // quietly when `head` closes the pipe, as Unix tools do, not panic in `println!`. `serve`
    // keeps Rust's default (SIGPIPE ignored: a closed socket is an error to handle, never a kill).
    if std::env::args().nth(1).as_deref() != Some("serve") {
        restore_default_sigpipe();
    }
    // Installed as a kubectl plugin: `kubectl locker ...` runs `kubectl-locker ...`.
    let program = std::env::args_os().next().map(PathBuf::from);
    if program
        .as_deref()
        .and_then(std::path::Path::file_name)
        .is_some_and(|name| name == "kubectl-locker")
    {
        return crate::plugin::main_as_kubectl();
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Kubectl(args) => return crate::plugin::run(args),
        Command::Serve(args) => run_serve(*args),
        Command::Inspect { paths, output } => run_inspect(&paths, output),
        Command::Crd { lock_exception } => {
            if lock_exception {
                print!("{}", crate::lock_exception::crd_yaml());
            } else {
                print!("{}", crate::crd::crd_yaml());
            }
            Ok(())
        }
        Command::Review {
            mut releases,
            review,
            config,
            mode,
            revert,
            own_release,
            explain,
            openapi,
            kube_version,
            crds,
        } => {
            // `review --releases A B REVIEW.json`: the greedy list holds the review last.
            match review.or_else(|| {
                if releases.len() > 1 {
                    releases.pop()
                } else {
                    None
                }
            }) {
                Some(review) => review_config(config.as_deref(), mode, revert, own_release)
                    .and_then(|config| {
                        run_review(
                            &releases,
                            &review,
                            config,
                            explain,
                            (openapi.as_deref(), kube_version),
                            &crds,
                        )
                    }),
                None => Err("give the AdmissionReview file after the release paths".into()),
            }
        }
        Command::OwnedFields {
            mut releases,
            mut objects,
            openapi,
            kube_version,
            manager,
        } => {
            // `owned-fields --releases A B LIVE.json`: the greedy list holds the objects last.
            if objects.is_empty() && releases.len() > 1 {
                objects.extend(releases.pop());
            }
            let checked = if objects.is_empty() {
                Err("give the live objects' file after the release paths".to_string())
            } else {
                run_owned_fields(
                    &releases,
                    &objects,
                    (openapi.as_deref(), kube_version),
                    manager.as_deref(),
                )
            };
            match checked {
                Ok(true) => Ok(()),
                Ok(false) => return ExitCode::from(1),
                Err(e) => Err(e),
            }
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("helm-locker: {message}");
            ExitCode::from(2)
        }
    }
}

fn load_index(paths: &[PathBuf]) -> Result<Index, String> {
    let loaded = files::load(paths);
    for problem in &loaded.problems {
        eprintln!("helm-locker: skipped {problem}");
    }
    if loaded.secrets.is_empty() && !loaded.problems.is_empty() {
        return Err("no release Secret could be read".into());
    }
    Ok(Index::from_secrets(loaded.secrets))
}

/// CustomResourceDefinitions from YAML or JSON files: documents, Lists, anything else skipped.
/// The CustomResourceDefinitions in files and folders (`.yaml`, `.yml`, `.json`, every level).
fn read_crds(paths: &[PathBuf]) -> Result<Vec<serde_json::Value>, String> {
    let mut out = Vec::new();
    let mut pending: Vec<PathBuf> = paths.to_vec();
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            let entries =
                std::fs::read_dir(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            for entry in entries {
                let entry = entry
                    .map_err(|e| format!("{}: {e}", path.display()))?
                    .path();
                let named = entry
                    .extension()
                    .is_some_and(|e| e == "yaml" || e == "yml" || e == "json");
                if entry.is_dir() || named {
                    pending.push(entry);
                }
            }
            continue;
        }
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        out.extend(crds_in(&text).map_err(|e| format!("{}: {e}", path.display()))?);
    }
    Ok(out)
}

/// The CustomResourceDefinitions of a YAML or JSON text (several documents, or a List).
fn crds_in(text: &str) -> Result<Vec<serde_json::Value>, String> {
    let mut pending: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(text).map_err(|e| format!("not YAML or JSON: {e}"))?;
    let mut out = Vec::new();
    while let Some(document) = pending.pop() {
        match document.get("kind").and_then(|k| k.as_str()) {
            Some("List") => pending.extend(
                document
                    .get("items")
                    .and_then(|i| i.as_array())
                    .cloned()
                    .unwrap_or_default(),
            ),
            Some("CustomResourceDefinition") => out.push(document),
            _ => {}
        }
    }
    Ok(out)
}

/// Which schema an offline command reads: the given `/openapi/v2`, else a version's embedded
/// one. Said on standard error, as the answers depend on it.
type SchemaChoice<'a> = (Option<&'a std::path::Path>, KubeVersion);

fn load_schema(choice: SchemaChoice<'_>) -> Result<Arc<Schema>, String> {
    let (openapi, version) = choice;
    match openapi {
        None => {
            eprintln!("helm-locker: the embedded schema of Kubernetes {version} (--kube-version, --openapi)");
            Ok(Schema::embedded(version))
        }
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            Schema::from_openapi_v2(&bytes)
                .map(Arc::new)
                .map_err(|e| format!("{}: {e}", path.display()))
        }
    }
}

/// `owned-fields`: true when every object's ownership matches Helm's managedFields entry.
fn run_owned_fields(
    releases: &[PathBuf],
    objects: &[PathBuf],
    openapi: SchemaChoice<'_>,
    manager: Option<&str>,
) -> Result<bool, String> {
    use crate::core::{applied_object, attribution_of, helm_fields, owned_fields};
    let index = load_index(releases)?;
    let schema = load_schema(openapi)?;
    let mut all_match = true;
    for path in objects {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let items = match value.get("items").and_then(|i| i.as_array()) {
            Some(items) => items.clone(),
            None => vec![value],
        };
        for live in &items {
            let field = |p: &str| live.pointer(p).and_then(|v| v.as_str()).unwrap_or_default();
            let (api_version, kind, name) = (
                field("/apiVersion"),
                field("/kind"),
                field("/metadata/name"),
            );
            let namespace = live.pointer("/metadata/namespace").and_then(|v| v.as_str());
            let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
            let Some(object) = index.owned(group, kind, namespace, name, || {
                crate::core::live_owner(live)
            }) else {
                println!(
                    "{}",
                    serde_json::json!({"object": format!("{kind} {name}"), "error": "no release locks this object"})
                );
                all_match = false;
                continue;
            };
            let Some((helm_manager, fields)) = helm_fields(live, manager) else {
                println!(
                    "{}",
                    serde_json::json!({"object": object.describe(), "error": "no Apply entry of Helm in managedFields"})
                );
                all_match = false;
                continue;
            };
            let release = &object.release;
            let applied = applied_object(&object.content(), (&release.name, &release.namespace));
            let root = schema.root_or_deduced(&object.api_version(), &object.kind);
            let owned = owned_fields(&schema, root, &applied).len();
            let found = attribution_of(&schema, root, &applied, helm_manager, fields);
            all_match &= found.matches();
            println!(
                "{}",
                serde_json::json!({"object": object.describe(), "manager": helm_manager,
                    "owned": owned, "missing": found.missing, "extra": found.extra,
                    "empty": found.empty})
            );
        }
    }
    Ok(all_match)
}

fn run_inspect(paths: &[PathBuf], output: Output) -> Result<(), String> {
    let index = load_index(paths)?;
    let charts = inspected_charts(paths, &index);
    match output {
        Output::Text => print!("{}", inspect_text(&index, &charts)),
        Output::Json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&inspect(&index, &charts))
                    .map_err(|e| e.to_string())?
            )
        }
    }
    Ok(())
}

/// The chart files of each release's newest revision, from the same files (not standard input,
/// which was read once already).
fn inspected_charts(paths: &[PathBuf], index: &crate::core::Index) -> ChartsByRevision {
    // Every Secret's data, read once by name; decoded only for the revisions listed.
    let mut by_name = std::collections::HashMap::new();
    for file in files::release_files(paths).unwrap_or_default() {
        if file.as_os_str() == "-" {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for entry in crate::core::release_data(&text) {
            if let Some(secret) = entry.secret {
                by_name.insert((secret.namespace, secret.name), entry.data);
            }
        }
    }
    let mut charts = ChartsByRevision::new();
    for state in index.releases() {
        let Some(revision) = state.newest().map(|r| r.revision) else {
            continue;
        };
        let name = format!("sh.helm.release.v1.{}.v{revision}", state.key.name);
        let data = by_name
            .get(&(state.key.namespace.clone(), name.clone()))
            .or_else(|| by_name.get(&(String::new(), name)));
        if let Some(files) = data.and_then(|d| crate::core::decode_chart_files(d).ok()) {
            charts.insert((state.key.clone(), revision), files);
        }
    }
    charts
}

/// The configuration `review` decides with: the file, then the flags, as `serve` builds its own
/// from the same file and flags ([`serve_settings`]), so both decide alike.
fn review_config(
    path: Option<&std::path::Path>,
    mode: Option<Mode>,
    revert: bool,
    own_release: Option<crate::core::ReleaseKey>,
) -> Result<Config, String> {
    let mut config =
        crate::config_file::load(path).map_err(|e| crate::error_chain::with_causes(&e))?;
    if let Some(mode) = mode {
        config.mode = mode;
    }
    config.ownership_returned = revert;
    config.own_release = own_release;
    validate_config(&config)?;
    Ok(config)
}

fn run_review(
    releases: &[PathBuf],
    review: &PathBuf,
    config: Config,
    explain: bool,
    (openapi, version): SchemaChoice<'_>,
    crd_files: &[PathBuf],
) -> Result<(), String> {
    let index = load_index(releases)?;
    let body = if review.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(review)
    }
    .map_err(|e| format!("{}: {e}", review.display()))?;
    let parsed = parse_review(body.as_bytes()).map_err(|e| format!("{}: {e}", review.display()))?;
    // The CRDs given, those the releases render, and those of their charts' `crds/` folders.
    let mut crds = read_crds(crd_files)?;
    for state in index.releases() {
        for object in state.objects.iter().flatten() {
            if object.group.as_ref() == "apiextensions.k8s.io"
                && object.kind.as_ref() == "CustomResourceDefinition"
            {
                crds.push(object.content().to_json());
            }
        }
    }
    for files in inspected_charts(releases, &index).values() {
        for text in &files.crds {
            // A chart's file that is not YAML stops nothing: the API server would refuse it.
            crds.extend(crds_in(text).unwrap_or_default());
        }
    }
    let schema = match openapi {
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            Schema::from_openapi_v2(&bytes).map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => {
            eprintln!("helm-locker: the embedded schema of Kubernetes {version} (--kube-version, --openapi)");
            Schema::snapshot(version).map_err(|e| e.to_string())?
        }
    }
    .with_crds(crds.iter());
    let mut decision = decide(&index, &schema, &config, &parsed.request)
        .map_err(|e| format!("{}: {e}", review.display()))?;
    // As the server does: the message says where the chart sets the fields.
    add_offline_advice(releases, &mut decision);
    let response = render_response(&parsed.api_version, &parsed.request.uid, decision.verdict());
    println!("{}", String::from_utf8_lossy(&response));
    if explain {
        eprintln!("{}", decision.explain());
    }
    Ok(())
}

/// For `review`: where the chart sets the denied fields, read from the chart stored in the
/// release files given (the server reads it from the release Secret).
fn add_offline_advice(releases: &[PathBuf], decision: &mut crate::core::Decision) {
    let Some(locked) = decision.traceable() else {
        return;
    };
    let files = files::release_files(releases).ok().and_then(|found| {
        found.iter().find_map(|file| {
            let text = std::fs::read_to_string(file).ok()?;
            crate::core::find_chart_files(&text, &locked.release, locked.revision)
        })
    });
    if let Some(files) = files {
        locked.add_chart_advice(&files);
    }
}

/// A duration flag: `15s`, `500ms`, `1m 30s`, or a bare number of seconds (`2.5`).
fn release_driver(text: &str) -> Result<crate::core::ReleaseDriver, String> {
    crate::core::ReleaseDriver::parse(text)
        .ok_or_else(|| format!("{text:?} is not a driver helm-locker reads: secret or configmap"))
}

fn kube_version(text: &str) -> Result<KubeVersion, String> {
    KubeVersion::parse(text).ok_or_else(|| {
        format!("{text:?} is not a Kubernetes version from 1.20 on (1.20, 1.28, 1.34, 1.36 are embedded)")
    })
}

fn duration(text: &str) -> Result<std::time::Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(seconds) => std::time::Duration::try_from_secs_f64(seconds)
            .map_err(|_| format!("{text:?} is not a non-negative number of seconds")),
        Err(_) => humantime::parse_duration(text.trim())
            .map_err(|e| format!("{text:?} is not a duration such as 15s or 500ms: {e}")),
    }
}

fn run_serve(args: ServeArgs) -> Result<(), String> {
    use crate::server::BoundServer;
    let filter =
        tracing_subscriber::EnvFilter::try_new(&args.log).map_err(|e| format!("--log: {e}"))?;
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    let format = args.log_format;
    let settings = serve_settings(args)?;
    match format {
        LogFormat::Text => subscriber.init(),
        LogFormat::Json => subscriber.json().flatten_event(true).init(),
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let server = BoundServer::bind(settings)
            .await
            .map_err(|e| crate::error_chain::with_causes(&e))?;
        tracing::info!(addr = %server.addr, admin_addr = %server.admin_addr, "helm-locker serving");
        server
            .run(crate::server::shutdown_signal())
            .await
            .map_err(|e| crate::error_chain::with_causes(&e))
    })
}

/// The server's settings from its flags, environment and `--config` file (flags extend or
/// override the file).
fn serve_settings(args: ServeArgs) -> Result<crate::server::Settings, String> {
    use crate::server::{Certificate, ReleaseSource, Settings};
    let mut config = crate::config_file::load(args.config.as_deref())
        .map_err(|e| crate::error_chain::with_causes(&e))?;
    if let Some(mode) = args.mode {
        config.mode = mode;
    }
    config.namespaces.extend(args.namespaces);
    config.exclude_namespaces.extend(args.exclude_namespaces);
    if args.release_selector.is_some() {
        config.release_selector = args.release_selector;
    }
    config.exempt.users.extend(args.exempt_users);
    config.exempt.groups.extend(args.exempt_groups);
    config
        .exempt
        .service_accounts
        .extend(args.exempt_service_accounts);
    if args.registration_namespace.is_some() {
        config.registration_namespace = args.registration_namespace;
    }
    config.ownership_returned = args.revert;
    config.own_release = args.own_release;
    validate_config(&config)?;
    // Every decode of release data from here on stops at this size (bounded before decoded).
    crate::core::set_max_release_bytes(args.max_release_bytes);
    let lease_duration = args.lease_duration;
    if lease_duration < std::time::Duration::from_secs(1) {
        return Err("--lease-duration must be at least 1 second".into());
    }
    let own_namespace = args.lease_namespace.unwrap_or_else(|| {
        std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
            .map(|ns| ns.trim().to_string())
            .unwrap_or_else(|_| "default".into())
    });
    let author_key = crate::server::AuthorKeyPlace {
        namespace: own_namespace.clone(),
        name: args.author_key_secret,
    };
    let controller = crate::controller::ControllerSettings {
        revert: args.revert,
        recreate: args.recreate,
        lease_namespace: own_namespace,
        lease_name: args.lease_name,
        identity: args.identity.unwrap_or_else(|| {
            std::env::var("HOSTNAME")
                .ok()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| format!("helm-locker-{}", std::process::id()))
        }),
        lease_duration,
    };
    let managed = self_managed(args.self_managed, &args.self_signed_dir)?;
    let certificate = match (args.tls_cert, args.tls_key, args.self_signed) {
        _ if managed.is_some() => Certificate::SelfManaged(managed.expect("checked")),
        (Some(cert), Some(key), _) => Certificate::Files { cert, key },
        (None, None, true) => Certificate::SelfSigned {
            names: args.self_signed_names,
            dir: args.self_signed_dir,
        },
        _ => {
            return Err(
                "give --tls-cert and --tls-key, --self-signed, or --self-managed-secret".into(),
            )
        }
    };
    let source = match args.releases_dir {
        Some(dir) => ReleaseSource::Folder {
            dir,
            interval: args.poll_interval,
        },
        None => ReleaseSource::Kubernetes,
    };
    Ok(Settings {
        addr: args.addr,
        admin_addr: args.admin_addr,
        certificate,
        client_ca: args.client_ca,
        source,
        config,
        http: crate::server::state::HttpSettings {
            max_body_bytes: args.max_body_bytes,
            read_timeout: args.read_timeout,
            confirm_timeout: args.confirm_timeout,
        },
        shutdown_grace: args.shutdown_grace,
        shutdown_delay: args.shutdown_delay,
        controller: Some(controller),
        events: args.events,
        lock_exceptions: args.lock_exceptions.then_some(args.exception_max_duration),
        kube_version: args.kube_version,
        exceptions_end_on_upgrade: args.exceptions_end_on_upgrade,
        trusted_storage_namespaces: args.trusted_storage_namespace,
        release_drivers: {
            let mut drivers = args.release_drivers;
            drivers.sort();
            drivers.dedup();
            drivers
        },
        initial_list: args.initial_list,
        switches_configmap: args.switches_configmap,
        author_key,
    })
}

/// Self-managed certificate flags (`serve --self-managed-secret`).
#[derive(clap::Args)]
struct SelfManagedArgs {
    /// Keep the serving certificate in this kubernetes.io/tls Secret: created (CA and
    /// certificate) when absent, renewed 30 days before it expires; the PEMs are written to
    /// --self-signed-dir and served from there. Needs --self-managed-service.
    #[arg(long, env = "HELM_LOCKER_SELF_MANAGED_SECRET", requires = "self_managed_service", conflicts_with_all = ["tls_cert", "self_signed"])]
    self_managed_secret: Option<String>,
    /// Namespace of that Secret and of the webhook's Service (default: the pod's own).
    #[arg(long, env = "HELM_LOCKER_SELF_MANAGED_NAMESPACE")]
    self_managed_namespace: Option<String>,
    /// The webhook's Service: the certificate is valid for <service>.<namespace>.svc (and
    /// <service>, <service>.<namespace>, <service>.<namespace>.svc.cluster.local).
    #[arg(long, env = "HELM_LOCKER_SELF_MANAGED_SERVICE")]
    self_managed_service: Option<String>,
    /// More names (DNS names or IPs) for the self-managed certificate.
    #[arg(
        long = "self-managed-name",
        env = "HELM_LOCKER_SELF_MANAGED_NAMES",
        value_delimiter = ','
    )]
    self_managed_names: Vec<String>,
    /// Validating and/or Mutating webhook configurations whose caBundle the server keeps equal
    /// to its self-managed CA.
    #[arg(
        long = "webhook-configuration",
        env = "HELM_LOCKER_WEBHOOK_CONFIGURATIONS",
        value_delimiter = ',',
        requires = "self_managed_secret"
    )]
    webhook_configurations: Vec<String>,
}

fn self_managed(
    args: SelfManagedArgs,
    dir: &std::path::Path,
) -> Result<Option<crate::server::self_managed::SelfManaged>, String> {
    const POD_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
    let (Some(secret), Some(service)) = (args.self_managed_secret, args.self_managed_service)
    else {
        return Ok(None);
    };
    let namespace = match args.self_managed_namespace {
        Some(namespace) => namespace,
        None => std::fs::read_to_string(POD_NAMESPACE)
            .map(|s| s.trim().to_string())
            .map_err(|e| format!("give --self-managed-namespace ({POD_NAMESPACE}: {e})"))?,
    };
    let mut names = certs_gen::service_names(&service, &namespace);
    names.extend(args.self_managed_names);
    Ok(Some(crate::server::self_managed::SelfManaged {
        secret,
        namespace,
        names,
        webhook_configurations: args.webhook_configurations,
        dir: dir.to_path_buf(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn serve(args: &[&str]) -> Result<crate::server::Settings, String> {
        let cli = Cli::try_parse_from([&["helm-locker", "serve"], args].concat())
            .map_err(|e| e.to_string())?;
        match cli.command {
            Command::Serve(args) => serve_settings(*args),
            _ => unreachable!(),
        }
    }

    fn review(args: &[&str]) -> Result<Config, String> {
        let head = [
            "helm-locker",
            "review",
            "--releases",
            "releases.json",
            "review.json",
        ];
        let cli = Cli::try_parse_from([&head[..], args].concat()).map_err(|e| e.to_string())?;
        match cli.command {
            Command::Review {
                config,
                mode,
                revert,
                own_release,
                ..
            } => review_config(config.as_deref(), mode, revert, own_release),
            _ => unreachable!(),
        }
    }

    #[test]
    fn review_decides_with_the_configuration_serve_has_under_the_same_flags() {
        // The decision is one function of (index, configuration, schema, review): the same
        // configuration means the same answer for every review.
        for flags in [
            &[][..],
            &["--revert=false"],
            &["--mode", "warn"],
            &["--own-release", "helm-locker/helm-locker"],
            &["--mode", "repair", "--revert", "false"],
        ] {
            let served = serve(&[&["--self-signed"], flags].concat()).unwrap().config;
            assert_eq!(review(flags).unwrap(), served, "{flags:?}");
        }
        // By default, as the server runs: the reverter on, so a restore is allowed.
        assert!(review(&[]).unwrap().ownership_returned);
        assert!(review(&["--own-release", "nope"]).is_err());
    }

    #[test]
    fn durations_are_written_with_units_or_as_seconds() {
        assert_eq!(duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("2.5"), Ok(Duration::from_millis(2500)));
        assert!(duration("-1").unwrap_err().contains("non-negative"));
        assert!(duration("soon").unwrap_err().contains("such as 15s"));
    }

    #[test]
    fn serve_flags_become_settings() {
        let settings = serve(&[
            "--self-signed",
            "--releases-dir",
            "/tmp/releases",
            "--read-timeout",
            "750ms",
            "--lease-duration",
            "3",
            "--poll-interval",
            "250ms",
            "--mode",
            "warn",
            "--release-selector",
            "owner=helm,!skip",
            "--namespace",
            "a,b",
        ])
        .unwrap();
        assert_eq!(settings.http.read_timeout, Duration::from_millis(750));
        assert_eq!(settings.shutdown_grace, Duration::from_secs(25));
        assert_eq!(settings.config.mode, Mode::Warn);
        assert_eq!(settings.config.namespaces, ["a", "b"]);
        let labels = [("owner".to_string(), "helm".to_string())].into();
        assert!(settings.config.release_selector.unwrap().matches(&labels));
        assert_eq!(
            settings.controller.unwrap().lease_duration,
            Duration::from_secs(3)
        );
        assert!(matches!(
            settings.source,
            crate::server::ReleaseSource::Folder { interval, .. } if interval == Duration::from_millis(250)
        ));
    }

    #[test]
    fn bad_serve_flags_are_clear_errors() {
        let err = |args: &[&str]| serve(args).err().unwrap_or_default();
        assert!(err(&["--self-signed", "--mode", "maybe"]).contains("maybe"));
        assert!(err(&["--self-signed", "--release-selector", "a=b,=c"]).contains("label selector"));
        assert!(err(&["--self-signed", "--lease-duration", "500ms"]).contains("at least 1 second"));
        assert!(err(&[]).contains("--self-signed"));
        assert!(err(&["--self-signed", "--read-timeout", "soon"]).contains("such as 15s"));
    }
}
