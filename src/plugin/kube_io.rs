//! The plugin's reads from the API server (and `unlock`'s and `vouch`'s writes): the client from the
//! kubeconfig, release Secrets into an [`Index`], discovery, the live objects, the schema.

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{pinned_kind, Discovery, Scope};
use kube::{Client, ResourceExt};
use serde::Serialize;

use super::{
    diff, status, vouch, why, Format, Live, LiveObjects, ObjectId, PluginArgs, PluginCommand,
};
use crate::core::{
    release_secret_from_parts, Index, LockedObject, ReleaseSecret, Schema, SecretRef,
};

const LABELS: &str = "owner=helm";
const FIELDS: &str = "type=helm.sh/release.v1";
/// Live objects read at once.
const CONCURRENT_READS: usize = 16;

/// Why a plugin command could not answer. Shown to the person with its causes.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PluginError {
    /// What the person asked cannot be answered as asked; the message says what to do.
    #[error("{0}")]
    Usage(String),
    /// The locker's own answer (a LockException it does not honour).
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Config(#[from] crate::config_file::ConfigFileError),
    #[error("{}: cannot use this kubeconfig", path.display())]
    Kubeconfig {
        path: std::path::PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("no usable Kubernetes configuration")]
    NoConfig(#[source] kube::config::InferConfigError),
    #[error("cannot make a Kubernetes client")]
    Client(#[source] kube::Error),
    #[error("cannot {what}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot write the report as JSON")]
    Output(#[source] serde_json::Error),
}

impl PluginError {
    pub(crate) fn api(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let what = what.into();
        move |source| Self::Api { what, source }
    }
}

/// `--own-release`, else the release the index shows to be the locker's own.
fn own_release(
    target: &super::Target,
    index: &crate::core::Index,
) -> Result<Option<crate::core::ReleaseKey>, PluginError> {
    match &target.own_release {
        Some(text) => match text.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() => {
                Ok(Some(crate::core::ReleaseKey::new(ns, name)))
            }
            _ => Err(PluginError::Usage(format!(
                "--own-release {text:?} is not NAMESPACE/NAME"
            ))),
        },
        None => Ok(super::declared_own_release(index)),
    }
}

pub(crate) async fn run(args: PluginArgs) -> Result<ExitCode, PluginError> {
    let target = &args.target;
    let mut config = crate::config_file::load(target.config.as_deref())?;
    if target.registration_namespace.is_some() {
        config.registration_namespace = target.registration_namespace.clone();
    }
    let registrations = config.registration_namespace.as_deref();
    let (client, default_namespace) = client(target).await?;
    let namespace = target.namespace.clone().unwrap_or(default_namespace);
    let scope = (!target.all_namespaces).then_some(namespace.as_str());
    match args.command {
        // `super::run` runs it on its own: never here.
        PluginCommand::Learn(_) => Err(PluginError::Usage(
            "kubectl locker learn is run by the plugin's run".into(),
        )),
        PluginCommand::Status => {
            let index = releases(&client, scope, None, registrations).await?;
            config.own_release = own_release(target, &index)?;
            let objects: Vec<_> = index
                .releases()
                .into_iter()
                .flat_map(|s| s.objects.iter().flatten().cloned())
                .collect();
            let (schema, live) = (schema(&client).await, fetch(&client, objects).await);
            let mut index = index;
            index.replace_exceptions(lock_exceptions(&client, scope).await);
            let mut report = status::status(
                &index,
                &config,
                &schema,
                &live,
                crate::lock_exception::now(),
            );
            status::add_notices(&mut report, &index, &reverter_events(&client, scope).await);
            let own = config.own_release.as_ref();
            let locker_namespace = own.map_or(super::writer_rules::DEFAULT_LOCKER_NAMESPACE, |k| {
                k.namespace.as_str()
            });
            let writers = format!(
                "{}-writers",
                super::writer_rules::fullname(own, &[]).unwrap_or_else(|| "helm-locker".into())
            );
            let rules = super::writer_rules::rules_in_force(
                &client,
                locker_namespace,
                &writers,
                target.config.as_deref(),
            )
            .await
            .map_err(PluginError::Usage)?;
            let mut rules = rules;
            rules.extend(super::writer_rules::helmrelease_rules(&client, registrations).await);
            status::add_writer_rules(&mut report, &rules, crate::lock_exception::now());
            print(target.output, &report, status::render_text)?;
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Diff { release } => {
            if release.is_some() && target.all_namespaces {
                return Err(PluginError::Usage(
                    "give a RELEASE with -n NAMESPACE, not -A".into(),
                ));
            }
            let index = releases(&client, scope, release.as_deref(), registrations).await?;
            config.own_release = own_release(target, &index)?;
            if let (Some(name), 0) = (&release, index.release_count()) {
                return Err(PluginError::Usage(format!(
                    "no Helm release {name} in namespace {namespace}"
                )));
            }
            let objects: Vec<_> = index
                .releases()
                .into_iter()
                .filter(|s| diff::compared(s).is_ok())
                .flat_map(|s| s.objects.iter().flatten().cloned())
                .collect();
            let (schema, live) = (schema(&client).await, fetch(&client, objects).await);
            let own = config.own_release.clone();
            super::writer_rules::with_configmap_rules(&client, own.as_ref(), &mut config).await;
            let report = with_stored_forms(&client, &index, &config, &schema, &live).await;
            print(target.output, &report, diff::render_text)?;
            Ok(ExitCode::from(report.exit_status()))
        }
        PluginCommand::Unlock {
            release,
            duration,
            reason,
            users,
            groups,
            objects,
            paths,
        } => {
            if users.is_empty() && groups.is_empty() {
                return Err(PluginError::Usage(
                    "name whom it opens the release to: --user or --group".into(),
                ));
            }
            let until = std::time::SystemTime::now() + duration;
            let spec = crate::lock_exception::LockExceptionSpec {
                release: release.clone(),
                until: humantime::format_rfc3339_seconds(until).to_string(),
                reason,
                users,
                groups,
                objects: objects.iter().map(|o| object_spec(o)).collect(),
                paths,
            };
            let mut lock_exception = crate::lock_exception::LockException::new("", spec);
            lock_exception.metadata.name = None;
            lock_exception.metadata.generate_name = Some(format!("unlock-{release}-"));
            // Checked as the locker will read it, before it is created.
            let probe = crate::lock_exception::LockException {
                metadata: kube::api::ObjectMeta {
                    name: Some("probe".into()),
                    namespace: Some(namespace.clone()),
                    ..Default::default()
                },
                spec: lock_exception.spec.clone(),
            };
            crate::lock_exception::exception(&probe, duration + std::time::Duration::from_secs(60))
                .map_err(PluginError::Usage)?;
            let api: Api<crate::lock_exception::LockException> =
                Api::namespaced(client.clone(), &namespace);
            let created = api
                .create(&kube::api::PostParams::default(), &lock_exception)
                .await
                .map_err(PluginError::api(format!(
                    "create the LockException in {namespace}"
                )))?;
            let created_name = created.metadata.name.clone().unwrap_or_default();
            let who = created
                .spec
                .users
                .iter()
                .cloned()
                .chain(created.spec.groups.iter().map(|g| format!("group {g}")))
                .collect::<Vec<_>>()
                .join(", ");
            println!(
                "lockexception.helm-locker.io/{created_name} created: release {namespace}/{release}, for {who}, asked until {} ({}).",
                created.spec.until,
                humantime::format_duration(duration),
            );
            // The end is the locker's to say: its --exception-max-duration may be shorter.
            match locker_answer(&client, &namespace, &created_name).await {
                Some((reason, note)) if reason == "LockExceptionOpen" => {
                    println!("{note}.");
                    Ok(ExitCode::SUCCESS)
                }
                Some((_, note)) => Err(PluginError::Refused(note)),
                None => {
                    println!(
                        "helm-locker has not confirmed it within {}s: it is open at most until then, and closes sooner if its --exception-max-duration after creation comes first (kubectl locker status shows when).",
                        ANSWER_WAIT.as_secs()
                    );
                    Ok(ExitCode::SUCCESS)
                }
            }
        }
        PluginCommand::Vouch {
            release,
            all,
            reason,
            include_known_authors,
            yes,
        } => {
            if release.is_none() && !all {
                return Err(PluginError::Usage(
                    "name a RELEASE (with -n NAMESPACE), or --all".into(),
                ));
            }
            if release.is_some() && target.all_namespaces {
                return Err(PluginError::Usage(
                    "give a RELEASE with -n NAMESPACE, not -A".into(),
                ));
            }
            let index = releases(&client, scope, release.as_deref(), None).await?;
            if let (Some(name), 0) = (&release, index.release_count()) {
                return Err(PluginError::Usage(format!(
                    "no Helm release {name} in namespace {namespace}"
                )));
            }
            let schema = schema(&client).await;
            let (mut unstamped, mut changed) = (0, 0);
            for state in index.releases() {
                let Some(newest) = state.newest() else {
                    continue;
                };
                let Some(candidate) = read_candidate(&client, &newest.secret).await? else {
                    eprintln!(
                        "kubectl-locker: release {} revision {}: its {} {} is gone, or no longer a revision: not vouched",
                        state.key,
                        newest.revision,
                        newest.secret.driver.kind(),
                        newest.secret
                    );
                    continue;
                };
                let claimed = vouch::claimed(&candidate.annotations);
                if let vouch::Eligible::KnownAuthor(author) =
                    vouch::eligible(&claimed, include_known_authors)
                {
                    println!("{}", vouch::skipped(&candidate, &author));
                    continue;
                }
                let one = Index::from_secrets([candidate.revision.clone()]);
                let objects: Vec<_> = one
                    .releases()
                    .into_iter()
                    .filter(|s| diff::compared(s).is_ok())
                    .flat_map(|s| s.objects.iter().flatten().cloned())
                    .collect();
                let live = fetch(&client, objects).await;
                let report = with_stored_forms(&client, &one, &config, &schema, &live).await;
                print!("{}", vouch::show(&candidate, Some(&report)));
                if !yes
                    && !ask(&format!(
                        "Vouch for release {} revision {}, adopting it with your rights? [y/N] ",
                        state.key, candidate.revision.release.revision
                    ))
                {
                    println!(
                        "not vouched: release {} revision {}",
                        state.key, candidate.revision.release.revision
                    );
                    continue;
                }
                match write_vouch(&client, &candidate, &reason).await? {
                    Vouched::Author(author) => println!(
                        "vouched: release {} revision {} ({}), author now {author}",
                        state.key,
                        candidate.revision.release.revision,
                        candidate.revision.release.status
                    ),
                    Vouched::NotStamped => {
                        unstamped += 1;
                        eprintln!(
                            "kubectl-locker: release {} revision {}: written, but not stamped",
                            state.key, candidate.revision.release.revision
                        );
                    }
                    Vouched::Changed => {
                        changed += 1;
                        eprintln!(
                            "kubectl-locker: release {} revision {}: not vouched: its {} changed since it was shown (resourceVersion {} is no longer the stored one); run kubectl locker vouch again to see what it holds now",
                            state.key,
                            candidate.revision.release.revision,
                            candidate.revision.secret.driver.kind(),
                            candidate.resource_version
                        );
                    }
                }
            }
            if changed > 0 {
                return Err(PluginError::Refused(format!(
                    "{changed} revision(s) changed since they were shown: not vouched"
                )));
            }
            if unstamped > 0 {
                return Err(PluginError::Refused(format!(
                    "{unstamped} revision(s) not stamped: is helm-locker's author webhook (MutatingWebhookConfiguration helm-locker-author) registered, and the locker up?"
                )));
            }
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Why { object, name } => {
            let mut config = config.clone();
            config.own_release = own_release(target, &crate::core::Index::default())?;
            let (output, config) = (target.output, &config);
            why_locked(
                &client,
                &namespace,
                config,
                registrations,
                object,
                name,
                output,
            )
            .await
        }
    }
}

/// Asks on stderr and reads the answer from stdin: only `y`/`yes` is a yes (end of input: no).
fn ask(question: &str) -> bool {
    use std::io::Write as _;
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    match std::io::stdin().read_line(&mut answer) {
        Ok(_) => vouch::confirmed(&answer),
        Err(_) => false,
    }
}

/// A release's newest revision read again for a vouch, straight from its Secret (or
/// ConfigMap): what is shown and what the write is bound to. `None`: gone, or not a revision.
async fn read_candidate(
    client: &Client,
    secret: &SecretRef,
) -> Result<Option<vouch::Candidate>, PluginError> {
    let what = || format!("read the release {} {secret}", secret.driver.kind());
    let (meta, payload) = match secret.driver {
        crate::core::ReleaseDriver::Secret => {
            let api: Api<Secret> = Api::namespaced(client.clone(), &secret.namespace);
            let Some(found) = api
                .get_opt(&secret.name)
                .await
                .map_err(PluginError::api(what()))?
            else {
                return Ok(None);
            };
            let payload = found
                .data
                .as_ref()
                .and_then(|d| d.get("release"))
                .map(|p| p.0.clone());
            (found.metadata, payload)
        }
        crate::core::ReleaseDriver::ConfigMap => {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), &secret.namespace);
            let Some(found) = api
                .get_opt(&secret.name)
                .await
                .map_err(PluginError::api(what()))?
            else {
                return Ok(None);
            };
            let payload = found
                .data
                .as_ref()
                .and_then(|d| d.get("release"))
                .map(|p| p.as_bytes().to_vec());
            (found.metadata, payload)
        }
    };
    let labels = meta.labels.clone().unwrap_or_default();
    let Some(revision) = decode(secret.clone(), &labels, payload.as_deref()) else {
        return Ok(None);
    };
    Ok(Some(vouch::Candidate {
        revision,
        annotations: meta.annotations.unwrap_or_default(),
        resource_version: meta.resource_version.unwrap_or_default(),
        content: crate::core::vouch_content(payload.as_deref().unwrap_or_default()),
    }))
}

/// What became of a vouch's write.
enum Vouched {
    /// Stamped: the author the stored object names now.
    Author(String),
    /// Written, but the author webhook did not answer: no stamp.
    NotStamped,
    /// Refused: the revision is no longer the one read (its resourceVersion moved on).
    Changed,
}

/// Writes the vouch annotation on the release Secret (or the release ConfigMap of Helm's
/// ConfigMap driver) as the user, bound to what was read: the patch carries the read
/// `resourceVersion` (the API server refuses it with a conflict once the object changed) and
/// the content's digest (the author webhook refuses a vouch of other content). The webhook
/// stamps the write with the user and takes both annotations off.
async fn write_vouch(
    client: &Client,
    candidate: &vouch::Candidate,
    reason: &str,
) -> Result<Vouched, PluginError> {
    async fn annotate<K: crate::source::release_object::ReleaseObject>(
        client: &Client,
        secret: &SecretRef,
        patch: &serde_json::Value,
    ) -> Result<Option<std::collections::BTreeMap<String, String>>, PluginError> {
        let api: Api<K> = Api::namespaced(client.clone(), &secret.namespace);
        let written = api
            .patch(
                &secret.name,
                &kube::api::PatchParams {
                    field_manager: Some("kubectl-locker".into()),
                    ..Default::default()
                },
                &kube::api::Patch::Merge(patch),
            )
            .await;
        match written {
            Ok(written) => Ok(Some(written.annotations().clone())),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
            Err(e) => Err(PluginError::Api {
                what: format!("write the release {} {secret}", secret.driver.kind()),
                source: e,
            }),
        }
    }
    let secret = &candidate.revision.secret;
    let patch = serde_json::json!({"metadata": {
        "resourceVersion": candidate.resource_version,
        "annotations": {
            crate::core::VOUCH_ANNOTATION: reason,
            crate::core::VOUCH_CONTENT_ANNOTATION: candidate.content,
        },
    }});
    let annotations = match secret.driver {
        crate::core::ReleaseDriver::Secret => annotate::<Secret>(client, secret, &patch).await?,
        crate::core::ReleaseDriver::ConfigMap => {
            annotate::<ConfigMap>(client, secret, &patch).await?
        }
    };
    let Some(annotations) = annotations else {
        return Ok(Vouched::Changed);
    };
    if annotations.contains_key(crate::core::VOUCH_ANNOTATION) {
        return Ok(Vouched::NotStamped);
    }
    Ok(annotations
        .get(crate::core::AUTHOR_ANNOTATION)
        .and_then(|a| serde_json::from_str::<crate::core::Author>(a).ok())
        .map_or(Vouched::NotStamped, |a| Vouched::Author(a.username)))
}

/// `--object KIND/NAME` or `--object NAME` as a LockException names it.
fn object_spec(object: &str) -> crate::lock_exception::ObjectSpec {
    match object.split_once('/') {
        Some((kind, name)) => crate::lock_exception::ObjectSpec {
            kind: Some(kind.to_string()),
            name: name.to_string(),
        },
        None => crate::lock_exception::ObjectSpec {
            kind: None,
            name: object.to_string(),
        },
    }
}

/// `kubectl locker why TYPE/NAME`: which release locks the object, and each locked field's
/// chart value, live value and values key.
async fn why_locked(
    client: &Client,
    namespace: &str,
    config: &crate::core::Config,
    registrations: Option<&str>,
    object: String,
    name: Option<String>,
    output: Format,
) -> Result<ExitCode, PluginError> {
    let (client, namespace) = (client.clone(), namespace.to_string());
    let (type_, name) = match (object.split_once('/'), name) {
        (Some((t, n)), None) => (t.to_string(), n.to_string()),
        (None, Some(n)) => (object.clone(), n),
        _ => {
            return Err(PluginError::Usage(format!(
                "give TYPE/NAME or TYPE NAME, not {object:?}"
            )))
        }
    };
    let (group, kind, namespaced) = resolve(&client, &type_).await?;
    let wanted = why::Wanted {
        group,
        kind,
        namespace: namespaced.then(|| namespace.clone()),
        name,
    };
    // Any namespace's release may render the object; without the right to list
    // Secrets everywhere, the object's own namespace.
    let index = match releases(&client, None, None, registrations).await {
        Ok(index) => index,
        Err(_) => releases(&client, Some(&namespace), None, registrations).await?,
    };
    let claimed = why::claims(&index, &wanted, None)
        .first()
        .map(|o| (*o).clone());
    let live = match claimed {
        Some(object) => {
            let id = ObjectId::of(&object);
            fetch(&client, vec![object])
                .await
                .remove(&id)
                .unwrap_or(Live::Unreadable("not read".into()))
        }
        None => Live::Missing, // not read: no release renders it
    };
    let schema = schema(&client).await;
    // The owning revision's chart, to say which values key sets each field.
    let chart = match why::claims(&index, &wanted, None).first() {
        Some(object) => {
            let newest = index.release(&object.release).and_then(|s| s.newest());
            let revision = newest.map(|r| r.revision);
            // Read where the index found it: a Secret or a ConfigMap.
            let reader = crate::chart_files::KubeChartFiles {
                client: client.clone(),
                drivers: newest.map(|r| vec![r.secret.driver]).unwrap_or_default(),
            };
            match revision {
                Some(revision) => {
                    use crate::chart_files::ReadChartFiles;
                    reader.read(&object.release, revision).await.ok().flatten()
                }
                None => None,
            }
        }
        None => None,
    };
    let mut config = config.clone();
    if config.own_release.is_none() {
        config.own_release = super::declared_own_release(&index);
    }
    let own = config.own_release.clone();
    super::writer_rules::with_configmap_rules(&client, own.as_ref(), &mut config).await;
    let report = why::why(
        &index,
        &config,
        &schema,
        &wanted,
        &live,
        chart.as_ref(),
        crate::lock_exception::now(),
    );
    print(output, &report, why::render_text)?;
    Ok(ExitCode::SUCCESS)
}

/// The LockExceptions in scope, as the locker reads them (its maximum open time is not known
/// here: a year). None when the CRD is not installed or not readable.
async fn lock_exceptions(client: &Client, namespace: Option<&str>) -> Vec<crate::core::Exception> {
    use crate::lock_exception::LockException;
    let api: Api<LockException> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let max = std::time::Duration::from_secs(365 * 24 * 3600);
    // The end the locker honours (its --exception-max-duration), from its LockExceptionOpen
    // Events, where it said so.
    let events: Api<k8s_openapi::api::core::v1::Event> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let params = ListParams::default().fields("reason=LockExceptionOpen");
    let honoured: BTreeMap<String, i64> = events
        .list(&params)
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|e| {
            let until = honoured_until(e.message.as_deref()?)?;
            let o = e.involved_object;
            Some((format!("{}/{}", o.namespace?, o.name?), until))
        })
        .collect();
    match api.list(&Default::default()).await {
        Ok(list) => list
            .items
            .iter()
            .filter_map(|le| crate::lock_exception::exception(le, max).ok())
            .map(|mut e| {
                if let Some(until) = honoured.get(&e.name) {
                    e.until = e.until.min(*until);
                }
                e
            })
            .collect(),
        Err(e) => {
            tracing::debug!(error = %e, "LockExceptions not read");
            Vec::new()
        }
    }
}

pub(crate) fn print<T: Serialize>(
    format: Format,
    report: &T,
    text: impl Fn(&T) -> String,
) -> Result<(), PluginError> {
    match format {
        Format::Text => print!("{}", text(report)),
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(report).map_err(PluginError::Output)?
        ),
    }
    Ok(())
}

