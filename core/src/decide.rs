//! The admission decision (docs/design.md, "How it decides"), as one pure function.
//!
//! Rule 7 (re-read the release before a deny) needs the API server: a [`Decision`] that would
//! block or rewrite a write says so through [`Decision::needs_confirmation`], and the server
//! calls [`confirm`] with what it read.

use std::borrow::Cow;

use serde_json::Value;

use crate::fields_v1::describe_field_path;
use crate::index::{Index, LockedObject, ReleaseKey};
use crate::ownership::{
    cross_version_changes, duplicate_keys, helm_metadata_changes, in_one_order, locked_changes,
    locked_changes_at, repair_patch, stored_form, Change,
};
use crate::policy::{Config, Mode};
use crate::release::Status;
use crate::review::{Operation, Request};
use crate::schema::Schema;

mod excuse;
mod find;
mod hand_over;
mod message;
mod read;
mod writer_rules;
pub use excuse::excuse;
pub use find::{find, Found};
use find::{Door, Resolved, Ruled};
pub use hand_over::{hand_over, hand_over_question, HandOver};
pub use message::Wording;
use message::{
    co_owner_message, creator_message, headline, message, other_version_message,
    scale_co_owner_message,
};
use read::{
    added_owner_references, co_owner_claims, creation_entries, names_release, parse_object, written,
};
pub use writer_rules::allow_by_rules;

/// Why a request was allowed.
#[derive(Clone, Debug, PartialEq)]
pub enum Allowed {
    /// Rule 1: no release owns the object.
    NotOwned,
    /// A subresource other than `scale` (status, token, eviction...): never the chart's.
    Subresource,
    /// Rule 2: Helm is changing the release (`confirmed`: seen by a fresh read, rule 7).
    HelmAtWork {
        release: ReleaseKey,
        status: Status,
        confirmed: bool,
    },
    /// Rule 3: the release is not locked (its status, or the configured mode).
    NotLocked { release: ReleaseKey, reason: String },
    /// Rule 4: an exempt identity.
    Exempt { release: ReleaseKey, user: String },
    /// Rule 6: no locked field changes away from the chart.
    NoLockedChange { release: ReleaseKey },
    /// The release renders the object, but the stored object (a CREATE's object) does not
    /// carry the release's `meta.helm.sh/release-name`/`-namespace` annotations: Helm neither
    /// made nor adopted it, so the release's word does not reach it (a release Secret is
    /// written by whoever may create Secrets in its namespace).
    Unproven { release: ReleaseKey },
    /// An open LockException lets this user make this write ([`crate::exception::excuse`]).
    Excepted {
        release: ReleaseKey,
        /// `namespace/name` of the LockException.
        exception: String,
        user: String,
        reason: String,
        /// When it closes (Unix seconds).
        until: i64,
    },
    /// The mutating endpoint only repairs; denials and warnings are the validating one's.
    LeftToValidation,
    /// Writer rules give this writer every locked path the write changes ([`allow_by_rules`]);
    /// the write is let through with `warning`, which names the rules.
    ByRule {
        release: ReleaseKey,
        /// The ids of the rules that cover the write, in the order of its paths.
        rules: Vec<String>,
        user: String,
        /// The changed paths, keyed ([`Locked::keyed_paths`]).
        paths: Vec<String>,
        /// The admission warning: the object, the rules and their reasons, the paths.
        warning: String,
    },
    /// A release at work takes the object over from the release that holds it, and its author
    /// could uninstall that release ([`hand_over`]).
    HandedOver {
        from: ReleaseKey,
        to: ReleaseKey,
        /// The author of `to`'s newest revision.
        author: String,
    },
}

/// A write that touches a locked object's locked fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Locked {
    pub release: ReleaseKey,
    pub revision: u64,
    pub status: Status,
    /// `Deployment shop/shop-web`, `ClusterRole shop-reader`.
    pub object: String,
    /// The locked object itself (the parent of a subresource), as the chart names it.
    pub target: Target,
    pub delete: bool,
    pub changes: Vec<Change>,
    /// Each change's path in keyed form ([`crate::writer_rule::keyed_path`]), parallel to
    /// `changes`: a map-list item named by its keys (`/spec/template/spec/containers/[name=web]/image`),
    /// what a writer rule's paths name and what learning records.
    pub keyed_paths: Vec<String>,
    pub message: String,
    /// Whether the request showed that the stored object is the release's.
    pub proof: OwnerProof,
    /// How `message` was worded from `changes` (rule 6's message, which can be worded again for
    /// fewer changes); `None` for a message of its own (a delete, another version, an owner
    /// reference, a co-owner), which only a rule covering every path lifts.
    pub wording: Option<Wording>,
}

