//! The plugin's commands against a cluster, one function each (`status`, `diff`, `unlock`,
//! `vouch`, `why`): each reads through its parent's API reads ([`super`]) and hands what it
//! read to the command's pure report ([`crate::plugin::status`], [`crate::plugin::diff`],
//! [`crate::plugin::vouch`], [`crate::plugin::why`]).

use std::process::ExitCode;

use kube::api::Api;
use kube::Client;

use super::{
    client, fetch, lock_exceptions, locker_answer, print, read_candidate, releases, resolve,
    reverter_events, schema, with_stored_forms, write_vouch, PluginError, Vouched, ANSWER_WAIT,
};
use crate::core::{Config, Index};
use crate::plugin::{diff, status, vouch, why, Live, ObjectId, PluginArgs, PluginCommand, Target};

/// Runs a command other than `learn` (which [`crate::plugin::run`] runs on its own): the
/// configuration as the locker's (`--config`, `--registration-namespace`), a client as
/// kubectl's, the namespace asked about (`-n`, else the context's), then the command.
pub(crate) async fn run(args: PluginArgs) -> Result<ExitCode, PluginError> {
    let target = &args.target;
    let mut config = crate::config_file::load(target.config.as_deref())?;
    if target.registration_namespace.is_some() {
        config.registration_namespace = target.registration_namespace.clone();
    }
    let (client, default_namespace) = client(target).await?;
    let at = At {
        target,
        namespace: target.namespace.clone().unwrap_or(default_namespace),
        client,
    };
    match args.command {
        // `crate::plugin::run` runs it on its own: never here.
        PluginCommand::Learn(_) => Err(PluginError::Usage(
            "kubectl locker learn is run by the plugin's run".into(),
        )),
        PluginCommand::Status => status(&at, config).await,
        PluginCommand::Diff { release } => diff(&at, config, release).await,
        PluginCommand::Unlock {
            release,
            duration,
            reason,
            users,
            groups,
            objects,
            paths,
        } => {
            let asked = Unlock {
                release,
                duration,
                reason,
                users,
                groups,
                objects,
                paths,
            };
            unlock(&at, asked).await
        }
        PluginCommand::Vouch {
            release,
            all,
            reason,
            include_known_authors,
            yes,
        } => {
            let asked = Vouch {
                release,
                all,
                reason,
                include_known_authors,
                yes,
            };
            vouch(&at, &config, asked).await
        }
        PluginCommand::Why { object, name } => {
            let mut config = config.clone();
            config.own_release = own_release(target, &crate::core::Index::default())?;
            why_locked(&at, &config, object, name).await
        }
    }
}

/// Where a command runs: the person's flags, a client, and the namespace asked about.
struct At<'a> {
    target: &'a Target,
    client: Client,
    /// `-n`, else the context's namespace.
    namespace: String,
}

impl At<'_> {
    /// Where releases are read: the namespace, or all of them with `-A`.
    fn scope(&self) -> Option<&str> {
        (!self.target.all_namespaces).then_some(self.namespace.as_str())
    }
}

/// `--own-release`, else the release the index shows to be the locker's own.
fn own_release(
    target: &Target,
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
        None => Ok(crate::plugin::declared_own_release(index)),
    }
}

/// `kubectl locker status`: each release, locked or why not, its drift, the LockExceptions,
/// the reverter's warnings and the writer rules in force.
async fn status(at: &At<'_>, mut config: Config) -> Result<ExitCode, PluginError> {
    let (target, client, scope) = (at.target, &at.client, at.scope());
    let registrations = config.registration_namespace.clone();
    let registrations = registrations.as_deref();
    let index = releases(client, scope, None, registrations).await?;
    config.own_release = own_release(target, &index)?;
    let objects: Vec<_> = index
        .releases()
        .into_iter()
        .flat_map(|s| s.objects.iter().flatten().cloned())
        .collect();
    let (schema, live) = (schema(client).await, fetch(client, objects).await);
    let mut index = index;
    index.replace_exceptions(lock_exceptions(client, scope).await);
    let mut report = status::status(
        &index,
        &config,
        &schema,
        &live,
        crate::lock_exception::now(),
    );
    status::add_notices(&mut report, &index, &reverter_events(client, scope).await);
    let own = config.own_release.as_ref();
    let locker_namespace = own.map_or(crate::plugin::writer_rules::DEFAULT_LOCKER_NAMESPACE, |k| {
        k.namespace.as_str()
    });
    let writers = format!(
        "{}-writers",
        crate::plugin::writer_rules::fullname(own, &[]).unwrap_or_else(|| "helm-locker".into())
    );
    let rules = crate::plugin::writer_rules::rules_in_force(
        client,
        locker_namespace,
        &writers,
        target.config.as_deref(),
    )
    .await
    .map_err(PluginError::Usage)?;
    let mut rules = rules;
    rules.extend(crate::plugin::writer_rules::helmrelease_rules(client, registrations).await);
    status::add_writer_rules(&mut report, &rules, crate::lock_exception::now());
    print(target.output, &report, status::render_text)?;
    Ok(ExitCode::SUCCESS)
}

