//! `kubectl locker` (the binary named `kubectl-locker`, or `helm-locker kubectl`): what the
//! locker sees in a cluster, read-only, with the user's kubeconfig like kubectl.
//!
//! - `status`: each release, whether it is locked and why not, its objects and drift now;
//! - `why KIND/NAME`: which release locks an object, each locked path, chart and live values;
//! - `diff [RELEASE]`: drift between live objects and their chart; exit status 1 on drift.
//! - `learn`, `learn accept ID...`: the writer rules proposed from what the locker learned, and
//!   the ones a person accepts ([`learn`]).
//!
//! The reports are pure functions of the index (built from the release Secrets), the policy and
//! the live objects ([`status`], [`why`], [`diff`]); [`kube_io`] only reads the API server.

pub(crate) mod diff;
pub(crate) mod kube_io;
pub(crate) mod learn;
pub(crate) mod status;
pub(crate) mod vouch;
pub(crate) mod why;
pub(crate) mod writer_rules;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use serde::Serialize;
use serde_json::Value;

use crate::core::{Config, Index, LockedObject, Mode, ReleaseState};

/// What helm-locker locks in this cluster, read-only (a kubectl plugin).
///
/// Reads Helm's release Secrets and the live objects with your kubeconfig, as kubectl does, and
/// compares them as the locker does. Install: ln -s $(which helm-locker) /usr/local/bin/kubectl-locker
#[derive(Parser, Debug)]
#[command(name = "kubectl locker", bin_name = "kubectl locker", version)]
pub(crate) struct KubectlLocker {
    #[command(flatten)]
    pub args: PluginArgs,
}

#[derive(clap::Args, Debug)]
pub(crate) struct PluginArgs {
    #[command(flatten)]
    pub target: Target,
    #[command(subcommand)]
    pub command: PluginCommand,
}

/// Where and how to look: kubectl's own flags.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Target {
    /// Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else in-cluster).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// Namespace (default: the context's namespace).
    #[arg(short, long, global = true, conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// Every namespace.
    #[arg(short = 'A', long, global = true)]
    pub all_namespaces: bool,
    /// Output format.
    #[arg(short, long, global = true, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// The locker's policy file (its --config: modes, namespaces, ignore rules), to report
    /// what that locker would lock; default: every deployed release in deny mode.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// As the locker's --registration-namespace: only releases a HelmRelease
    /// (helm.cattle.io/v1alpha1) in this namespace registers are locked, with its mode.
    #[arg(long, global = true, value_name = "NAMESPACE")]
    pub registration_namespace: Option<String>,
    /// As the locker's --own-release (NAMESPACE/NAME): the release the locker runs from, never
    /// locked. Default: a release that renders a Deployment passing HELM_LOCKER_OWN_RELEASE
    /// with its own name, as the chart does.
    #[arg(long, global = true, value_name = "NAMESPACE/NAME")]
    pub own_release: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