/// What shows that a locked object is the release's: Helm writes the release's
/// `meta.helm.sh/release-name` and `-namespace` annotations on every object it creates or
/// adopts, and only those who may write the object can put them there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerProof {
    /// The stored object (`oldObject`) names the release; for a CREATE, the new object does,
    /// or it is created in the release's own namespace.
    Shown,
    /// The request holds no metadata of the stored object (a `Scale`, an `Eviction`): the
    /// server reads the object's annotations before a deny stands ([`prove`]).
    ToRead,
}

impl Locked {
    /// `Deployment shop/web is locked by Helm release shop/shop (revision 2, deployed)`: how
    /// every message about a locked object begins.
    fn headline(&self) -> String {
        headline(&self.object, &self.release, self.revision, self.status)
    }

    /// Appends where the chart (`files`, of this revision) sets each changed field and the
    /// `helm upgrade --set` that changes it ([`crate::trace::advice`]). A Secret's values stay
    /// out of the command.
    pub fn add_chart_advice(&mut self, files: &crate::chart::ChartFiles) {
        if let Some(advice) = self.chart_advice(files) {
            self.append_advice(&advice);
        }
    }

    /// What [`Locked::add_chart_advice`] appends: where the chart sets each changed field and
    /// the `helm upgrade` that changes it. The same for every denial of the same change to
    /// the same revision, so a caller may keep it.
    pub fn chart_advice(&self, files: &crate::chart::ChartFiles) -> Option<String> {
        let target = &self.target;
        let hide_values = target.api_version == "v1" && target.kind == "Secret";
        crate::trace::advice(
            files,
            &self.release,
            &target.kind,
            &target.name,
            &self.changes,
            hide_values,
        )
    }

    /// Appends advice made by [`Locked::chart_advice`] to the message.
    pub fn append_advice(&mut self, advice: &str) {
        self.message = format!("{} {advice}", self.message);
    }
}

/// Which object a decision is about.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub api_version: String,
    pub kind: String,
    /// `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    pub name: String,
}

/// A [`Decision`] without its reasons: the `decision` label of the metrics and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecisionKind {
    Allow,
    Deny,
    Warn,
    Repair,
}

impl DecisionKind {
    /// Every kind, in the order of the admission metric's series.
    pub const ALL: [DecisionKind; 4] = [
        DecisionKind::Allow,
        DecisionKind::Deny,
        DecisionKind::Warn,
        DecisionKind::Repair,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Allow => "allow",
            DecisionKind::Deny => "deny",
            DecisionKind::Warn => "warn",
            DecisionKind::Repair => "repair",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    Allow(Allowed),
    Deny(Locked),
    /// Allowed, with the message as an admission warning.
    Warn(Locked),
    /// Allowed with a patch that puts the locked fields back (repair mode).
    Repair(Locked, json_patch::Patch),
}

impl Decision {
    /// A denial, warning or repair that names changed fields: its message can also say where
    /// the chart sets them ([`Locked::add_chart_advice`]).
    pub fn traceable(&mut self) -> Option<&mut Locked> {
        match self {
            Decision::Deny(l) | Decision::Warn(l) | Decision::Repair(l, _)
                if !l.delete && !l.changes.is_empty() =>
            {
                Some(l)
            }
            _ => None,
        }
    }

    /// What the AdmissionReview response says for this decision.
    pub fn verdict(&self) -> crate::review::Verdict<'_> {
        use crate::review::Verdict;
        match self {
            Decision::Allow(Allowed::ByRule { warning, .. }) => Verdict::Warn(warning),
            Decision::Allow(_) => Verdict::Allow,
            Decision::Deny(l) => Verdict::Deny(&l.message),
            Decision::Warn(l) => Verdict::Warn(&l.message),
            Decision::Repair(l, patch) => Verdict::Patch(&l.message, patch),
        }
    }

    pub fn is_allowed(&self) -> bool {
        !matches!(self, Decision::Deny(_))
    }

    /// The release to re-read before this decision is sent (rule 7): a deny or a repair
    /// would fight Helm if the release just turned pending.
    pub fn needs_confirmation(&self) -> Option<&ReleaseKey> {
        match self {
            Decision::Deny(l) | Decision::Repair(l, _) => Some(&l.release),
            _ => None,
        }
    }

    /// What the validating endpoint answers: a repair that did not happen (the mutating webhook
    /// is not registered, or ran before the release was locked) is denied.
    pub fn for_validation(self) -> Decision {
        match self {
            Decision::Repair(locked, _) => Decision::Deny(locked),
            other => other,
        }
    }