/// `kubectl locker diff [RELEASE]`: drift between the live objects and their chart; exit
/// status 1 on drift.
async fn diff(
    at: &At<'_>,
    mut config: Config,
    release: Option<String>,
) -> Result<ExitCode, PluginError> {
    let (target, client, namespace, scope) = (at.target, &at.client, &at.namespace, at.scope());
    if release.is_some() && target.all_namespaces {
        return Err(PluginError::Usage(
            "give a RELEASE with -n NAMESPACE, not -A".into(),
        ));
    }
    let registrations = config.registration_namespace.clone();
    let index = releases(client, scope, release.as_deref(), registrations.as_deref()).await?;
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
    let (schema, live) = (schema(client).await, fetch(client, objects).await);
    let own = config.own_release.clone();
    crate::plugin::writer_rules::with_configmap_rules(client, own.as_ref(), &mut config).await;
    let report = with_stored_forms(client, &index, &config, &schema, &live).await;
    print(target.output, &report, diff::render_text)?;
    Ok(ExitCode::from(report.exit_status()))
}

/// What `kubectl locker unlock RELEASE` asks for: the release, for how long and why, whom
/// it opens to, and which objects and paths.
struct Unlock {
    release: String,
    duration: std::time::Duration,
    reason: String,
    users: Vec<String>,
    groups: Vec<String>,
    objects: Vec<String>,
    paths: Vec<String>,
}

/// `kubectl locker unlock`: a LockException created as asked (checked as the locker will read
/// it first), and the locker's answer: until when it honours it, or why not.
async fn unlock(at: &At<'_>, asked: Unlock) -> Result<ExitCode, PluginError> {
    let (client, namespace) = (&at.client, &at.namespace);
    let Unlock {
        release,
        duration,
        reason,
        users,
        groups,
        objects,
        paths,
    } = asked;
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
    let api: Api<crate::lock_exception::LockException> = Api::namespaced(client.clone(), namespace);
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
    match locker_answer(client, namespace, &created_name).await {
        Some((crate::events::Reason::LockExceptionOpen, note)) => {
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

/// What `kubectl locker vouch` asks for: one release (`-n`) or all, the reason written on each
/// revision, whether revisions with a known author are shown too, and whether to ask first.
struct Vouch {
    release: Option<String>,
    all: bool,
    reason: String,
    include_known_authors: bool,
    yes: bool,
}

/// `kubectl locker vouch`: each release's newest revision that has no known author, read
/// again, shown with its drift, and (once the person says yes) annotated with their rights.
async fn vouch(at: &At<'_>, config: &Config, asked: Vouch) -> Result<ExitCode, PluginError> {
    let (target, client, namespace, scope) = (at.target, &at.client, &at.namespace, at.scope());
    let Vouch {
        release,
        all,
        reason,
        include_known_authors,
        yes,
    } = asked;
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
    let index = releases(client, scope, release.as_deref(), None).await?;
    if let (Some(name), 0) = (&release, index.release_count()) {
        return Err(PluginError::Usage(format!(
            "no Helm release {name} in namespace {namespace}"
        )));
    }
    let schema = schema(client).await;
    let (mut unstamped, mut changed) = (0, 0);
    for state in index.releases() {
        let Some(newest) = state.newest() else {
            continue;
        };
        let Some(candidate) = read_candidate(client, &newest.secret).await? else {
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
        let live = fetch(client, objects).await;
        let report = with_stored_forms(client, &one, config, &schema, &live).await;
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
        match write_vouch(client, &candidate, &reason).await? {
            Vouched::Author(author) => println!(
                "vouched: release {} revision {} ({}), author now {author}",
                state.key, candidate.revision.release.revision, candidate.revision.release.status
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

/// `kubectl locker why TYPE/NAME`: which release locks the object, and each locked field's
/// chart value, live value and values key.
async fn why_locked(
    at: &At<'_>,
    config: &Config,
    object: String,
    name: Option<String>,
) -> Result<ExitCode, PluginError> {
    let registrations = config.registration_namespace.as_deref();
    let output = at.target.output;
    let (client, namespace) = (at.client.clone(), at.namespace.clone());
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
        config.own_release = crate::plugin::declared_own_release(&index);
    }
    let own = config.own_release.clone();
    crate::plugin::writer_rules::with_configmap_rules(&client, own.as_ref(), &mut config).await;
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