pub(crate) enum PluginCommand {
    /// Each Helm release: revision, status, whether it is locked (and why not), mode, objects,
    /// and the fields that differ from the chart now.
    ///
    /// Example: kubectl locker status -A
    Status,
    /// Which release locks an object, and each locked path with the chart's value and the live
    /// value (`*` marks those that differ).
    ///
    /// TYPE is a kind, a resource or a kubectl short name (deploy, svc, cm, sa, secret, ing, sts,
    /// ds, job, cronjob, role, rolebinding, clusterrole, clusterrolebinding, pvc, hpa...), or
    /// `kind.group` (widgets.example.com/NAME). Example: kubectl locker why deploy/web -n shop
    Why {
        /// TYPE/NAME, or TYPE NAME.
        object: String,
        name: Option<String>,
    },
    /// Drift between live objects and their chart: per object, per path, the chart's value and
    /// the live value. Releases not deployed (failed, pending) are listed as skipped.
    ///
    /// Exit status: 0 no drift, 1 drift (a changed field or a deleted object), 2 error (an
    /// object or the cluster could not be read). Usable in CI: kubectl locker diff -A
    Diff {
        /// Only this release (in the namespace of -n, or the context's).
        release: Option<String>,
    },
    /// The writer rules proposed from what helm-locker learned (its would-be denials), each with
    /// its evidence and never wider than what was seen; the writers it will not propose (people,
    /// with the helm upgrade that makes their change the right way; a service account's token
    /// used from outside a pod, flagged); rules in force unused for --unused-for, and expired
    /// ones. Reads the evidence only from the locker's own namespace. `learn accept ID...`
    /// takes the named proposals.
    ///
    /// Example: kubectl locker learn -A --since 7d
    Learn(learn::LearnArgs),
    /// Break glass: open RELEASE (in -n NAMESPACE) to the users and groups named, for a while,
    /// with a reason, by creating a LockException (helm-locker.io/v1alpha1). Needs RBAC to
    /// create lockexceptions there, and a locker run with --lock-exceptions. Every write it
    /// lets through is an Event; when it ends the lock is back and the drift is reverted.
    ///
    /// Example: kubectl locker unlock shop -n shop --for 30m --reason "INC-42: scale for the
    /// sale" --user alice --path /spec/replicas --object Deployment/shop-web
    Unlock {
        /// The Helm release to open.
        release: String,
        /// For how long (30m, 2h; the locker caps it at its --exception-max-duration).
        #[arg(long = "for", value_parser = humantime::parse_duration)]
        duration: std::time::Duration,
        /// Why (shown in the Events of every write it lets through).
        #[arg(long)]
        reason: String,
        /// A user it opens the release to (repeatable).
        #[arg(long = "user")]
        users: Vec<String>,
        /// A group it opens the release to (repeatable).
        #[arg(long = "group")]
        groups: Vec<String>,
        /// Only this object, KIND/NAME or NAME (repeatable; default: all of the release's).
        #[arg(long = "object")]
        objects: Vec<String>,
        /// Only this field, a JSON pointer (repeatable; default: all).
        #[arg(long = "path")]
        paths: Vec<String>,
    },
    /// Take responsibility for a release as it stands: its newest revision is stamped with you
    /// as its author, by the locker's author webhook, and you adopt its content with your
    /// rights. A revision whose author is not known (written before helm-locker was installed,
    /// while its author webhook was away, or before its author key was made again) is held: its
    /// objects stay at what is live, and drift of its RBAC and cluster-scoped objects is not put
    /// back. Vouched for, it is followed again, and the reverter writes from it what you may
    /// write yourself. Only revisions with no known author are vouched for: one stamped with
    /// an author is skipped and listed with them. Each vouch first shows the revision, its
    /// author, the objects the reverter would write (RBAC and cluster-scoped ones called out)
    /// and their drift from live, and asks (unless --yes); it is bound to what it read (its
    /// resourceVersion and content): a revision changed since is refused. Needs update on the
    /// release Secrets (where they are stored: -n flux-system for Flux's layout).
    ///
    /// Example: kubectl locker vouch shop -n shop --reason "INC-7: found at install"
    Vouch {
        /// The release to vouch for (in -n NAMESPACE).
        release: Option<String>,
        /// Every release with no known author in the namespace (-n), or in the cluster with -A.
        #[arg(long, conflicts_with = "release")]
        all: bool,
        /// Why (kept with the write in the API server's audit log).
        #[arg(long)]
        reason: String,
        /// Vouch for the named RELEASE even if its revision has an author: you take it over
        /// from them (never with --all).
        #[arg(long, requires = "release", conflicts_with = "all")]
        include_known_authors: bool,
        /// Vouch for what is shown without asking.
        #[arg(short, long)]
        yes: bool,
    },
}

/// `kubectl-locker ...`: the plugin's own command line.
pub(crate) fn main_as_kubectl() -> ExitCode {
    run(KubectlLocker::parse().args)
}