    /// What the mutating endpoint answers: only repairs; everything else is allowed here and
    /// judged by the validating endpoint.
    pub fn for_mutation(self) -> Decision {
        match self {
            Decision::Deny(_) | Decision::Warn(_) => Decision::Allow(Allowed::LeftToValidation),
            other => other,
        }
    }

    /// What it is, without its reasons.
    pub fn kind(&self) -> DecisionKind {
        match self {
            Decision::Allow(_) => DecisionKind::Allow,
            Decision::Deny(_) => DecisionKind::Deny,
            Decision::Warn(_) => DecisionKind::Warn,
            Decision::Repair(..) => DecisionKind::Repair,
        }
    }

    /// A short name for logs and metrics: its [`DecisionKind`]'s.
    pub fn label(&self) -> &'static str {
        self.kind().as_str()
    }

    /// What decided, as a stable word and whom or what it names, for the admission span: the
    /// rule that allowed (`not_owned`, `exempt` and the user, `lock_exception` and the
    /// LockException, `writer_rule` and the rules, `hand_over` and the releases...), or
    /// `locked` and the release whose lock denies, warns or repairs.
    pub fn decided_by(&self) -> (&'static str, Option<String>) {
        let allowed = match self {
            Decision::Deny(l) | Decision::Warn(l) | Decision::Repair(l, _) => {
                return ("locked", Some(l.release.to_string()))
            }
            Decision::Allow(allowed) => allowed,
        };
        match allowed {
            Allowed::NotOwned => ("not_owned", None),
            Allowed::Subresource => ("subresource", None),
            Allowed::HelmAtWork { release, .. } => ("helm_at_work", Some(release.to_string())),
            Allowed::NotLocked { release, .. } => ("not_locked", Some(release.to_string())),
            Allowed::Exempt { user, .. } => ("exempt", Some(user.clone())),
            Allowed::NoLockedChange { release } => ("no_locked_change", Some(release.to_string())),
            Allowed::Unproven { release } => ("unproven", Some(release.to_string())),
            Allowed::Excepted { exception, .. } => ("lock_exception", Some(exception.clone())),
            Allowed::LeftToValidation => ("left_to_validation", None),
            Allowed::ByRule { rules, .. } => ("writer_rule", Some(rules.join(","))),
            Allowed::HandedOver { from, to, .. } => ("hand_over", Some(format!("{from} -> {to}"))),
        }
    }

    /// One sentence on why, for `review --explain` and debug logs.
    pub fn explain(&self) -> String {
        match self {
            Decision::Allow(Allowed::NotOwned) => {
                "allowed: no Helm release owns this object".into()
            }
            Decision::Allow(Allowed::Subresource) => {
                "allowed: this subresource is not locked (only scale, and metadata through status, are)".into()
            }
            Decision::Allow(Allowed::HelmAtWork {
                release, status, ..
            }) => {
                format!("allowed: Helm is working on release {release} ({status})")
            }
            Decision::Allow(Allowed::NotLocked { release, reason }) => {
                format!("allowed: release {release} is not locked ({reason})")
            }
            Decision::Allow(Allowed::Exempt { release, user }) => {
                format!("allowed: {user} is exempt from the lock of release {release}")
            }
            Decision::Allow(Allowed::NoLockedChange { release }) => {
                format!("allowed: the object belongs to release {release}, but no field the chart sets changes")
            }
            Decision::Allow(Allowed::Excepted {
                release,
                exception,
                user,
                reason,
                ..
            }) => {
                format!("allowed: LockException {exception} opens release {release} to {user} ({reason})")
            }
            Decision::Allow(Allowed::ByRule { warning, .. }) => {
                format!("allowed by a writer rule: {warning}")
            }
            Decision::Allow(Allowed::Unproven { release }) => {
                format!("allowed: release {release} renders this object, but the object does not carry the release's meta.helm.sh annotations (Helm neither made nor adopted it)")
            }
            Decision::Allow(Allowed::LeftToValidation) => {
                "allowed here: the validating webhook decides".into()
            }
            Decision::Allow(Allowed::HandedOver { from, to, author }) => {
                format!("allowed: release {to} (Helm at work) takes this object over from release {from}; its author {author} may delete {from}'s Secrets, so could uninstall it")
            }
            Decision::Deny(l) => format!("denied: {}", l.message),
            Decision::Warn(l) => format!("allowed with a warning: {}", l.message),
            Decision::Repair(l, _) => format!("allowed with locked fields put back: {}", l.message),
        }
    }
}

