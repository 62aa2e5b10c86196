//! The command line, as clap reads it (`helm-locker --help`): the commands, their flags and
//! environment variables, and the parsers of flag values. What each command does is elsewhere:
//! `serve` is wired in [`crate::app`], the offline commands are in [`crate::offline`], the
//! kubectl plugin in [`crate::plugin`].

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::core::{KubeVersion, Mode};

/// A flag's value that does not parse: clap prints it with the flag's name.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct InvalidValue(String);

/// Makes Helm the only way to change what Helm installed.
///
/// helm-locker is a Kubernetes admission webhook: it indexes the objects that deployed Helm
/// releases own (from their release Secrets) and denies writes to them from anyone but Helm.
#[derive(Parser)]
#[command(name = "helm-locker", version, about, long_about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
pub(crate) struct ServeArgs {
    /// Address of the webhook (HTTPS) port.
    #[arg(long, env = "HELM_LOCKER_ADDR", default_value = "0.0.0.0:8443")]
    pub(crate) addr: std::net::SocketAddr,
    /// Address of the admin port (plain HTTP: /healthz, /readyz, /metrics).
    #[arg(long, env = "HELM_LOCKER_ADMIN_ADDR", default_value = "0.0.0.0:8080")]
    pub(crate) admin_addr: std::net::SocketAddr,
    /// Serving certificate (PEM); re-read when the file changes.
    #[arg(
        long,
        env = "HELM_LOCKER_TLS_CERT",
        requires = "tls_key",
        conflicts_with = "self_signed"
    )]
    pub(crate) tls_cert: Option<PathBuf>,
    /// Private key of the serving certificate (PEM).
    #[arg(long, env = "HELM_LOCKER_TLS_KEY", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// Generate a CA and serving certificate at start (for local runs).
    #[arg(long, env = "HELM_LOCKER_SELF_SIGNED")]
    pub(crate) self_signed: bool,
    /// Names of the self-signed certificate (DNS names or IPs).
    #[arg(long = "self-signed-name", env = "HELM_LOCKER_SELF_SIGNED_NAMES", value_delimiter = ',', default_values_t = ["localhost".to_string(), "127.0.0.1".to_string()])]
    pub(crate) self_signed_names: Vec<String>,
    /// Where --self-signed and --self-managed-secret write ca.crt, tls.crt and tls.key.
    #[arg(
        long,
        env = "HELM_LOCKER_SELF_SIGNED_DIR",
        default_value = "helm-locker-certs"
    )]
    pub(crate) self_signed_dir: PathBuf,
    /// Require client certificates signed by this CA (the API server's).
    #[arg(long, env = "HELM_LOCKER_CLIENT_CA")]
    pub(crate) client_ca: Option<PathBuf>,
    /// Read release Secrets from this folder instead of the API server (re-read on change).
    #[arg(long, env = "HELM_LOCKER_RELEASES_DIR")]
    pub(crate) releases_dir: Option<PathBuf>,
    /// Lock policy file (YAML): mode, releases, exempt, ignore, namespaces, excludeNamespaces,
    /// releaseSelector. Flags below add to it.
    #[arg(long, env = "HELM_LOCKER_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// Default mode: deny, warn, repair or off.
    #[arg(long, env = "HELM_LOCKER_MODE", value_parser = mode_parser())]
    pub(crate) mode: Option<Mode>,
    /// A ConfigMap in the locker's own namespace (--lease-namespace) whose `mode` (deny, warn,
    /// repair, off: the default mode, over --mode) and `revert` (false pauses the reverter, true
    /// resumes it) act on the running server within a second, ready or not, with no restart.
    /// The chart creates `<fullname>-switches` from its `mode` and `revert.enabled` values. A
    /// missing ConfigMap leaves the flags in force.
    #[arg(long, env = "HELM_LOCKER_SWITCHES_CONFIGMAP", value_name = "NAME")]
    pub(crate) switches_configmap: Option<String>,
    /// A ConfigMap in the locker's own namespace (--lease-namespace) of writer rules, one per key
    /// `<id>.yaml` (docs/writer-rules.md), added to the --config file's `writers` within a
    /// second on every running replica, with no restart. The chart creates `<fullname>-writers`
    /// from its `writers` value. A key that is not a valid rule is logged, counted and skipped;
    /// the others load.
    #[arg(long, env = "HELM_LOCKER_WRITERS_CONFIGMAP", value_name = "NAME")]
    pub(crate) writers_configmap: Option<String>,
    /// Lock (and watch) only releases in these namespaces.
    #[arg(
        long = "namespace",
        env = "HELM_LOCKER_NAMESPACES",
        value_delimiter = ','
    )]
    pub(crate) namespaces: Vec<String>,
    /// Never lock releases in these namespaces.
    #[arg(
        long = "exclude-namespace",
        env = "HELM_LOCKER_EXCLUDE_NAMESPACES",
        value_delimiter = ','
    )]
    pub(crate) exclude_namespaces: Vec<String>,
    /// The Helm release helm-locker was installed from, as NAMESPACE/NAME (the chart sets it).
    /// It is never locked, reverted or re-created, so that deleting helm-locker's webhook
    /// configurations or scaling it to 0 stays done in an incident.
    #[arg(long, env = "HELM_LOCKER_OWN_RELEASE", value_parser = release_key, value_name = "NAMESPACE/NAME")]
    pub(crate) own_release: Option<crate::core::ReleaseKey>,
    /// Lock only releases whose Secret labels match (k=v,k!=v,k,!k).
    #[arg(long, env = "HELM_LOCKER_RELEASE_SELECTOR")]
    pub(crate) release_selector: Option<crate::core::LabelSelector>,
    /// Users whose writes are never blocked (in addition to the control plane's).
    #[arg(
        long = "exempt-user",
        env = "HELM_LOCKER_EXEMPT_USERS",
        value_delimiter = ','
    )]
    pub(crate) exempt_users: Vec<String>,
    /// Groups whose writes are never blocked.
    #[arg(
        long = "exempt-group",
        env = "HELM_LOCKER_EXEMPT_GROUPS",
        value_delimiter = ','
    )]
    pub(crate) exempt_groups: Vec<String>,
    /// Service accounts (namespace/name) whose writes are never blocked; helm-locker's own
    /// belongs here.
    #[arg(
        long = "exempt-service-account",
        env = "HELM_LOCKER_EXEMPT_SERVICE_ACCOUNTS",
        value_delimiter = ','
    )]
    pub(crate) exempt_service_accounts: Vec<String>,
    /// Lock only releases registered by a HelmRelease (helm.cattle.io/v1alpha1) in this
    /// namespace, and keep those HelmReleases' status current (rancher/helm-locker uses
    /// cattle-helm-system). Without it every deployed release is locked.
    #[arg(long, env = "HELM_LOCKER_REGISTRATION_NAMESPACE")]
    pub(crate) registration_namespace: Option<String>,
    /// Revert drift that got past the webhook (only the replica holding the Lease does).
    /// --revert=false writes no object of a release (the locker still writes its author key
    /// Secret, Events, and its certificate when self-managed).
    #[arg(long, env = "HELM_LOCKER_REVERT", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) revert: bool,
    /// Let the reverter create a locked object that was deleted, when it saw the object carry
    /// the release's meta.helm.sh annotations before it went, or a HelmRelease in the
    /// registration namespace vouches for the release. Others are only reported (a Warning
    /// Event on the release Secret, helm_locker_missing_objects) and left to helm upgrade.
    /// --recreate=false reports every deleted object and needs no create permission.
    #[arg(long, env = "HELM_LOCKER_RECREATE", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) recreate: bool,
    /// Honour LockExceptions (helm-locker.io/v1alpha1, `helm-locker crd --lock-exception`):
    /// time-boxed, audited openings of a release of the exception's own namespace to named
    /// users or groups. Needs the CRD installed and list/watch on lockexceptions.
    #[arg(long, env = "HELM_LOCKER_LOCK_EXCEPTIONS", default_value_t = false, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) lock_exceptions: bool,
    /// The longest a LockException stays open from its creation, whatever its `until` says
    /// (30m, 4h, 1d).
    #[arg(long, env = "HELM_LOCKER_EXCEPTION_MAX_DURATION", default_value = "1d", value_parser = duration)]
    pub(crate) exception_max_duration: std::time::Duration,
    /// A LockException also ends when its release's next revision is deployed (a successful
    /// helm upgrade or rollback), whatever its `until`.
    #[arg(long, env = "HELM_LOCKER_EXCEPTIONS_END_ON_UPGRADE", default_value_t = false, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) exceptions_end_on_upgrade: bool,
    /// A namespace where only controllers the admin runs write release objects, with the
    /// driver they use there: `flux-system` (Secrets: Helm's and Flux's helm-controller's
    /// storage), `flux-system/configmap` (release ConfigMaps, trusted only when named so);
    /// repeat the flag, or separate with commas. A release stored in one namespace whose
    /// objects are in another (a Flux HelmRelease with `targetNamespace`) is locked only when
    /// the author stamped on it may create that kind in the release's namespace; in a trusted
    /// storage namespace, a revision that was never stamped (written before helm-locker, or
    /// while its author webhook was away) counts too. A stamp that fails (does not verify,
    /// replayed, of an older helm-locker, a revision brought back) and a known author without
    /// the right never count. The variable's old singular name
    /// (HELM_LOCKER_TRUSTED_STORAGE_NAMESPACE) is read too; set both differently and serve
    /// refuses to start.
    #[arg(
        long,
        env = "HELM_LOCKER_TRUSTED_STORAGE_NAMESPACES",
        value_delimiter = ',',
        value_parser = trusted_storage,
        value_name = "NAMESPACE[/DRIVER]"
    )]
    pub(crate) trusted_storage_namespace: Vec<crate::core::TrustedStorage>,
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
    pub(crate) release_drivers: Vec<crate::core::ReleaseDriver>,
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
    pub(crate) initial_list: crate::source::initial_list::InitialList,
    /// With --releases-dir: the embedded schema of this Kubernetes version decides (1.20, 1.28,
    /// 1.34, 1.36). From the API server, its own /openapi/v2 does, and the server is not ready
    /// until it has read it.
    #[arg(long, env = "HELM_LOCKER_KUBE_VERSION", value_parser = kube_version, default_value = KubeVersion::NEWEST.as_str())]
    pub(crate) kube_version: KubeVersion,
    /// Record every denial, warning and repair as a Warning Event on the object (who, which
    /// paths), at most one per object, reason and user every 30 s; dry runs are not recorded.
    /// Needs create and patch on events.
    #[arg(long, env = "HELM_LOCKER_EVENTS", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) events: bool,
    /// Learn from would-be denials (warned writes, and denied ones; never a dry run): who
    /// wrote which locked path of which release's kind, how often, from a pod or not; never a
    /// value, nor a Secret's data keys. Every replica writes what it saw at most once a minute
    /// into one ConfigMap per namespace written to, in the locker's own namespace
    /// (--learned-configmap-prefix), which `kubectl locker learn` reads (docs/learning.md).
    /// Needs get, list, create and update on configmaps there. With --releases-dir (no cluster)
    /// it learns in memory only.
    #[arg(long, env = "HELM_LOCKER_LEARN", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) learn: bool,
    /// The learned ConfigMaps' name prefix: `<prefix><namespace>` for each namespace written to
    /// (the chart passes `<fullname>-learned-`).
    #[arg(
        long,
        env = "HELM_LOCKER_LEARNED_CONFIGMAP_PREFIX",
        default_value = "helm-locker-learned-",
        value_name = "PREFIX"
    )]
    pub(crate) learned_configmap_prefix: String,
    /// How often each replica writes what it learned into the learned ConfigMaps.
    #[arg(long, env = "HELM_LOCKER_LEARN_INTERVAL", default_value = "1m", value_parser = duration)]
    pub(crate) learn_interval: std::time::Duration,
    /// Namespace of the leader-election Lease (default: the pod's namespace, else default).
    #[arg(long, env = "HELM_LOCKER_LEASE_NAMESPACE")]
    pub(crate) lease_namespace: Option<String>,
    /// The Secret (in the lease namespace) that holds the key of the author stamp: every
    /// release Secret write is stamped with who made it (POST /stamp), and the reverter writes
    /// from a revision only what its author could (docs/security.md). Created when missing
    /// (needs get and create on that Secret).
    #[arg(
        long,
        env = "HELM_LOCKER_AUTHOR_KEY_SECRET",
        default_value = "helm-locker-author-key"
    )]
    pub(crate) author_key_secret: String,
    /// Name of the leader-election Lease.
    #[arg(long, env = "HELM_LOCKER_LEASE_NAME", default_value = "helm-locker")]
    pub(crate) lease_name: String,
    /// How long a Lease not renewed stays with its holder (15s, 1m; a bare number is seconds).
    #[arg(long, env = "HELM_LOCKER_LEASE_DURATION", default_value = "15s", value_parser = duration)]
    pub(crate) lease_duration: std::time::Duration,
    /// This replica's name in the Lease and in Events (default: the host name, i.e. the pod).
    #[arg(long, env = "HELM_LOCKER_IDENTITY")]
    pub(crate) identity: Option<String>,
    /// Largest accepted request body, in bytes.
    #[arg(long, env = "HELM_LOCKER_MAX_BODY_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub(crate) max_body_bytes: usize,
    /// Largest release, in bytes once decompressed: a release Secret whose payload is larger is
    /// not decompressed past it, and is skipped (no revision: it opens and locks nothing) and
    /// reported (a log line, helm_locker_releases_too_large_total, a ReleaseTooLarge Warning
    /// Event on the Secret). Helm stores a release in one Secret of at most 1 MiB; real
    /// releases decompress to a few MiB at most.
    #[arg(long, env = "HELM_LOCKER_MAX_RELEASE_BYTES", default_value_t = crate::core::DEFAULT_MAX_RELEASE_BYTES,
          value_parser = clap::value_parser!(u64).range(1024..))]
    pub(crate) max_release_bytes: u64,
    /// Most objects one release may render (its manifest's documents and its hooks, counted
    /// before any is parsed): a release Secret with more is skipped (no revision: it opens and
    /// locks nothing) and reported (a log line, helm_locker_releases_too_many_objects_total, a
    /// ReleaseTooLarge Warning Event on the Secret). The largest public charts render a few
    /// hundred objects; a List's items past it are not locked.
    #[arg(long, env = "HELM_LOCKER_MAX_RELEASE_OBJECTS", default_value_t = crate::core::DEFAULT_MAX_RELEASE_OBJECTS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_release_objects: u64,
    /// Most objects the index keeps of the releases stored in one namespace: a release whose
    /// newest revision would take its namespace past it is not indexed (it locks nothing, its
    /// objects are open) and reported (counted in helm_locker_releases_over_namespace_bound_total;
    /// a log line and a ReleaseTooLarge Warning Event on its Secret, at most ten a minute a
    /// namespace, the rest told in one line). The releases kept are the
    /// earliest-created (the API server's creationTimestamp of each one's earliest revision):
    /// a tenant's releases never push out one created before them. When a kept release leaves,
    /// a refused one that fits is read again and indexed.
    #[arg(long, env = "HELM_LOCKER_MAX_NAMESPACE_OBJECTS", default_value_t = crate::core::DEFAULT_MAX_NAMESPACE_OBJECTS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_namespace_objects: u64,
    /// Time allowed to send request headers and body (10s, 500ms; a bare number is seconds). On
    /// the webhook port, an HTTP/1.1 connection that begins no request in a whole read timeout
    /// (idle, or its headers arriving too slowly) is closed after one to two of them.
    #[arg(long, env = "HELM_LOCKER_READ_TIMEOUT", default_value = "10s", value_parser = duration)]
    pub(crate) read_timeout: std::time::Duration,
    /// Time allowed for the fresh read of a release before a deny (2s; a bare number is seconds).
    #[arg(long, env = "HELM_LOCKER_CONFIRM_TIMEOUT", default_value = "2s", value_parser = duration)]
    pub(crate) confirm_timeout: std::time::Duration,
    /// How long in-flight requests may take to finish after SIGTERM (25s; a bare number is seconds).
    #[arg(long, env = "HELM_LOCKER_SHUTDOWN_GRACE", default_value = "25s", value_parser = duration)]
    pub(crate) shutdown_grace: std::time::Duration,
    /// After SIGTERM, how long to go on serving while not ready, so that the Service stops
    /// routing here before the listener closes (5s; set 0 outside Kubernetes, where no Service
    /// routes here and the wait only delays the exit). A second SIGTERM or
    /// Ctrl-C ends the wait.
    #[arg(long, env = "HELM_LOCKER_SHUTDOWN_DELAY", default_value = "5s", value_parser = duration)]
    pub(crate) shutdown_delay: std::time::Duration,
    /// How often --releases-dir is checked for changes (1s, 250ms; a bare number is seconds).
    #[arg(long, env = "HELM_LOCKER_POLL_INTERVAL", default_value = "1s", value_parser = duration)]
    pub(crate) poll_interval: std::time::Duration,
    /// Log format.
    #[arg(long, env = "HELM_LOCKER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,
    /// Log filter (tracing EnvFilter syntax), e.g. info or helm_locker=debug. rustls is kept
    /// at error by default: clients that send an IP address as SNI would log a warning each.
    #[arg(long, env = "HELM_LOCKER_LOG", default_value = "info,rustls=error")]
    pub(crate) log: String,
    #[command(flatten)]
    pub(crate) self_managed: SelfManagedArgs,
}