/// Runs a plugin command; errors are printed as `kubectl-locker: ...` with exit status 2.
pub(crate) fn run(args: PluginArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&e.to_string()),
    };
    let outcome = match args.command {
        PluginCommand::Learn(learn) => runtime.block_on(learn::run(&args.target, learn)),
        _ => runtime.block_on(kube_io::run(args)),
    };
    match outcome {
        Ok(code) => code,
        Err(e) => fail(&crate::error_chain::with_causes(&e)),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("kubectl-locker: {message}");
    ExitCode::from(2)
}

/// One object's identity, as the index keys it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ObjectId {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectId {
    pub(crate) fn of(object: &LockedObject) -> ObjectId {
        ObjectId {
            group: object.group.to_string(),
            version: object.version.to_string(),
            kind: object.kind.to_string(),
            namespace: object.namespace.as_deref().map(str::to_string),
            name: object.name.to_string(),
        }
    }
}

/// A live object as read from the API server.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Live {
    Found(Value),
    /// The API server has no such object (deleted).
    Missing,
    /// Could not be read (kind not served, forbidden...).
    Unreadable(String),
}

pub(crate) type LiveObjects = HashMap<ObjectId, Live>;

/// The release that declares itself helm-locker's own, as the chart does: it renders a
/// Deployment whose container passes `HELM_LOCKER_OWN_RELEASE` naming that very release.
/// Anyone who may write a release Secret can make one declare so: only when exactly one
/// release does is it taken (a display hint; the server follows its own flag alone).
pub(crate) fn declared_own_release(index: &Index) -> Option<crate::core::ReleaseKey> {
    let mut declared = index.releases().into_iter().filter_map(|state| {
        let declared = state.objects.iter().flatten().any(|object| {
            if object.kind.as_ref() != "Deployment" {
                return false;
            }
            let content = object.content().to_json();
            let containers = content
                .pointer("/spec/template/spec/containers")
                .and_then(Value::as_array);
            containers.into_iter().flatten().any(|c| {
                let env = c.get("env").and_then(Value::as_array);
                env.into_iter().flatten().any(|e| {
                    e.get("name").and_then(Value::as_str) == Some("HELM_LOCKER_OWN_RELEASE")
                        && e.get("value").and_then(Value::as_str)
                            == Some(state.key.to_string().as_str())
                })
            })
        });
        declared.then(|| state.key.clone())
    });
    match (declared.next(), declared.next()) {
        (Some(own), None) => Some(own),
        _ => None,
    }
}

/// Whether a release is locked now, its mode, and why not.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct LockState {
    pub locked: bool,
    pub mode: String,
    /// Why the release is not locked (`None` when it is).
    pub reason: Option<String>,
}

/// The decision's rules 2 and 3 for a release as a whole (see [`crate::core::Allowed`]).
pub(crate) fn lock_state(index: &Index, config: &Config, state: &ReleaseState) -> LockState {
    let Some(newest) = state.newest() else {
        return LockState {
            locked: false,
            mode: Mode::Off.as_str().into(),
            reason: Some("no revision".into()),
        };
    };
    let policy = config.policy(&state.key, &newest.labels, index.registration(&state.key));
    let mode = policy.mode.as_str().to_string();
    let reason = if newest.status.is_helm_at_work() {
        Some(format!(
            "Helm is at work ({}): its objects are open until it finishes (no helm command running for it: stuck, helm rollback)",
            newest.status
        ))
    } else if !newest.status.locks() {
        Some(format!(
            "its newest revision {} is {}",
            newest.revision, newest.status
        ))
    } else if state.objects.is_none() {
        Some("its newest revision's Secret is gone: objects unknown".into())
    } else if policy.mode == Mode::Off {
        Some(format!("policy: {}", policy.unlocked_because))
    } else {
        None
    };
    LockState {
        locked: reason.is_none(),
        mode,
        reason,
    }
}