/// The object's annotations as the server read them from the API server, for a decision whose
/// request could not show them ([`OwnerProof::ToRead`]): a deny (or repair) stands only when
/// they name the release. `read`: the release they name, `None` when the object carries none
/// or is gone.
pub fn prove(decision: Decision, read: Option<&ReleaseKey>) -> Decision {
    match &decision {
        Decision::Deny(l) | Decision::Warn(l) | Decision::Repair(l, _)
            if l.proof == OwnerProof::ToRead && !read.is_some_and(|r| r.is(&l.release)) =>
        {
            Decision::Allow(Allowed::Unproven {
                release: l.release.clone(),
            })
        }
        _ => decision,
    }
}

/// Rule 7: the fresh status of the release decides whether a deny (or repair) stands.
pub fn confirm(decision: Decision, fresh_status: Option<Status>) -> Decision {
    match (&decision, fresh_status) {
        (Decision::Deny(l) | Decision::Repair(l, _), Some(status)) if status.is_helm_at_work() => {
            Decision::Allow(Allowed::HelmAtWork {
                release: l.release.clone(),
                status,
                confirmed: true,
            })
        }
        _ => decision,
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DecideError {
    #[error("request.{field} is not a JSON object: {reason}")]
    BadObject { field: &'static str, reason: String },
}

/// Decides one admission request: finds the locked object ([`find`]), then [`decide_found`].
pub fn decide(
    index: &Index,
    schema: &Schema,
    config: &Config,
    request: &Request<'_>,
) -> Result<Decision, DecideError> {
    decide_found(index, schema, config, request, find(index, schema, request))
}

/// Decides a whole review about what [`find`] found from its head: the lock on the object
/// (rules 2 to 4, unless [`Found::check_user`] checked them already, and the owner's proof,
/// [`Lock::of`]), then what the write changes of what Helm owns ([`Lock::changes`]) and the
/// verdict.
pub fn decide_found<'i>(
    index: &'i Index,
    schema: &Schema,
    config: &'i Config,
    request: &Request<'_>,
    found: Found<'i>,
) -> Result<Decision, DecideError> {
    let (mut object, door, ruled, others) = match found.resolve(index, schema, request)? {
        Resolved::Free(allowed) => return Ok(Decision::Allow(allowed)),
        Resolved::Object {
            object,
            door,
            ruled,
            others,
        } => (object, door, ruled, others),
    };
    let ruled = match ruled.map_or_else(|| Lock::rules(index, config, request, object), Ok) {
        Ok(ruled) => ruled,
        // Whose the object is was not read: a claim that is perhaps not the owner's frees
        // nothing while another claim locks it (the stored object's annotations decide whether
        // a denial stands, [`prove`]).
        Err(allowed) => match others
            .into_iter()
            .find_map(|other| Some((other, Lock::rules(index, config, request, other).ok()?)))
        {
            Some((other, ruled)) => {
                object = other;
                ruled
            }
            None => return Ok(Decision::Allow(*allowed)),
        },
    };
    let lock = match Lock::of(config, request, object, door, ruled) {
        Ok(lock) => lock,
        Err(allowed) => return Ok(Decision::Allow(*allowed)),
    };
    if request.operation == Operation::Delete || door.evict {
        return Ok(lock.delete());
    }
    let (new, old) = written(request, door.scale)?;
    let compared = Compared::of(schema, &lock);
    let mut decision = decide_written(schema, config, &lock, &compared, &new, old.as_ref())?;
    if let Decision::Deny(l) | Decision::Warn(l) | Decision::Repair(l, _) = &mut decision {
        l.keyed_paths = l
            .changes
            .iter()
            .map(|c| crate::writer_rule::keyed_path(schema, compared.root, &new, &c.path))
            .collect();
    }
    Ok(decision)
}

/// Rules 6 and on, once the written objects are read: what the write changes of what Helm owns,
/// and the verdict.
fn decide_written(
    schema: &Schema,
    config: &Config,
    lock: &Lock<'_>,
    compared: &Compared<'_>,
    new: &Value,
    old: Option<&Value>,
) -> Result<Decision, DecideError> {
    let (request, door) = (lock.request, lock.door);
    let changes = match lock.changes(schema, compared, new, old) {
        Ok(changes) => changes,
        Err(decision) => return Ok(*decision),
    };
    if !door.scale {
        if let Some(decision) = lock.added_owners(compared, new, old) {
            return Ok(decision);
        }
    }
    // Who owns a field is kept only by a write that is stored: a dry run (Flux's drift
    // detection applies the whole chart as `helm-controller` with `dryRun` on every reconcile)
    // makes nobody a co-owner, so only the values it would write can be locked.
    let stored = request.dry_run != Some(true);
    if changes.is_empty() && !door.scale && stored {
        if let Some(decision) = lock.co_owner(schema, compared) {
            return Ok(decision);
        }
        // A restore of what Helm wrote by another manager makes it co-own Helm's fields: allowed
        // when the reverter hands them back to Helm, else the next upgrade would conflict.
        if request.operation == Operation::Create && lock.server_side && !config.ownership_returned
        {
            if let Some(decision) = lock.creator(schema, compared) {
                return Ok(decision);
            }
        }
    }
    if changes.is_empty() && door.scale && lock.server_side && stored {
        if let Some(decision) = lock.scale_co_owner(schema, compared) {
            return Ok(decision);
        }
    }
    if changes.is_empty() {
        return Ok(Decision::Allow(Allowed::NoLockedChange {
            release: lock.release.clone(),
        }));
    }
    lock.verdict(changes)
}

/// A write to an object of a locked release, by someone the lock applies to.
struct Lock<'a> {
    request: &'a Request<'a>,
    object: &'a std::sync::Arc<LockedObject>,
    release: ReleaseKey,
    revision: u64,
    status: Status,
    policy: crate::policy::Policy<'a>,
    door: Door,
    proof: OwnerProof,
    /// The release is applied with server-side apply (Helm 4, `apply_method: ssa`): its next
    /// upgrade conflicts with any other field manager of the chart's fields.
    server_side: bool,
    /// The kind's unordered sets are compared in one order
    /// ([`crate::ownership::in_one_order`]): always on a client-side release, whose next upgrade
    /// replaces them; on a server-side one while the reverter hands a writer's share of Helm's
    /// fields back (another order taken by another manager would conflict with Helm's apply).
    one_order: bool,
}

/// What a write is compared with: the chart's object as stored, its schema type, the ignored
/// paths.
struct Compared<'a> {
    content: std::rc::Rc<crate::tree::Tree>,
    root: crate::schema::TypeId,
    ignore: Vec<&'a str>,
}