/// `--own-release`: NAMESPACE/NAME of a release.
fn release_key(text: &str) -> Result<crate::core::ReleaseKey, InvalidValue> {
    match text.split_once('/') {
        Some((namespace, name))
            if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
        {
            Ok(crate::core::ReleaseKey::new(namespace, name))
        }
        _ => Err(InvalidValue(format!("{text:?} is not NAMESPACE/NAME"))),
    }
}

/// `--mode`: one of the core's modes, listed in `--help`.
fn mode_parser() -> impl clap::builder::TypedValueParser<Value = Mode> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Mode::ALL.map(Mode::as_str))
        .try_map(|s| s.parse::<Mode>())
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Output {
    Text,
    Json,
}

/// Self-managed certificate flags (`serve --self-managed-secret`).
#[derive(clap::Args)]
pub(crate) struct SelfManagedArgs {
    /// Keep the serving certificate in this kubernetes.io/tls Secret: created (CA and
    /// certificate) when absent, renewed 30 days before it expires; the PEMs are written to
    /// --self-signed-dir and served from there. Needs --self-managed-service.
    #[arg(long, env = "HELM_LOCKER_SELF_MANAGED_SECRET", requires = "self_managed_service", conflicts_with_all = ["tls_cert", "self_signed"])]
    pub(crate) self_managed_secret: Option<String>,
    /// Namespace of that Secret and of the webhook's Service (default: the pod's own).
    #[arg(long, env = "HELM_LOCKER_SELF_MANAGED_NAMESPACE")]
    pub(crate) self_managed_namespace: Option<String>,
    /// The webhook's Service: the certificate is valid for <service>.<namespace>.svc (and
    /// <service>, <service>.<namespace>, <service>.<namespace>.svc.cluster.local).
    #[arg(long, env = "HELM_LOCKER_SELF_MANAGED_SERVICE")]
    pub(crate) self_managed_service: Option<String>,
    /// More names (DNS names or IPs) for the self-managed certificate.
    #[arg(
        long = "self-managed-name",
        env = "HELM_LOCKER_SELF_MANAGED_NAMES",
        value_delimiter = ','
    )]
    pub(crate) self_managed_names: Vec<String>,
    /// Validating and/or Mutating webhook configurations whose caBundle the server keeps equal
    /// to its self-managed CA.
    #[arg(
        long = "webhook-configuration",
        env = "HELM_LOCKER_WEBHOOK_CONFIGURATIONS",
        value_delimiter = ',',
        requires = "self_managed_secret"
    )]
    pub(crate) webhook_configurations: Vec<String>,
}