/// A value for a table: compact JSON, `(absent)` for none, long values cut in the middle.
pub(crate) fn show(value: Option<&Value>) -> String {
    const MAX: usize = 60;
    let Some(value) = value else {
        return "(absent)".into();
    };
    let text = value.to_string();
    if text.chars().count() <= MAX {
        return text;
    }
    let head: String = text.chars().take(MAX - 12).collect();
    let tail: String = text
        .chars()
        .rev()
        .take(10)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{head}…{tail}")
}

/// Rows aligned in columns (two spaces apart; the last column is not padded).
pub(crate) fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(widths[c] - cell.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::core::Status;
    use helm_locker_core::test_util::release_secret;
    use serde_json::json;

    pub(crate) const CHART: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n        resources: {limits: {cpu: \"0.5\"}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {greeting: hello}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: reader}\nrules:\n- apiGroups: [\"\"]\n  resources: [pods]\n  verbs: [get]\n";

    pub(crate) fn index(status: Status) -> Index {
        Index::from_secrets([release_secret("shop", "shop", 2, status, CHART)])
    }

    fn helm_metadata() -> Value {
        json!({"meta.helm.sh/release-name": "shop", "meta.helm.sh/release-namespace": "shop"})
    }

    pub(crate) fn live_deployment(replicas: i64, image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop",
                "labels": {"app.kubernetes.io/managed-by": "Helm"}, "annotations": helm_metadata()},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                {"name": "web", "image": image, "resources": {"limits": {"cpu": "500m"}},
                 "terminationMessagePath": "/dev/termination-log"}]}}}})
    }

    /// The chart's objects, live and unchanged (the Deployment as given).
    pub(crate) fn live(index: &Index, deployment: Value) -> LiveObjects {
        let mut live = LiveObjects::new();
        for state in index.releases() {
            for object in state.objects.iter().flatten() {
                let mut value = match &*object.kind {
                    "Deployment" => deployment.clone(),
                    _ => object.content().to_json(),
                };
                if &*object.kind != "Deployment" {
                    value["metadata"]["annotations"] = helm_metadata();
                    value["metadata"]["labels"] = json!({"app.kubernetes.io/managed-by": "Helm"});
                }
                live.insert(ObjectId::of(object), Live::Found(value));
            }
        }
        live
    }

    #[test]
    fn lock_state_says_why_a_release_is_not_locked() {
        let config = Config::default();
        let state = |status| {
            let index = index(status);
            let state = index.releases()[0].clone();
            lock_state(&index, &config, &state)
        };
        assert_eq!(
            state(Status::Deployed),
            LockState {
                locked: true,
                mode: "deny".into(),
                reason: None
            }
        );
        // A failed upgrade leaves what Helm applied locked until an upgrade or rollback works.
        let failed = state(Status::Failed);
        assert!(failed.locked, "{:?}", failed.reason);
        let pending = state(Status::PendingUpgrade);
        assert!(pending
            .reason
            .unwrap()
            .contains("Helm is at work (pending-upgrade)"));
        let off = Config {
            mode: Mode::Off,
            ..Config::default()
        };
        let index = index(Status::Deployed);
        let policy = lock_state(&index, &off, index.releases()[0]);
        assert_eq!(
            (policy.locked, policy.reason.as_deref()),
            (false, Some("policy: mode off"))
        );
    }

    #[test]
    fn long_values_are_cut_and_tables_aligned() {
        assert_eq!(show(None), "(absent)");
        assert_eq!(show(Some(&json!(3))), "3");
        let long = show(Some(&json!("x".repeat(100))));
        assert!(long.chars().count() <= 60 && long.contains('…'), "{long}");
        assert_eq!(
            table(&[
                vec!["A".into(), "BB".into(), "C".into()],
                vec!["aaa".into(), "b".into(), "".into()]
            ]),
            "A    BB  C\naaa  b\n"
        );
    }
}
