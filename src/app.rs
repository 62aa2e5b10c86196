//! The composition root: runs the command the command line names ([`crate::cli`]), and wires
//! `serve` from its flags: the server's settings, the controller's, the certificate. The
//! offline commands are in [`crate::offline`]. `main.rs` only calls [`main`].

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command, LogFormat, SelfManagedArgs, ServeArgs};
use crate::core::validate_config;
use crate::offline::{review_config, run_inspect, run_owned_fields, run_review, OfflineError};

/// Why `serve` could not start (exit status 2): a flag, the configuration, or what it binds.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    #[error("{0}")]
    Flags(String),
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Start(String),
}

/// What a command that stopped reports on standard error.
#[derive(Debug, thiserror::Error)]
enum CommandError {
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error(transparent)]
    Offline(#[from] OfflineError),
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
        Command::Serve(args) => run_serve(*args).map_err(CommandError::from),
        Command::Inspect { paths, output } => {
            run_inspect(&paths, output).map_err(CommandError::from)
        }
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
                None => Err(OfflineError::NoReview),
            }
            .map_err(CommandError::from)
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
                Err(OfflineError::NoObjects)
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
                Err(e) => Err(CommandError::from(e)),
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

fn run_serve(args: ServeArgs) -> Result<(), ServeError> {
    use crate::server::BoundServer;
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log)
        .map_err(|e| ServeError::Flags(format!("--log: {e}")))?;
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
        .map_err(|e| ServeError::Start(e.to_string()))?;
    runtime.block_on(async move {
        let server = BoundServer::bind(settings)
            .await
            .map_err(|e| ServeError::Start(crate::error_chain::with_causes(&e)))?;
        tracing::info!(addr = %server.addr, admin_addr = %server.admin_addr, "helm-locker serving");
        server
            .run(crate::server::shutdown_signal())
            .await
            .map_err(|e| ServeError::Start(crate::error_chain::with_causes(&e)))
    })
}

/// The server's settings from its flags, environment and `--config` file (flags extend or
/// override the file).
pub(crate) fn serve_settings(args: ServeArgs) -> Result<crate::server::Settings, ServeError> {
    use crate::server::{Certificate, ReleaseSource, Settings};
    let mut config = crate::config_file::load(args.config.as_deref())
        .map_err(|e| ServeError::Config(crate::error_chain::with_causes(&e)))?;
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
    validate_config(&config).map_err(ServeError::Config)?;
    // Every decode of release data from here on stops at this size (bounded before decoded).
    crate::core::set_max_release_bytes(args.max_release_bytes);
    // ... and at this many objects (bounded in objects before the index is built).
    crate::core::set_max_release_objects(args.max_release_objects);
    // ... and the index keeps at most this many objects of one namespace's releases.
    crate::core::set_max_namespace_objects(args.max_namespace_objects);
    let lease_duration = args.lease_duration;
    if lease_duration < std::time::Duration::from_secs(1) {
        return Err(ServeError::Flags(
            "--lease-duration must be at least 1 second".into(),
        ));
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
            return Err(ServeError::Flags(
                "give --tls-cert and --tls-key, --self-signed, or --self-managed-secret".into(),
            ))
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
        learned_configmap_prefix: args.learn.then_some(args.learned_configmap_prefix),
        learn_interval: args.learn_interval,
        lock_exceptions: args.lock_exceptions.then_some(args.exception_max_duration),
        kube_version: args.kube_version,
        exceptions_end_on_upgrade: args.exceptions_end_on_upgrade,
        trusted_storage_namespaces: trusted_storage(
            args.trusted_storage_namespace,
            std::env::var(OLD_TRUSTED_STORAGE_VARIABLE).ok().as_deref(),
        )?,
        release_drivers: {
            let mut drivers = args.release_drivers;
            drivers.sort();
            drivers.dedup();
            drivers
        },
        initial_list: args.initial_list,
        switches_configmap: args.switches_configmap,
        writers_configmap: args.writers_configmap,
        author_key,
    })
}