/// `--release-drivers`: secret or configmap.
fn release_driver(text: &str) -> Result<crate::core::ReleaseDriver, InvalidValue> {
    crate::core::ReleaseDriver::parse(text).ok_or_else(|| {
        InvalidValue(format!(
            "{text:?} is not a driver helm-locker reads: secret or configmap"
        ))
    })
}

pub(crate) fn trusted_storage(text: &str) -> Result<crate::core::TrustedStorage, InvalidValue> {
    crate::core::TrustedStorage::parse(text).ok_or_else(|| {
        InvalidValue(format!(
            "{text:?} is not a trusted storage: a namespace, or namespace/secret or namespace/configmap"
        ))
    })
}

fn kube_version(text: &str) -> Result<KubeVersion, InvalidValue> {
    KubeVersion::parse(text).ok_or_else(|| {
        InvalidValue(format!("{text:?} is not a Kubernetes version from 1.20 on (1.20, 1.28, 1.34, 1.36 are embedded)"))
    })
}

/// A duration flag: `15s`, `500ms`, `1m 30s`, or a bare number of seconds (`2.5`).
fn duration(text: &str) -> Result<std::time::Duration, InvalidValue> {
    match text.trim().parse::<f64>() {
        Ok(seconds) => std::time::Duration::try_from_secs_f64(seconds)
            .map_err(|_| InvalidValue(format!("{text:?} is not a non-negative number of seconds"))),
        Err(_) => humantime::parse_duration(text.trim()).map_err(|e| {
            InvalidValue(format!(
                "{text:?} is not a duration such as 15s or 500ms: {e}"
            ))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn duration_of(text: &str) -> Result<Duration, String> {
        duration(text).map_err(|e| e.to_string())
    }

    #[test]
    fn durations_are_written_with_units_or_as_seconds() {
        assert_eq!(duration_of("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(duration_of("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration_of("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration_of("2.5"), Ok(Duration::from_millis(2500)));
        assert!(duration("-1")
            .unwrap_err()
            .to_string()
            .contains("non-negative"));
        assert!(duration("soon")
            .unwrap_err()
            .to_string()
            .contains("such as 15s"));
    }
}