/// A client as kubectl would make it (`--kubeconfig`, `--context`, `$KUBECONFIG`,
/// `~/.kube/config`, in-cluster), and the context's namespace.
pub(crate) async fn client(target: &super::Target) -> Result<(Client, String), PluginError> {
    let options = KubeConfigOptions {
        context: target.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config =
        match &target.kubeconfig {
            Some(path) => {
                let unusable = |source| PluginError::Kubeconfig {
                    path: path.clone(),
                    source,
                };
                let kubeconfig = Kubeconfig::read_from(path).map_err(unusable)?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .map_err(unusable)?
            }
            None if target.context.is_some() => kube::Config::from_kubeconfig(&options)
                .await
                .map_err(|source| PluginError::Kubeconfig {
                    path: "kubeconfig".into(),
                    source,
                })?,
            None => kube::Config::infer().await.map_err(PluginError::NoConfig)?,
        };
    let namespace = config.default_namespace.clone();
    let client = Client::try_from(config).map_err(PluginError::Client)?;
    Ok((client, namespace))
}

/// The time in a LockExceptionOpen note ("helm-locker honours this LockException until T...").
fn honoured_until(note: &str) -> Option<i64> {
    let rest = note.split_once(" until ")?.1;
    // An RFC 3339 time in UTC, as the locker writes it: up to its zone designator.
    crate::lock_exception::unix_seconds(&rest[..=rest.find('Z')?])
}

/// How long `unlock` waits for the locker to say until when it honours the exception.
const ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// The locker's answer to a LockException just created: the reason and note of its
/// `LockExceptionOpen` or `LockExceptionInvalid` Event, once one is there (within
/// [`ANSWER_WAIT`]).
async fn locker_answer(client: &Client, namespace: &str, name: &str) -> Option<(String, String)> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().fields(&format!(
        "involvedObject.kind=LockException,involvedObject.name={name}"
    ));
    let deadline = tokio::time::Instant::now() + ANSWER_WAIT;
    loop {
        if let Ok(list) = api.list(&params).await {
            let answer = list.items.into_iter().find_map(|e| {
                let reason = e.reason.unwrap_or_default();
                matches!(
                    reason.as_str(),
                    "LockExceptionOpen" | "LockExceptionInvalid"
                )
                .then(|| (reason, e.message.unwrap_or_default()))
            });
            if answer.is_some() {
                return answer;
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// The reverter's Warning Events about refusals and fights in a namespace (all when `None`);
/// none when they cannot be listed (said on stderr: the rest of the status stands).
async fn reverter_events(
    client: &Client,
    namespace: Option<&str>,
) -> Vec<k8s_openapi::api::core::v1::Event> {
    let api: Api<k8s_openapi::api::core::v1::Event> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut events = Vec::new();
    for reason in ["AuthorLacksRights", "UnknownAuthor", "RevertFight"] {
        let params = ListParams::default().fields(&format!("reason={reason},type=Warning"));
        match api.list(&params).await {
            Ok(list) => events.extend(list.items),
            Err(e) => eprintln!("kubectl-locker: cannot list {reason} events: {e}"),
        }
    }
    events
}

/// The release Secrets of a namespace (all when `None`), of one release when `name` is given,
/// and the release ConfigMaps of Helm's ConfigMap driver (when they cannot be listed, said on
/// stderr: the Secrets' releases stand); with a registration namespace, the HelmReleases there
/// register releases as for the locker.
pub(crate) async fn releases(
    client: &Client,
    namespace: Option<&str>,
    name: Option<&str>,
    registrations: Option<&str>,
) -> Result<Index, PluginError> {
    let api: Api<Secret> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let labels = match name {
        Some(name) => format!("{LABELS},name={name}"),
        None => LABELS.to_string(),
    };
    let list = api
        .list(&ListParams::default().labels(&labels).fields(FIELDS))
        .await
        .map_err(PluginError::api("list Helm's release Secrets"))?;
    let mut secrets: Vec<ReleaseSecret> = list
        .items
        .iter()
        .filter_map(|s| {
            decode(
                SecretRef::secret(s.namespace().unwrap_or_default(), s.name_any()),
                s.labels(),
                s.data
                    .as_ref()
                    .and_then(|d| d.get("release"))
                    .map(|p| p.0.as_slice()),
            )
        })
        .collect();
    let api: Api<ConfigMap> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    match api.list(&ListParams::default().labels(&labels)).await {
        Ok(list) => secrets.extend(list.items.iter().filter_map(|c| {
            decode(
                SecretRef::config_map(c.namespace().unwrap_or_default(), c.name_any()),
                c.labels(),
                c.data
                    .as_ref()
                    .and_then(|d| d.get("release"))
                    .map(String::as_bytes),
            )
        })),
        Err(e) => eprintln!("kubectl-locker: cannot list Helm's release ConfigMaps: {e}"),
    }
    let mut index = Index::from_secrets(secrets);
    if let Some(ns) = registrations {
        let api: Api<crate::crd::HelmRelease> = Api::namespaced(client.clone(), ns);
        let hrs = api
            .list(&ListParams::default())
            .await
            .map_err(PluginError::api(format!("list HelmReleases in {ns}")))?;
        let (registered, errors) = crate::crd::registrations(&hrs.items);
        for (hr, error) in errors {
            eprintln!("kubectl-locker: HelmRelease {hr} not honoured: {error}");
        }
        index.replace_registrations(registered);
    }
    Ok(index)
}

/// A release Secret's or ConfigMap's revision, from Helm's layer of its `data.release`.
fn decode(
    reference: SecretRef,
    labels: &BTreeMap<String, String>,
    payload: Option<&[u8]>,
) -> Option<ReleaseSecret> {
    let decoded = payload
        .ok_or_else(|| "no data.release".to_string())
        .and_then(|p| {
            release_secret_from_parts(reference.clone(), labels.clone(), p)
                .map_err(|e| e.to_string())
        });
    match decoded {
        Ok(decoded) => Some(decoded),
        Err(e) => {
            eprintln!("kubectl-locker: release Secret {reference} skipped: {e}");
            None
        }
    }
}

/// The API server's schema (`/openapi/v2`, custom resources included), as the locker's
/// reverter uses it; the embedded Kubernetes 1.20 schema when it cannot be read.
async fn schema(client: &Client) -> Arc<Schema> {
    let read = match crate::source::openapi::fetch(client, None).await {
        Ok(Some((document, _))) => Schema::from_openapi_v2(&document).map_err(|e| e.to_string()),
        Ok(None) => Err("no document".into()),
        Err(e) => Err(crate::error_chain::with_causes(&e)),
    };
    match read {
        Ok(schema) => Arc::new(schema),
        Err(e) => {
            let version = crate::core::KubeVersion::NEWEST;
            eprintln!("kubectl-locker: cannot read /openapi/v2 ({e}); using the embedded schema of Kubernetes {version}");
            Schema::embedded(version)
        }
    }
}

/// Each kind of `objects` as discovery serves it at the chart's group and version (and whether it
/// is namespaced), or why it is not served.
async fn served_kinds(
    client: &Client,
    objects: &[Arc<LockedObject>],
) -> HashMap<GroupVersionKind, Result<(ApiResource, bool), String>> {
    let mut resources = HashMap::new();
    for object in objects {
        let gvk = GroupVersionKind::gvk(&object.group, &object.version, &object.kind);
        if let std::collections::hash_map::Entry::Vacant(slot) = resources.entry(gvk) {
            let found = pinned_kind(client, slot.key())
                .await
                .map(|(ar, caps)| (ar, caps.scope == Scope::Namespaced))
                .map_err(|e| format!("{} is not served: {e}", object.api_version()));
            slot.insert(found);
        }
    }
    resources
}

/// Each object as the API server has it now, in the chart's group and version.
async fn fetch(client: &Client, objects: Vec<Arc<LockedObject>>) -> LiveObjects {
    let resources = &served_kinds(client, &objects).await;
    futures::stream::iter(objects)
        .map(|object| async move {
            let id = ObjectId::of(&object);
            let gvk = GroupVersionKind::gvk(&id.group, &id.version, &id.kind);
            let live = match resources.get(&gvk) {
                Some(Ok((ar, namespaced))) => {
                    get(client, ar, *namespaced, id.namespace.as_deref(), &id.name).await
                }
                Some(Err(e)) => Live::Unreadable(e.clone()),
                None => Live::Unreadable("not resolved".into()),
            };
            (id, live)
        })
        .buffer_unordered(CONCURRENT_READS)
        .collect()
        .await
}

/// [`diff::diff`], where the objects that differ locally are compared with what the API server
/// answers it would store their chart objects as ([`stored_forms`]).
async fn with_stored_forms(
    client: &Client,
    index: &Index,
    config: &crate::core::Config,
    schema: &Schema,
    live: &LiveObjects,
) -> diff::DiffReport {
    let now = crate::lock_exception::now();
    let local = diff::diff(index, config, schema, live, &diff::StoredForms::new(), now);
    let drifted: Vec<Arc<LockedObject>> = index
        .releases()
        .into_iter()
        .filter(|s| diff::compared(s).is_ok())
        .flat_map(|s| s.objects.iter().flatten().cloned())
        .filter(|object| {
            local.differences.iter().any(|d| {
                d.state == "drifted"
                    && d.kind == *object.kind
                    && d.name == *object.name
                    && d.namespace.as_deref() == object.namespace.as_deref()
                    && d.api_version == object.api_version()
            })
        })
        .collect();
    if drifted.is_empty() {
        return local;
    }
    let stored = stored_forms(client, drifted).await;
    diff::diff(index, config, schema, live, &stored, now)
}

/// What the API server would store each object's chart object as: a dry-run create under a
/// generated name ([`crate::core::stored_form_body`]), which needs `create` on the kind in its
/// namespace; nothing is stored. An error says why it did not answer.
async fn stored_forms(client: &Client, objects: Vec<Arc<LockedObject>>) -> diff::StoredForms {
    let resources = &served_kinds(client, &objects).await;
    futures::stream::iter(objects)
        .map(|object| async move {
            let id = ObjectId::of(&object);
            let gvk = GroupVersionKind::gvk(&id.group, &id.version, &id.kind);
            let answer = match resources.get(&gvk) {
                Some(Ok((ar, namespaced))) => {
                    let api: Api<DynamicObject> = match (namespaced, id.namespace.as_deref()) {
                        (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, ar),
                        _ => Api::all_with(client.clone(), ar),
                    };
                    let params = kube::api::PostParams {
                        dry_run: true,
                        field_manager: Some(crate::core::STORED_FORM_MANAGER.into()),
                    };
                    match serde_json::from_value::<DynamicObject>(crate::core::stored_form_body(
                        &object,
                    )) {
                        Ok(body) => match api.create(&params, &body).await {
                            Ok(answer) => serde_json::to_value(answer).map_err(|e| e.to_string()),
                            Err(kube::Error::Api(status)) => Err(format!(
                                "its dry-run create was refused: {}",
                                status.message
                            )),
                            Err(e) => Err(format!("its dry-run create failed: {e}")),
                        },
                        Err(e) => Err(e.to_string()),
                    }
                }
                Some(Err(e)) => Err(e.clone()),
                None => Err("not resolved".into()),
            };
            (id, answer)
        })
        .buffer_unordered(CONCURRENT_READS)
        .collect()
        .await
}

async fn get(
    client: &Client,
    ar: &ApiResource,
    namespaced: bool,
    namespace: Option<&str>,
    name: &str,
) -> Live {
    let api: Api<DynamicObject> = match (namespaced, namespace) {
        (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, ar),
        (true, None) => return Live::Unreadable("a namespaced kind without a namespace".into()),
        (false, _) => Api::all_with(client.clone(), ar),
    };
    match api.get_opt(name).await {
        Ok(Some(object)) => serde_json::to_value(object)
            .map(Live::Found)
            .unwrap_or_else(|e| Live::Unreadable(e.to_string())),
        Ok(None) => Live::Missing,
        Err(e) => Live::Unreadable(e.to_string()),
    }
}

/// kubectl's short names and resource names of common kinds: (group, kind).
const SHORT_NAMES: &[(&[&str], &str, &str)] = &[
    (
        &["deploy", "deployment", "deployments"],
        "apps",
        "Deployment",
    ),
    (
        &["sts", "statefulset", "statefulsets"],
        "apps",
        "StatefulSet",
    ),
    (&["ds", "daemonset", "daemonsets"], "apps", "DaemonSet"),
    (&["rs", "replicaset", "replicasets"], "apps", "ReplicaSet"),
    (&["svc", "service", "services"], "", "Service"),
    (&["cm", "configmap", "configmaps"], "", "ConfigMap"),
    (
        &["sa", "serviceaccount", "serviceaccounts"],
        "",
        "ServiceAccount",
    ),
    (&["secret", "secrets"], "", "Secret"),
    (&["po", "pod", "pods"], "", "Pod"),
    (
        &["pvc", "persistentvolumeclaim", "persistentvolumeclaims"],
        "",
        "PersistentVolumeClaim",
    ),
    (
        &["pv", "persistentvolume", "persistentvolumes"],
        "",
        "PersistentVolume",
    ),
    (&["ns", "namespace", "namespaces"], "", "Namespace"),
    (
        &["ing", "ingress", "ingresses"],
        "networking.k8s.io",
        "Ingress",
    ),
    (
        &["netpol", "networkpolicy", "networkpolicies"],
        "networking.k8s.io",
        "NetworkPolicy",
    ),
    (&["job", "jobs"], "batch", "Job"),
    (&["cj", "cronjob", "cronjobs"], "batch", "CronJob"),
    (&["role", "roles"], "rbac.authorization.k8s.io", "Role"),
    (
        &["rolebinding", "rolebindings"],
        "rbac.authorization.k8s.io",
        "RoleBinding",
    ),
    (
        &["clusterrole", "clusterroles"],
        "rbac.authorization.k8s.io",
        "ClusterRole",
    ),
    (
        &["clusterrolebinding", "clusterrolebindings"],
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
    ),
    (
        &["hpa", "horizontalpodautoscaler", "horizontalpodautoscalers"],
        "autoscaling",
        "HorizontalPodAutoscaler",
    ),
    (
        &["pdb", "poddisruptionbudget", "poddisruptionbudgets"],
        "policy",
        "PodDisruptionBudget",
    ),
    (
        &[
            "crd",
            "crds",
            "customresourcedefinition",
            "customresourcedefinitions",
        ],
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
    ),
    (
        &["sc", "storageclass", "storageclasses"],
        "storage.k8s.io",
        "StorageClass",
    ),
    (
        &["pc", "priorityclass", "priorityclasses"],
        "scheduling.k8s.io",
        "PriorityClass",
    ),
];

/// A kind from its kubectl short name (table above, whose scope the core knows), else by
/// discovery: a kind, plural or singular resource name, optionally `.group`.
pub(crate) fn short_name(type_: &str) -> Option<(&'static str, &'static str)> {
    let lower = type_.to_ascii_lowercase();
    let (name, group) = match lower.split_once('.') {
        Some((name, group)) => (name.to_string(), Some(group.to_string())),
        None => (lower, None),
    };
    SHORT_NAMES
        .iter()
        .find(|(names, g, _)| {
            names.contains(&name.as_str()) && group.as_deref().is_none_or(|w| w == *g)
        })
        .map(|(_, g, k)| (*g, *k))
}

/// (group, kind, namespaced) of TYPE.
async fn resolve(client: &Client, type_: &str) -> Result<(String, String, bool), PluginError> {
    use crate::core::{scope_of, KindScope as Known};
    if let Some((group, kind)) = short_name(type_) {
        match scope_of(group, kind) {
            Known::Namespaced => return Ok((group.into(), kind.into(), true)),
            Known::Cluster => return Ok((group.into(), kind.into(), false)),
            Known::Unknown => {}
        }
    }
    let lower = type_.to_ascii_lowercase();
    let (name, group) = match lower.split_once('.') {
        Some((name, group)) => (name.to_string(), Some(group.to_string())),
        None => (lower.clone(), None),
    };
    let mut discovery = Discovery::new(client.clone());
    if let Some(group) = &group {
        discovery = discovery.filter(&[group.as_str()]);
    }
    let discovery = discovery
        .run()
        .await
        .map_err(PluginError::api("discover the API server's resource types"))?;
    for api_group in discovery.groups() {
        for (ar, caps) in api_group.recommended_resources() {
            let kind = ar.kind.to_ascii_lowercase();
            if kind == name || ar.plural == name {
                return Ok((ar.group, ar.kind, caps.scope == Scope::Namespaced));
            }
        }
    }
    Err(PluginError::Usage(format!(
        "the server doesn't have a resource type {type_:?} (give a kind, a resource, or kind.group)"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_short_names_and_resources_name_kinds() {
        assert_eq!(short_name("deploy"), Some(("apps", "Deployment")));
        assert_eq!(short_name("Deployments.apps"), Some(("apps", "Deployment")));
        assert_eq!(short_name("ing"), Some(("networking.k8s.io", "Ingress")));
        assert_eq!(
            short_name("clusterrolebinding"),
            Some(("rbac.authorization.k8s.io", "ClusterRoleBinding"))
        );
        assert_eq!(
            short_name("hpa"),
            Some(("autoscaling", "HorizontalPodAutoscaler"))
        );
        assert_eq!(short_name("deploy.extensions"), None);
        assert_eq!(short_name("widgets.example.com"), None);
    }

    #[test]
    fn the_end_the_locker_honours_is_read_from_its_note() {
        let at = |t: &str| crate::lock_exception::unix_seconds(t).unwrap();
        let capped = "helm-locker honours this LockException until 2026-11-25T16:00:00Z: 1h after its creation, the maximum (--exception-max-duration), not until 2028-01-01T00:00:00Z as asked";
        assert_eq!(honoured_until(capped), Some(at("2026-11-25T16:00:00Z")));
        let plain = "helm-locker honours this LockException until 2026-11-25T00:10:00Z";
        assert_eq!(honoured_until(plain), Some(at("2026-11-25T00:10:00Z")));
        assert_eq!(honoured_until("no time here"), None);
        assert_eq!(honoured_until("until tomorrow"), None);
    }
}