impl<'a> Compared<'a> {
    fn of(schema: &Schema, lock: &Lock<'a>) -> Self {
        let object = lock.object;
        Compared {
            content: object.recent_content(),
            root: schema.root_of(&object.group, &object.version, &object.kind),
            ignore: lock.policy.ignored_paths(object),
        }
    }
}

impl<'a> Lock<'a> {
    /// Rules 2 to 4, and the object's proof that it is the release's: the lock, or why the
    /// write is free.
    fn of(
        config: &'a Config,
        request: &'a Request<'a>,
        object: &'a std::sync::Arc<LockedObject>,
        door: Door,
        (release, newest, policy): Ruled<'a>,
    ) -> Result<Lock<'a>, Box<Allowed>> {
        // A document that does not read on first need locks nothing, as one skipped at start.
        if !matches!(*object.recent_content(), crate::tree::Tree::Map(_)) {
            return Err(Box::new(Allowed::NotLocked {
                release,
                reason: format!(
                    "its chart document for {} could not be read",
                    object.describe()
                ),
            }));
        }
        // The object proves its owner: only an object that carries the release's annotations
        // is the release's (Helm's own rule for adoption). A CREATE has no stored object: the
        // new one claims the release, or is made in the release's own namespace, where the
        // release Secret's author could write it herself; anywhere else a release must not
        // block others.
        let proof = if door.scale || door.evict {
            OwnerProof::ToRead
        } else {
            let (stored, create) = match request.operation {
                Operation::Create => (request.object(), true),
                _ => (request.old_object().or(request.object()), false),
            };
            let in_own_namespace = create
                && request.namespace() == Some(release.namespace.as_str())
                && object.namespace.is_some();
            if !in_own_namespace && !names_release(stored, &release) {
                return Err(Box::new(Allowed::Unproven { release }));
            }
            OwnerProof::Shown
        };
        Ok(Lock {
            request,
            object,
            release,
            revision: newest.revision,
            status: newest.status,
            policy,
            door,
            proof,
            server_side: newest.apply_method.as_deref() == Some("ssa"),
            one_order: crate::ownership::has_unordered_sets(&object.group, &object.kind)
                && (newest.apply_method.as_deref() != Some("ssa") || config.ownership_returned),
        })
    }

    /// Rules 2 to 4, which neither object is needed for: Helm at work, a release not locked
    /// (its status, or the configured mode), an exempt user. The release, its newest revision
    /// and its policy when none of them frees the write.
    fn rules(
        index: &'a Index,
        config: &'a Config,
        request: &Request<'_>,
        object: &std::sync::Arc<LockedObject>,
    ) -> Result<Ruled<'a>, Box<Allowed>> {
        let release = ReleaseKey::clone(&object.release);
        let newest = index
            .release(&release)
            .and_then(|state| state.newest())
            .ok_or_else(|| Box::new(Allowed::NotOwned))?;
        if newest.status.is_helm_at_work() {
            return Err(Box::new(Allowed::HelmAtWork {
                release,
                status: newest.status,
                confirmed: false,
            }));
        }
        if !newest.status.locks() {
            let reason = format!(
                "its newest revision {} is {}",
                newest.revision, newest.status
            );
            return Err(Box::new(Allowed::NotLocked { release, reason }));
        }
        let policy = config.policy(&release, &newest.labels, index.registration(&release));
        if policy.mode == Mode::Off {
            return Err(Box::new(Allowed::NotLocked {
                release,
                reason: policy.unlocked_because,
            }));
        }
        let user = &request.user_info;
        if policy.exempts(&user.username, &user.groups) {
            return Err(Box::new(Allowed::Exempt {
                release,
                user: user.username.to_string(),
            }));
        }
        Ok((release, newest, policy))
    }

    fn mode(&self) -> Mode {
        self.policy.mode
    }

    /// (name, namespace) of the release, as Helm writes them in its annotations.
    fn helm(&self) -> (&str, &str) {
        (self.release.name.as_str(), self.release.namespace.as_str())
    }

    /// The decision's account of the write. Built only for a write that is not simply
    /// allowed (most locked writes are).
    fn locked(&self, delete: bool, changes: Vec<Change>) -> Locked {
        let (object, request) = (self.object, self.request);
        // A kind of unknown scope is indexed in a namespace too; the API server says it is
        // cluster-scoped by sending no namespace.
        let describe = match request.namespace() {
            None => format!("{} {}", object.kind, object.name),
            Some(_) => object.describe(),
        };
        // A Secret's values stay out of the message: it reaches users who may write the Secret
        // without being allowed to read it, kubectl's output and the API server's audit log.
        let hide_values = object.group.is_empty() && object.kind.eq_ignore_ascii_case("Secret");
        let wording = Wording {
            hide_values,
            scale: self.door.scale,
        };
        let message = message(
            &describe,
            &self.release,
            self.revision,
            self.status,
            delete,
            &changes,
            wording,
        );
        Locked {
            release: self.release.clone(),
            revision: self.revision,
            status: self.status,
            object: describe,
            target: Target {
                api_version: object.api_version(),
                kind: object.kind.to_string(),
                namespace: request
                    .namespace()
                    .and(object.namespace.as_deref())
                    .map(str::to_string),
                name: object.name.to_string(),
            },
            delete,
            keyed_paths: changes.iter().map(|c| c.path.clone()).collect(),
            changes,
            message,
            proof: self.proof,
            wording: (!delete).then_some(wording),
        }
    }

    /// Rule 5: a DELETE (or an eviction, which deletes the Pod).
    fn delete(&self) -> Decision {
        let mut l = self.locked(true, Vec::new());
        if self.door.evict {
            l.wording = None;
            l.message = format!(
                "{}: evicting it deletes it, which is not allowed. Remove it from the chart and run helm upgrade, or ask an admin (a node drain by an exempt user goes through).",
                l.headline()
            );
        }
        unrepairable(self.mode(), l)
    }

    /// Rule 6: the locked paths the write changes away from the chart, by the door it comes
    /// through; a write through another version than the chart's is decided here.
    fn changes(
        &self,
        schema: &Schema,
        compared: &Compared<'_>,
        new: &Value,
        old: Option<&Value>,
    ) -> Result<Vec<Change>, Box<Decision>> {
        let (object, request, door) = (self.object, self.request, self.door);
        let chart = stored_form(&compared.content, &object.group, &object.kind);
        let (chart, new, old) = if self.one_order {
            let (group, kind) = (&*object.group, &*object.kind);
            (
                crate::ownership::chart_in_one_order(group, kind, chart),
                in_one_order(group, kind, new),
                old.map(|old| in_one_order(group, kind, old)),
            )
        } else {
            (chart, Cow::Borrowed(new), old.map(Cow::Borrowed))
        };
        let (new, old) = (new.as_ref(), old.as_deref());
        let (root, ignore, helm) = (compared.root, &compared.ignore[..], self.helm());
        // The same object through another version, or another group serving it (`extensions`).
        let other_version = !door.scale
            && !door.status
            && (request.kind.version != *object.version || request.kind.group != *object.group);
        if door.scale {
            let pointer = schema.replicas_pointer(&object.group, &object.kind);
            return Ok(locked_changes_at(
                schema,
                root,
                &chart,
                (pointer, "/spec/replicas"),
                new,
                old,
                ignore,
            ));
        }
        let mut changes = if door.status {
            let metadata = crate::ownership::metadata_of(&chart);
            locked_changes(schema, root, &metadata, new, old, ignore)
        } else if other_version {
            let requested =
                crate::manifest::api_version(&request.kind.group, &request.kind.version);
            let root = schema.root_or_deduced(&requested, &request.kind.kind);
            // A CREATE (a restore through another version) is looked for at the chart's paths
            // in the requested version: where the versions agree on a field's path (PDB and
            // RBAC v1beta1/v1, Ingress between `extensions` and `networking.k8s.io`) the same
            // content is no change; where a version moved a field (Ingress v1's
            // `backend.service.name` for v1beta1's `serviceName`) the chart's field is missing,
            // and the create is denied. An UPDATE has a stored object to compare with instead.
            let mut changes = if old.is_none() {
                locked_changes(schema, root, &chart, new, None, ignore)
            } else {
                cross_version_changes(schema, root, &chart, new, old, ignore)
            };
            changes.extend(crate::ownership::conversion_annotation_changes(
                &chart,
                &object.group,
                &object.kind,
                &request.kind.version,
                new,
                old,
                ignore,
            ));
            changes
        } else {
            locked_changes(schema, root, &chart, new, old, ignore)
        };
        changes.extend(helm_metadata_changes(&chart, helm, new, old, ignore));
        if other_version {
            if changes.is_empty() {
                return Ok(changes);
            }
            let mut l = self.locked(false, changes);
            let requested =
                crate::manifest::api_version(&request.kind.group, &request.kind.version);
            l.wording = None;
            l.message = other_version_message(&l, &requested, &object.api_version());
            // Nothing to repair toward: the chart's values are in another version's shape.
            return Err(Box::new(unrepairable(self.mode(), l)));
        }
        if !door.status {
            // A repeated key anywhere (an item the chart does not set included) makes the
            // object unreadable to server-side apply: the next helm upgrade would fail.
            for change in duplicate_keys(schema, root, new, old) {
                if !changes.iter().any(|c| c.path == change.path)
                    && !crate::ownership::is_ignored(&change.path, ignore)
                {
                    changes.push(change);
                }
            }
        }
        Ok(changes)
    }

    /// An owner reference the chart does not give lets the (exempt) garbage collector delete
    /// the object once that owner is gone: adding one is a delete by other means.
    fn added_owners(
        &self,
        compared: &Compared<'_>,
        new: &Value,
        old: Option<&Value>,
    ) -> Option<Decision> {
        let added = added_owner_references(&compared.content, new, old);
        if added.is_empty() {
            return None;
        }
        let changes: Vec<Change> = added
            .into_iter()
            .map(|(i, reference)| Change {
                path: format!("/metadata/ownerReferences/{i}"),
                chart: Value::Null,
                requested: Some(reference),
            })
            .collect();
        let mut l = self.locked(false, changes);
        l.wording = None;
        l.message = format!(
            "{}: this request adds an owner reference the chart does not set ({}), which lets the garbage collector delete the object; that is deleting it, which is not allowed. Set owners in the chart and run helm upgrade, or ask an admin.",
            l.headline(),
            l.changes.iter().map(|c| c.path.as_str()).collect::<Vec<_>>().join(", ")
        );
        Some(match self.mode() {
            Mode::Repair => {
                let patch = repair_patch(&l.changes);
                Decision::Repair(l, patch)
            }
            mode => unrepairable(mode, l),
        })
    }

    /// Values unchanged, but a server-side apply may still take co-ownership of Helm's fields.
    fn co_owner(&self, schema: &Schema, compared: &Compared<'_>) -> Option<Decision> {
        let request = self.request;
        let manager = request
            .options
            .as_ref()
            .and_then(|o| o.field_manager.as_deref())?;
        // No entry of that manager can exist unless its name is somewhere in the object's text
        // (API servers write it as a JSON string): most writes are not server-side applies.
        let applied = request.object().is_some_and(|o| {
            crate::scan::may_contain_string(o.get(), manager) && o.get().contains("\"Apply\"")
        });
        if !applied {
            return None;
        }
        // The chart as Helm applies it, not its stored form: Helm's entry owns a Secret's
        // `stringData`, never the `data` the API server stores it as.
        let mut shared = co_owner_claims(
            schema,
            compared.root,
            &compared.content,
            self.helm(),
            manager,
            request,
        );
        shared.retain(|p| !crate::ownership::is_ignored(&describe_field_path(p), &compared.ignore));
        if shared.is_empty() {
            return None;
        }
        let mut l = self.locked(false, Vec::new());
        l.wording = None;
        l.message = co_owner_message(&l, manager, &shared);
        Some(unrepairable(self.mode(), l))
    }

    /// A write through `/scale` that leaves the chart's replicas as they are but names a field
    /// manager. From Kubernetes 1.22 the API server keeps managedFields for `/scale` writes (an
    /// entry with `subresource: scale`, which Helm's conflicts name), so a server-side apply
    /// there makes its manager a co-owner of the replicas Helm owns, and the next `helm upgrade`
    /// that changes them fails with a conflict. Admission cannot tell that apply from a merge
    /// patch: the Scale it is sent carries no managedFields, and every patch arrives with
    /// `UpdateOptions`. So any such write that names a manager is denied; a merge patch to the
    /// same value would change nothing anyway. `kubectl scale` names none (both recordings),
    /// and an update to the same value makes no owner. (On 1.20 a `/scale` write keeps no
    /// managedFields at all, measured: there the apply is harmless, and denied all the same.)
    fn scale_co_owner(&self, schema: &Schema, compared: &Compared<'_>) -> Option<Decision> {
        let manager = self.request.field_manager()?;
        let chart = stored_form(&compared.content, &self.object.group, &self.object.kind);
        let pointer = schema.replicas_pointer(&self.object.group, &self.object.kind);
        let value = chart.pointer(pointer)?;
        if value.is_empty_value() || crate::ownership::is_ignored(pointer, &compared.ignore) {
            return None;
        }
        let mut l = self.locked(false, Vec::new());
        l.wording = None;
        l.message = scale_co_owner_message(&l, manager, pointer);
        Some(unrepairable(self.mode(), l))
    }

    /// A CREATE gives every field it sets to the field manager that made it (measured on
    /// kube-apiserver 1.20: `kubectl create` of the chart's own content leaves an entry of
    /// `kubectl-create`, and any managedFields sent along are replaced). Unless that is Helm's
    /// own server-side apply, the creator co-owns the chart's fields, and the next `helm upgrade`
    /// that changes one fails with `conflict with "kubectl-create"`. Helm's entry is an `Apply`
    /// entry that owns the release annotation, as in [`co_owner_claims`].
    fn creator(&self, schema: &Schema, compared: &Compared<'_>) -> Option<Decision> {
        let entries = creation_entries(self.request.object()?.get())?;
        let chart = stored_form(&compared.content, &self.object.group, &self.object.kind);
        for entry in entries {
            let fields = entry.fields.unwrap_or(Value::Null);
            let helms = entry.operation.as_deref() == Some("Apply")
                && fields
                    .pointer("/f:metadata/f:annotations/f:meta.helm.sh~1release-name")
                    .is_some();
            if helms {
                continue;
            }
            let claimed = crate::fields_v1::parse_fields_v1(&fields);
            let mut shared = crate::fields_v1::co_owned_paths(
                schema,
                compared.root,
                &chart,
                self.helm(),
                &claimed,
                &Default::default(),
            );
            shared.retain(|p| {
                !crate::ownership::is_ignored(&describe_field_path(p), &compared.ignore)
            });
            if !shared.is_empty() {
                let manager = entry.manager.unwrap_or_default();
                let mut l = self.locked(false, Vec::new());
                l.wording = None;
                l.message = creator_message(&l, &manager, &shared);
                return Some(unrepairable(self.mode(), l));
            }
        }
        None
    }

    /// Rule 6's verdict on changed locked paths, by mode.
    fn verdict(&self, changes: Vec<Change>) -> Result<Decision, DecideError> {
        let l = self.locked(false, changes);
        Ok(match self.mode() {
            Mode::Warn => Decision::Warn(l),
            Mode::Repair => {
                let patch = if self.door.scale {
                    // The change names the chart's path (a custom resource's
                    // `specReplicasPath`); the request is a Scale, with the value at
                    // `/spec/replicas`.
                    let at_scale: Vec<Change> = l
                        .changes
                        .iter()
                        .map(|c| Change {
                            path: "/spec/replicas".to_string(),
                            ..c.clone()
                        })
                        .collect();
                    repair_patch(&at_scale)
                } else {
                    repair_patch(&l.changes)
                };
                // A patch that does not apply would fail the write with the API server's opaque
                // error. Only malformed writes get one (a scale request without `spec`): deny
                // them. The whole object: the patch must apply to what the API server will
                // store.
                let mut repaired =
                    parse_object(self.request.object(), "object")?.unwrap_or(Value::Null);
                if json_patch::patch(&mut repaired, &patch).is_ok() {
                    Decision::Repair(l, patch)
                } else {
                    Decision::Deny(l)
                }
            }
            Mode::Deny | Mode::Off => Decision::Deny(l),
        })
    }
}

/// What a locked write gets when nothing can repair it: a warning in `warn` mode, else a deny.
fn unrepairable(mode: Mode, locked: Locked) -> Decision {
    match mode {
        Mode::Warn => Decision::Warn(locked),
        _ => Decision::Deny(locked),
    }
}

#[cfg(test)]
mod tests;