/// The trusted storage variable's name before it was plural, as the lists' variables are.
const OLD_TRUSTED_STORAGE_VARIABLE: &str = "HELM_LOCKER_TRUSTED_STORAGE_NAMESPACE";

/// The trusted storages: the flag's (or HELM_LOCKER_TRUSTED_STORAGE_NAMESPACES'), else the old
/// singular variable's (`old`), which was the only name read before; both, disagreeing, is an
/// error rather than one of them silently ignored.
fn trusted_storage(
    flag: Vec<crate::core::TrustedStorage>,
    old: Option<&str>,
) -> Result<Vec<crate::core::TrustedStorage>, ServeError> {
    let Some(old) = old.filter(|o| !o.trim().is_empty()) else {
        return Ok(flag);
    };
    let from_old = old
        .split(',')
        .map(|t| {
            crate::cli::trusted_storage(t.trim())
                .map_err(|e| ServeError::Flags(format!("{OLD_TRUSTED_STORAGE_VARIABLE}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if flag.is_empty() || flag == from_old {
        return Ok(from_old);
    }
    Err(ServeError::Flags(format!(
        "{OLD_TRUSTED_STORAGE_VARIABLE} (the old name) and --trusted-storage-namespace (HELM_LOCKER_TRUSTED_STORAGE_NAMESPACES) name different trusted storage namespaces; set only one"
    )))
}

fn self_managed(
    args: SelfManagedArgs,
    dir: &std::path::Path,
) -> Result<Option<crate::server::self_managed::SelfManaged>, ServeError> {
    const POD_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
    let (Some(secret), Some(service)) = (args.self_managed_secret, args.self_managed_service)
    else {
        return Ok(None);
    };
    let namespace = match args.self_managed_namespace {
        Some(namespace) => namespace,
        None => std::fs::read_to_string(POD_NAMESPACE)
            .map(|s| s.trim().to_string())
            .map_err(|e| {
                ServeError::Flags(format!(
                    "give --self-managed-namespace ({POD_NAMESPACE}: {e})"
                ))
            })?,
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
    use crate::core::{Config, Mode};
    use std::time::Duration;

    fn serve(args: &[&str]) -> Result<crate::server::Settings, String> {
        let cli = Cli::try_parse_from([&["helm-locker", "serve"], args].concat())
            .map_err(|e| e.to_string())?;
        match cli.command {
            Command::Serve(args) => serve_settings(*args).map_err(|e| e.to_string()),
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
            } => review_config(config.as_deref(), mode, revert, own_release)
                .map_err(|e| e.to_string()),
            _ => unreachable!(),
        }
    }

    #[test]
    fn trusted_storage_namespaces_come_from_the_flag_or_either_variable_name_never_silently_dropped(
    ) {
        let storage = |t: &str| crate::core::TrustedStorage::parse(t).unwrap();
        let parsed = |args: &[&str]| {
            let cli = Cli::try_parse_from([&["helm-locker", "serve"], args].concat()).unwrap();
            match cli.command {
                Command::Serve(args) => args.trusted_storage_namespace,
                _ => unreachable!(),
            }
        };
        assert_eq!(
            parsed(&[
                "--trusted-storage-namespace",
                "flux-system,flux-system/configmap"
            ]),
            vec![storage("flux-system"), storage("flux-system/configmap")]
        );
        assert!(Cli::try_parse_from([
            "helm-locker",
            "serve",
            "--trusted-storage-namespace",
            "flux-system/sql"
        ])
        .is_err());
        // The old singular variable alone still works; with the same list too; a different
        // list is an error, not one of them ignored.
        assert_eq!(
            trusted_storage(vec![], Some("flux-system, apps/configmap")).unwrap(),
            vec![storage("flux-system"), storage("apps/configmap")]
        );
        assert_eq!(
            trusted_storage(vec![storage("flux-system")], Some("flux-system")).unwrap(),
            vec![storage("flux-system")]
        );
        assert_eq!(
            trusted_storage(vec![storage("a")], None).unwrap(),
            vec![storage("a")]
        );
        assert!(trusted_storage(vec![storage("a")], Some("b")).is_err());
        assert!(trusted_storage(vec![], Some("Not/ok")).is_err());
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
