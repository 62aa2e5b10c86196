//! The admission decision (DESIGN.md "Decision rules" 1 to 6), as one pure function.
//!
//! Rule 7 (re-read the release before a deny) needs the API server: a [`Decision`] that would
//! block or rewrite a write says so through [`Decision::needs_confirmation`], and the server
//! calls [`confirm`] with what it read.

use std::borrow::Cow;

use serde_json::Value;

use crate::fields_v1::describe_field_path;
use crate::index::{Index, LockedObject, ReleaseKey};
use crate::ownership::{
    cross_version_changes, duplicate_keys, helm_metadata_changes, locked_changes,
    locked_changes_at, repair_patch, stored_form, Change,
};
use crate::policy::{Config, Mode};
use crate::release::{describe_json_error, Status};
use crate::review::{Operation, Request};
use crate::schema::Schema;

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
    pub message: String,
    /// Whether the request showed that the stored object is the release's.
    pub proof: OwnerProof,
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
        let target = &self.target;
        let hide_values = target.api_version == "v1" && target.kind == "Secret";
        if let Some(advice) = crate::trace::advice(
            files,
            &self.release,
            &target.kind,
            &target.name,
            &self.changes,
            hide_values,
        ) {
            self.message = format!("{} {advice}", self.message);
        }
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

    /// A short name for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Decision::Allow(_) => "allow",
            Decision::Deny(_) => "deny",
            Decision::Warn(_) => "warn",
            Decision::Repair(..) => "repair",
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
            Decision::Allow(Allowed::Unproven { release }) => {
                format!("allowed: release {release} renders this object, but the object does not carry the release's meta.helm.sh annotations (Helm neither made nor adopted it)")
            }
            Decision::Allow(Allowed::LeftToValidation) => {
                "allowed here: the validating webhook decides".into()
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
            if l.proof == OwnerProof::ToRead && read != Some(&l.release) =>
        {
            Decision::Allow(Allowed::Unproven {
                release: l.release.clone(),
            })
        }
        _ => decision,
    }
}

/// A denial, warning or repair that an open LockException covers becomes an allow naming it
/// (the first that covers, by name); any other decision stands. `exceptions` are the release's
/// ([`Index::exceptions`]), `now` in Unix seconds.
pub fn excuse(
    decision: Decision,
    exceptions: &[&crate::exception::Exception],
    user: &str,
    groups: &[impl AsRef<str>],
    now: i64,
) -> Decision {
    let (Decision::Deny(l) | Decision::Warn(l) | Decision::Repair(l, _)) = &decision else {
        return decision;
    };
    let write = crate::exception::Write {
        release: &l.release,
        kind: &l.target.kind,
        name: &l.target.name,
        delete: l.delete,
        paths: l.changes.iter().map(|c| c.path.as_str()).collect(),
    };
    let mut open: Vec<&crate::exception::Exception> = exceptions
        .iter()
        .copied()
        .filter(|e| e.is_open(now) && e.covers(&write, user, groups))
        .collect();
    open.sort_by(|a, b| a.name.cmp(&b.name));
    match open.first() {
        Some(e) => Decision::Allow(Allowed::Excepted {
            release: l.release.clone(),
            exception: e.name.clone(),
            user: user.to_string(),
            reason: e.reason.clone(),
            until: e.until,
        }),
        None => decision,
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

/// Which part of a locked object a request writes.
#[derive(Clone, Copy)]
struct Door {
    /// `scale`: the parent's replicas.
    scale: bool,
    /// `status`: compared on metadata.
    status: bool,
    /// `pods/eviction`: a delete.
    evict: bool,
}

enum Located<'i> {
    /// Decided before reading the object.
    Answered(Allowed),
    Locked(&'i std::sync::Arc<LockedObject>, Door),
}

/// The locked object a request writes, and through which door; or the answer when there is
/// none to find.
fn locate<'i>(
    index: &'i Index,
    schema: &Schema,
    request: &Request<'_>,
) -> Result<Located<'i>, DecideError> {
    if request.operation == Operation::Connect {
        return Ok(Located::Answered(Allowed::NotOwned));
    }
    // `scale` writes the parent's /spec/replicas; `status` keeps the metadata it is sent for
    // several kinds (measured on kube-apiserver 1.20: a Service's and a Namespace's labels and
    // annotations, a Deployment's annotations), so metadata is compared there (the review's
    // object already holds what will be stored); an eviction deletes the Pod.
    let door = |scale, status, evict| Door {
        scale,
        status,
        evict,
    };
    let door = match request.sub_resource() {
        // `namespaces/finalize` keeps all metadata and `spec.finalizers` it is sent (measured on
        // 1.20, docs/subresources.md): compared like a write of the object itself.
        None | Some("finalize") => door(false, false, false),
        // `pods/resize` (Kubernetes 1.33+, in-place resize) writes the containers' `resources`
        // (and `resizePolicy`) of a Pod; a chart's bare Pod sets them. The Pod's own update may
        // not change them, so the next `helm upgrade` that applies the chart's would fail: a
        // write of the Pod itself, compared as one (its strategy keeps nothing else it is sent).
        Some("resize")
            if request.resource.group.is_empty() && request.resource.resource == "pods" =>
        {
            door(false, false, false)
        }
        Some("scale") => door(true, false, false),
        Some("status") => door(false, true, false),
        Some("eviction")
            if request.resource.group.is_empty() && request.resource.resource == "pods" =>
        {
            door(false, false, true)
        }
        Some(_) => return Ok(Located::Answered(Allowed::Subresource)),
    };
    let found = if door.evict {
        let name = request.name().unwrap_or_default();
        index.lookup("", "Pod", request.namespace(), name)
    } else {
        find_object(index, schema, request, door.scale)?
    };
    Ok(match found {
        Some(object) => Located::Locked(object, door),
        None => Located::Answered(Allowed::NotOwned),
    })
}

/// What a review's head (everything but `object` and `oldObject`) decides on its own: an
/// object no release owns, or a subresource never locked (the fast path). `None` when the
/// object is locked and the whole review is needed.
pub fn decide_head(
    index: &Index,
    schema: &Schema,
    request: &Request<'_>,
) -> Result<Option<Decision>, DecideError> {
    Ok(match locate(index, schema, request)? {
        Located::Answered(allowed) => Some(Decision::Allow(allowed)),
        Located::Locked(..) => None,
    })
}

/// Decides one admission request: finds the locked object ([`locate`]), the lock on it (rules
/// 2 to 4 and the owner's proof, [`Lock::of`]), then what the write changes of what Helm owns
/// ([`Lock::changes`]) and the verdict.
pub fn decide(
    index: &Index,
    schema: &Schema,
    config: &Config,
    request: &Request<'_>,
) -> Result<Decision, DecideError> {
    let (object, door) = match locate(index, schema, request)? {
        Located::Answered(allowed) => return Ok(Decision::Allow(allowed)),
        Located::Locked(object, door) => (object, door),
    };
    let lock = match Lock::of(index, config, request, object, door) {
        Ok(lock) => lock,
        Err(allowed) => return Ok(Decision::Allow(*allowed)),
    };
    if request.operation == Operation::Delete || door.evict {
        return Ok(lock.delete());
    }
    let (new, old) = written(request, door.scale)?;
    let compared = Compared::of(schema, &lock);
    let changes = match lock.changes(schema, &compared, &new, old.as_ref()) {
        Ok(changes) => changes,
        Err(decision) => return Ok(*decision),
    };
    if !door.scale {
        if let Some(decision) = lock.added_owners(&compared, &new, old.as_ref()) {
            return Ok(decision);
        }
    }
    if changes.is_empty() && !door.scale {
        if let Some(decision) = lock.co_owner(schema, &compared) {
            return Ok(decision);
        }
        if request.operation == Operation::Create && lock.server_side {
            if let Some(decision) = lock.creator(schema, &compared) {
                return Ok(decision);
            }
        }
    }
    if changes.is_empty() && door.scale && lock.server_side {
        if let Some(decision) = lock.scale_co_owner(schema, &compared) {
            return Ok(decision);
        }
    }
    if changes.is_empty() {
        return Ok(Decision::Allow(Allowed::NoLockedChange {
            release: lock.release,
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
            root: schema.root_or_deduced(&object.api_version(), &object.kind),
            ignore: lock.policy.ignored_paths(object),
        }
    }
}

impl<'a> Lock<'a> {
    /// Rules 2 to 4, and the object's proof that it is the release's: the lock, or why the
    /// write is free.
    fn of(
        index: &'a Index,
        config: &'a Config,
        request: &'a Request<'a>,
        object: &'a std::sync::Arc<LockedObject>,
        door: Door,
    ) -> Result<Lock<'a>, Box<Allowed>> {
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
        })
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
        let message = message(
            &describe,
            &self.release,
            self.revision,
            self.status,
            delete,
            &changes,
            Wording {
                hide_values,
                scale: self.door.scale,
            },
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
                name: object.name.clone(),
            },
            delete,
            changes,
            message,
            proof: self.proof,
        }
    }

    /// Rule 5: a DELETE (or an eviction, which deletes the Pod).
    fn delete(&self) -> Decision {
        let mut l = self.locked(true, Vec::new());
        if self.door.evict {
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
                pointer,
                "/spec/replicas",
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
        let chart = stored_form(&compared.content, &self.object.group, &self.object.kind);
        let mut shared =
            co_owner_claims(schema, compared.root, &chart, self.helm(), manager, request);
        shared.retain(|p| !crate::ownership::is_ignored(&describe_field_path(p), &compared.ignore));
        if shared.is_empty() {
            return None;
        }
        let mut l = self.locked(false, Vec::new());
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

/// What a write asks for: the new object and the stored one. An UPDATE is read as what it
/// changes: the parts object and oldObject share are left out of both (crate::prune). A Scale
/// is small and compared at one path: read whole.
fn written(request: &Request<'_>, scale: bool) -> Result<(Value, Option<Value>), DecideError> {
    Ok(match (request.object(), request.old_object()) {
        (Some(new), Some(old)) if !scale => {
            let (new, old) = crate::prune::changed_parts(new.get(), old.get()).map_err(|e| {
                DecideError::BadObject {
                    field: "object",
                    reason: describe_json_error(&e),
                }
            })?;
            (new, Some(old))
        }
        (new, old) => (
            parse_object(new, "object")?.unwrap_or(Value::Null),
            parse_object(old, "oldObject")?,
        ),
    })
}

fn parse_object(
    raw: Option<crate::review::RawObject<'_>>,
    field: &'static str,
) -> Result<Option<Value>, DecideError> {
    raw.map(|raw| serde_json::from_str(raw.get()))
        .transpose()
        .map_err(|e| DecideError::BadObject {
            field,
            reason: describe_json_error(&e),
        })
}

/// Fields Helm owns that a server-side apply by `manager` would make it co-own. Read from the
/// request's managedFields without building their values, and only as far as needed: most
/// applies are Helm's own (its entry owns the release annotation).
fn co_owner_claims(
    schema: &Schema,
    root: crate::schema::TypeId,
    chart: &crate::tree::Tree,
    helm: (&str, &str),
    manager: &str,
    request: &Request<'_>,
) -> Vec<String> {
    // The first entry that owns the release annotation is Helm's: when it is the manager's,
    // the apply is Helm's own, and the entries after it are not read.
    let mut helm_seen = false;
    let Some(new) = request.object().and_then(|o| {
        crate::prune::managed_fields_until(o.get(), |entry| {
            let helm = !helm_seen && entry.owns_release_annotation();
            helm_seen |= helm;
            helm && entry.manager == manager
        })
    }) else {
        return Vec::new();
    };
    if new.raw.is_none() && helm_seen {
        return Vec::new();
    }
    let Some(claimed) = new.applies.iter().find(|e| e.manager == manager) else {
        return Vec::new();
    };
    // kube-apiserver 1.20 hands admission an oldObject that shares the new object's
    // managedFields on a server-side apply (measured: a first apply by kubectl shows its own
    // entry in both), so the old entry counts only when it differs from the new one.
    let before = request
        .old_object()
        .and_then(|o| crate::prune::managed_fields(o.get()))
        .filter(|old| old.raw != new.raw)
        .and_then(|old| {
            old.applies
                .iter()
                .find(|e| e.manager == manager)
                .map(|e| e.field_set())
        })
        .unwrap_or_default();
    crate::fields_v1::co_owned_paths(schema, root, chart, helm, &claimed.field_set(), &before)
}

/// The request's object in the index: a `scale` request names the parent by resource, and a
/// DELETE issued by a collection delete (namespace controller) has its name only in `oldObject`.
fn find_object<'i>(
    index: &'i Index,
    schema: &Schema,
    request: &Request<'_>,
    scale: bool,
) -> Result<Option<&'i std::sync::Arc<LockedObject>>, DecideError> {
    // For a Namespace the API server sets `request.namespace` to the Namespace's own name; it is
    // cluster-scoped, and indexed without a namespace.
    let is_namespace = request.kind.group.is_empty() && request.kind.kind == "Namespace";
    let namespace = if is_namespace {
        None
    } else {
        request.namespace()
    };
    let name_from_old;
    let name = match request.name() {
        Some(name) => name,
        None => {
            #[derive(serde::Deserialize)]
            struct Meta {
                #[serde(default)]
                name: String,
            }
            #[derive(serde::Deserialize)]
            struct Named {
                metadata: Option<Meta>,
            }
            let Some(old) = request.old_object().or(request.object()) else {
                return Ok(None);
            };
            let named: Named =
                serde_json::from_str(old.get()).map_err(|e| DecideError::BadObject {
                    field: "oldObject",
                    reason: describe_json_error(&e),
                })?;
            name_from_old = named.metadata.map(|m| m.name).unwrap_or_default();
            if name_from_old.is_empty() {
                return Ok(None);
            }
            &name_from_old
        }
    };
    if !scale {
        let (group, kind) = (&request.kind.group, &request.kind.kind);
        let first = index.lookup(group, kind, namespace, name);
        // Two releases render the object (`helm install --take-ownership`): it belongs to the
        // release its Helm annotations name (Helm's own rule for adoption), so a pending
        // release cannot open an object another release holds.
        if first.is_some() && index.claims(group, kind, namespace, name).nth(1).is_some() {
            if let Some(owner) = annotated_release(request.old_object().or(request.object())) {
                let named = index.claims(group, kind, namespace, name).find(|c| {
                    c.release.namespace == owner.namespace && c.release.name == owner.name
                });
                if named.is_some() {
                    return Ok(named);
                }
            }
        }
        return Ok(first);
    }
    // A Scale names its parent by resource: the API server's schema (and each CRD's `names`)
    // says which kind that is.
    let (group, plural) = (&request.resource.group, request.resource.resource.as_ref());
    if let Some(kind) = schema.kind_of_resource(group, plural) {
        return Ok(index.lookup(group, kind, namespace, name));
    }
    // Nothing says (an offline decision about a custom resource whose CRD was not given): the
    // kinds the plural may stand for.
    Ok(singular_candidates(plural)
        .into_iter()
        .find_map(|kind| index.lookup(group, &kind, namespace, name)))
}

/// Whether an object's Helm annotations name `release`. Read with the scanner up to
/// `metadata.annotations` (near the start of what the API server sends); serde reads the
/// whole object only when the scanner gives up.
fn names_release(object: Option<crate::review::RawObject<'_>>, release: &ReleaseKey) -> bool {
    let Some(object) = object else {
        return false;
    };
    match crate::scan::member_at(object.get(), &["metadata", "annotations"]) {
        Some(None) => false,
        Some(Some(annotations)) => serde_json::from_str::<
            std::collections::HashMap<Cow<'_, str>, Cow<'_, str>>,
        >(annotations)
        .is_ok_and(|a| {
            a.get(crate::ownership::RELEASE_NAME_ANNOTATION)
                .is_some_and(|n| *n == release.name)
                && a.get(crate::ownership::RELEASE_NAMESPACE_ANNOTATION)
                    .is_some_and(|n| *n == release.namespace)
        }),
        None => annotated_release(Some(object)).as_ref() == Some(release),
    }
}

/// The release an object's `meta.helm.sh/release-name` and `-namespace` annotations name.
fn annotated_release(object: Option<crate::review::RawObject<'_>>) -> Option<ReleaseKey> {
    #[derive(serde::Deserialize)]
    struct Annotated {
        metadata: Option<Meta>,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        annotations: Option<std::collections::BTreeMap<String, String>>,
    }
    let object: Annotated = serde_json::from_str(object?.get()).ok()?;
    crate::release::annotated_release_key(&object.metadata?.annotations?)
}

/// Kinds a plural resource name may stand for (`deployments` -> `deployment`, `registries` ->
/// `registry`; the index compares kinds without case), the inverse of the usual English plural
/// CRDs are given; only when nothing states the kind.
fn singular_candidates(plural: &str) -> Vec<Cow<'_, str>> {
    let mut out = Vec::with_capacity(3);
    if let Some(stem) = plural.strip_suffix("ies") {
        out.push(Cow::Owned(format!("{stem}y")));
    }
    if let Some(stem) = plural.strip_suffix("es") {
        out.push(Cow::Borrowed(stem));
    }
    if let Some(stem) = plural.strip_suffix('s') {
        out.push(Cow::Borrowed(stem));
    }
    out
}

const MAX_CHANGES_IN_MESSAGE: usize = 5;

fn headline(object: &str, release: &ReleaseKey, revision: u64, status: Status) -> String {
    format!("{object} is locked by Helm release {release} (revision {revision}, {status})")
}

/// The first [`MAX_CHANGES_IN_MESSAGE`] of `items`, then `and N more`.
fn first_few<T>(items: &[T], show: impl Fn(&T) -> String) -> Vec<String> {
    let mut shown: Vec<String> = items
        .iter()
        .take(MAX_CHANGES_IN_MESSAGE)
        .map(show)
        .collect();
    if items.len() > MAX_CHANGES_IN_MESSAGE {
        shown.push(format!("and {} more", items.len() - MAX_CHANGES_IN_MESSAGE));
    }
    shown
}

/// What a locked write gets when nothing can repair it: a warning in `warn` mode, else a deny.
fn unrepairable(mode: Mode, locked: Locked) -> Decision {
    match mode {
        Mode::Warn => Decision::Warn(locked),
        _ => Decision::Deny(locked),
    }
}

/// Owner references in `new` (position and value) that neither `old` nor the chart has, by uid.
fn added_owner_references(
    chart: &crate::tree::Tree,
    new: &Value,
    old: Option<&Value>,
) -> Vec<(usize, Value)> {
    let uids = |refs: Option<&Value>| -> Vec<String> {
        refs.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
            .collect()
    };
    let Some(new_refs) = new
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let before = uids(old.and_then(|o| o.pointer("/metadata/ownerReferences")));
    let charted = uids(
        chart
            .pointer("/metadata/ownerReferences")
            .map(|t| t.to_json())
            .as_ref(),
    );
    new_refs
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            let uid = r.get("uid").and_then(Value::as_str).unwrap_or_default();
            !before.iter().any(|u| u == uid) && !charted.iter().any(|u| u == uid)
        })
        .map(|(i, r)| (i, r.clone()))
        .collect()
}

/// A write through another version of the kind than the chart's.
fn other_version_message(l: &Locked, requested: &str, chart: &str) -> String {
    let mut paths = first_few(&l.changes, |c| c.path.clone());
    paths.dedup();
    format!(
        "{}: the chart writes it as version {chart} and this request uses {requested}, so every change outside metadata counts; this request changes {}. Change it with helm upgrade, or ask an admin.",
        l.headline(),
        paths.join(", ")
    )
}

/// A server-side apply that would make its manager a co-owner of fields Helm owns.
fn co_owner_message(l: &Locked, manager: &str, shared: &[String]) -> String {
    let paths = first_few(shared, |p| describe_field_path(p));
    format!(
        "{}: this server-side apply by field manager \"{manager}\" claims {}, which Helm owns; a co-owner makes the next helm upgrade that changes them fail. Leave these fields out of what you apply, change them with helm upgrade, or ask an admin.",
        l.headline(),
        paths.join(", ")
    )
}

fn scale_co_owner_message(l: &Locked, manager: &str, pointer: &str) -> String {
    format!(
        "{}: this write through /scale names field manager \"{manager}\"; from Kubernetes 1.22 a server-side apply there makes that manager own {pointer} beside Helm, and the next helm upgrade that changes it fails with a conflict. The replicas are already what you asked for: leave them to helm upgrade, or ask an admin.",
        l.headline(),
    )
}

fn creator_message(l: &Locked, manager: &str, shared: &[String]) -> String {
    let paths = first_few(shared, |p| describe_field_path(p));
    format!(
        "{}: it is missing, and creating it as field manager \"{manager}\" makes that manager own {} beside Helm, so the next helm upgrade that changes them would fail with a conflict. Run helm upgrade, which recreates it, or ask an admin.",
        l.headline(),
        paths.join(", ")
    )
}

/// The managedFields entries of a created object: `None` when it has none (nothing to check).
fn creation_entries(object: &str) -> Option<Vec<CreationEntry>> {
    #[derive(serde::Deserialize)]
    struct Metadata {
        #[serde(default, rename = "managedFields")]
        managed_fields: Option<Vec<CreationEntry>>,
    }
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: Option<Metadata>,
    }
    let object: Object = serde_json::from_str(object).ok()?;
    object
        .metadata?
        .managed_fields
        .filter(|entries| !entries.is_empty())
}

#[derive(serde::Deserialize)]
struct CreationEntry {
    manager: Option<String>,
    operation: Option<String>,
    #[serde(rename = "fieldsV1")]
    fields: Option<Value>,
}

/// How a denial shows the requested values.
#[derive(Clone, Copy)]
struct Wording {
    /// A Secret's values are not shown.
    hide_values: bool,
    /// A `scale` request: its `replicas` is omitempty, so a missing one is 0.
    scale: bool,
}

fn message(
    object: &str,
    release: &ReleaseKey,
    revision: u64,
    status: Status,
    delete: bool,
    changes: &[Change],
    wording: Wording,
) -> String {
    let Wording { hide_values, scale } = wording;
    let head = headline(object, release, revision, status);
    if delete {
        return format!(
            "{head}: deleting it is not allowed. Remove it from the chart and run helm upgrade, or helm uninstall the release, or ask an admin."
        );
    }
    let parts = first_few(changes, |c| match &c.requested {
        Some(_) if hide_values => {
            format!("{} is set by the chart, this request changes it", c.path)
        }
        None if hide_values => {
            format!("{} is set by the chart, this request removes it", c.path)
        }
        Some(_) if c.chart.is_null() => format!(
            "{} repeats the key of another item (the next helm upgrade could not apply it)",
            c.path
        ),
        // A Scale's `replicas` is omitempty: `kubectl scale --replicas=0` sends none.
        None if scale => format!(
            "{} is {} in the chart, this request sets 0",
            c.path,
            show(&c.chart)
        ),
        Some(v) => match first_difference(&c.path, &c.chart, v) {
            Some(difference) => difference,
            None => format!(
                "{} is {} in the chart, this request sets {}",
                c.path,
                show(&c.chart),
                show(v)
            ),
        },
        None => format!(
            "{} is {} in the chart, this request removes it",
            c.path,
            show(&c.chart)
        ),
    });
    let hidden = if hide_values {
        " (a Secret's values are not shown)"
    } else {
        ""
    };
    format!(
        "{head}: {}{hidden}. Change it with helm upgrade, or ask an admin.",
        parts.join("; ")
    )
}

/// For a value too long to show whole (a ClusterRole's `rules`, a config file in a ConfigMap):
/// where the request first differs from the chart, the same prefix of both being no help.
/// `None` when both are short, or of different shapes.
fn first_difference(path: &str, chart: &Value, requested: &Value) -> Option<String> {
    const SHORT: usize = 80;
    if chart.to_string().len() <= SHORT && requested.to_string().len() <= SHORT {
        return None;
    }
    match (chart, requested) {
        (Value::String(a), Value::String(b)) if a.contains('\n') || b.contains('\n') => {
            let (mut left, mut right) = (a.lines(), b.lines());
            for line in 1.. {
                match (left.next(), right.next()) {
                    (Some(x), Some(y)) if x == y => continue,
                    (Some(x), Some(y)) => {
                        return Some(format!(
                            "{path} differs from the chart at line {line}: {} in the chart, {} in this request",
                            show(&Value::from(x)),
                            show(&Value::from(y))
                        ))
                    }
                    (Some(x), None) => {
                        return Some(format!(
                            "{path} differs from the chart at line {line}: {} in the chart, the request ends before it",
                            show(&Value::from(x))
                        ))
                    }
                    (None, Some(y)) => {
                        return Some(format!(
                            "{path} differs from the chart at line {line}: the chart ends before it, this request adds {}",
                            show(&Value::from(y))
                        ))
                    }
                    (None, None) => return None,
                }
            }
            None
        }
        (Value::Array(a), Value::Array(b)) => {
            let i = a.iter().zip(b).take_while(|(x, y)| x == y).count();
            Some(match (a.get(i), b.get(i)) {
                (Some(x), Some(y)) => {
                    let item = format!("{path}/{i}");
                    first_difference(&item, x, y).unwrap_or_else(|| {
                        format!(
                            "{item} is {} in the chart, this request sets {}",
                            show(x),
                            show(y)
                        )
                    })
                }
                (Some(x), None) => format!(
                    "{path}/{i} is {} in the chart, this request removes it ({} items instead of {})",
                    show(x),
                    b.len(),
                    a.len()
                ),
                (None, Some(y)) => format!(
                    "{path} has {} items in the chart, this request adds {} at {path}/{i}",
                    a.len(),
                    show(y)
                ),
                (None, None) => return None,
            })
        }
        (Value::Object(a), Value::Object(b)) => {
            let key = a.keys().chain(b.keys()).find(|k| a.get(*k) != b.get(*k))?;
            let item = format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"));
            Some(match (a.get(key), b.get(key)) {
                (Some(x), Some(y)) => first_difference(&item, x, y).unwrap_or_else(|| {
                    format!(
                        "{item} is {} in the chart, this request sets {}",
                        show(x),
                        show(y)
                    )
                }),
                (Some(x), None) => {
                    format!(
                        "{item} is {} in the chart, this request removes it",
                        show(x)
                    )
                }
                (None, Some(y)) => {
                    format!("{item} is not in the chart, this request adds {}", show(y))
                }
                (None, None) => return None,
            })
        }
        _ => None,
    }
}

fn show(value: &Value) -> String {
    const MAX: usize = 80;
    let text = value.to_string();
    if text.len() <= MAX {
        return text;
    }
    let cut = (0..=MAX)
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    format!("{}...", &text[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::ReleaseSecret;
    use crate::review::parse_review;
    use serde_json::json;

    const CHART: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {app: web}\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: reader}\nrules: []\n";

    fn index(status: Status) -> Index {
        Index::from_secrets([crate::test_util::release_secret(
            "shop", "shop", 2, status, CHART,
        )])
    }

    fn deployment(replicas: i64, image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"},
                                                                              "annotations": {"meta.helm.sh/release-name": "shop", "meta.helm.sh/release-namespace": "shop"}},
               "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "web", "image": image, "imagePullPolicy": "IfNotPresent"}]}}}})
    }

    // One argument per AdmissionRequest field the tests vary: a struct would only rename them.
    #[allow(clippy::too_many_arguments)]
    fn review(
        op: &str,
        kind: Value,
        resource: Value,
        sub: Option<&str>,
        name: &str,
        ns: Option<&str>,
        user: &str,
        object: Value,
        old: Value,
    ) -> String {
        let text = |v: &Value, f: &str| v[f].as_str().unwrap_or_default().to_string();
        let api_version =
            |v: &Value| crate::manifest::api_version(&text(v, "group"), &text(v, "version"));
        let mut review = crate::test_util::review(
            op,
            &api_version(&resource),
            &text(&kind, "kind"),
            &text(&resource, "resource"),
        )
        .kind(&api_version(&kind), &text(&kind, "kind"))
        .uid("u")
        .name(ns, name)
        .user(user)
        .object(object)
        .old_object(old);
        if let Some(sub) = sub {
            review = review.sub_resource(sub);
        }
        String::from_utf8(review.body()).unwrap()
    }

    /// The co-owner rule on a request's raw managedFields (what `decide` runs).
    #[test]
    fn a_server_side_apply_of_helms_fields_makes_a_co_owner() {
        let schema = Schema::builtin();
        let root = schema.root_or_deduced("v1", "ConfigMap");
        let chart = crate::tree::Tree::from(
            &json!({"metadata": {"name": "cfg"}, "data": {"greeting": "hi", "mode": "prod"}}),
        );
        let entry = |manager: &str, op: &str, fields: Value| json!({"manager": manager, "operation": op, "fieldsV1": fields});
        let helm = entry(
            "helm",
            "Apply",
            json!({"f:metadata": {"f:annotations": {"f:meta.helm.sh/release-name": {}}}, "f:data": {"f:greeting": {}, "f:mode": {}}}),
        );
        let object = |entries: Vec<Value>| json!({"metadata": {"name": "cfg", "managedFields": entries}, "data": {"greeting": "hi", "mode": "prod", "extra": "x"}});
        let claims = |manager: &str, new: &Value, old: Option<&Value>| {
            let body = crate::test_util::review("UPDATE", "v1", "ConfigMap", "configmaps")
                .uid("u")
                .name(Some("shop"), "cfg")
                .object(new.clone())
                .old_object(old.cloned().unwrap_or(Value::Null))
                .body();
            let review = parse_review(&body).unwrap();
            co_owner_claims(
                &schema,
                root,
                &chart,
                ("shop", "shop"),
                manager,
                &review.request,
            )
        };
        // kubectl applies the chart's own greeting and a key of its own: it co-owns greeting.
        let new = object(vec![
            helm.clone(),
            entry(
                "kubectl",
                "Apply",
                json!({"f:data": {"f:greeting": {}, "f:extra": {}}}),
            ),
        ]);
        let shared = claims("kubectl", &new, None);
        assert_eq!(shared, ["f:data.f:greeting"]);
        assert_eq!(describe_field_path(&shared[0]), "/data/greeting");
        // Only its own key: free. Helm applying: never a co-owner. An Update (kubectl patch): no.
        let own = object(vec![
            helm.clone(),
            entry("kubectl", "Apply", json!({"f:data": {"f:extra": {}}})),
        ]);
        assert!(claims("kubectl", &own, None).is_empty());
        assert!(claims("helm", &new, None).is_empty());
        let patch = object(vec![
            helm.clone(),
            entry("kubectl", "Update", json!({"f:data": {"f:greeting": {}}})),
        ]);
        assert!(claims("kubectl", &patch, None).is_empty());
        // Already co-owned before this write (an API server that keeps oldObject's managedFields).
        let before = object(vec![
            helm.clone(),
            entry("kubectl", "Apply", json!({"f:data": {"f:greeting": {}}})),
        ]);
        assert!(claims("kubectl", &new, Some(&before)).is_empty());
        // kube-apiserver 1.20 shows the new entries in oldObject too: not "already co-owned".
        assert_eq!(claims("kubectl", &new, Some(&new)), ["f:data.f:greeting"]);
        // Helm's entry is the one owning the release annotation, whatever its manager's name.
        let renamed = object(vec![
            entry(
                "helm-controller",
                "Apply",
                json!({"f:metadata": {"f:annotations": {"f:meta.helm.sh/release-name": {}}}, "f:data": {"f:greeting": {}}}),
            ),
            entry("kubectl", "Apply", json!({"f:data": {"f:greeting": {}}})),
        ]);
        assert!(claims("helm-controller", &renamed, None).is_empty());
        assert_eq!(claims("kubectl", &renamed, None), ["f:data.f:greeting"]);
    }

    /// kube-apiserver writes JSON with Go's encoder, which escapes `<`, `>`, `&` and U+2028/9:
    /// a manager named `ops&sre` appears as `ops\u0026sre` in the review, and is still found.
    #[test]
    fn a_co_owner_is_found_whatever_its_name_and_however_it_is_escaped() {
        for manager in ["ops-sre", "ops&sre", "<ops>", "ops\u{2028}sre"] {
            let mut new = deployment(3, "nginx:1.25");
            new["metadata"]["managedFields"] = json!([
                {"manager": "helm", "operation": "Apply", "fieldsV1": {"f:metadata": {"f:annotations": {"f:meta.helm.sh/release-name": {}}}, "f:spec": {"f:replicas": {}}}},
                {"manager": manager, "operation": "Apply", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]);
            let body = crate::test_util::review("UPDATE", "apps/v1", "Deployment", "deployments")
                .uid("u")
                .name(Some("shop"), "web")
                .user("alice")
                .field_manager(manager)
                .object(new)
                .old_object(deployment(3, "nginx:1.25"))
                .body();
            let body = crate::test_util::go_order(&String::from_utf8(body).unwrap());
            if manager != "ops-sre" {
                assert!(!body.contains(manager), "not escaped: {body}");
            }
            let d = decide_json(&index(Status::Deployed), &Config::default(), &body);
            let Decision::Deny(l) = &d else {
                panic!("{manager}: {d:?}")
            };
            assert!(l.message.contains("/spec/replicas"), "{}", l.message);
        }
    }

    fn decide_json(index: &Index, config: &Config, body: &str) -> Decision {
        decide(
            index,
            &Schema::builtin(),
            config,
            &parse_review(body.as_bytes()).unwrap().request,
        )
        .unwrap()
    }

    fn deploy_update(user: &str, new: Value, old: Value) -> String {
        review(
            "UPDATE",
            json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
            json!({"group": "apps", "version": "v1", "resource": "deployments"}),
            None,
            "web",
            Some("shop"),
            user,
            new,
            old,
        )
    }

    #[test]
    fn with_a_registration_namespace_only_registered_unsuspended_releases_are_locked() {
        use crate::policy::{IgnoreRule, Registration};
        let config = Config {
            registration_namespace: Some("cattle-helm-system".into()),
            ..Config::default()
        };
        let write = deploy_update(
            "admin",
            deployment(7, "nginx:1.26"),
            deployment(3, "nginx:1.25"),
        );
        let mut idx = index(Status::Deployed);
        let d = decide_json(&idx, &config, &write);
        assert_eq!(
            d.explain(),
            "allowed: release shop/shop is not locked (no HelmRelease in cattle-helm-system registers it)"
        );
        let registration = Registration {
            helmrelease: "cattle-helm-system/shop".into(),
            ..Registration::default()
        };
        idx.set_registration(ReleaseKey::new("shop", "shop"), Some(registration.clone()));
        assert!(matches!(
            decide_json(&idx, &config, &write),
            Decision::Deny(_)
        ));
        // The HelmRelease's own ignore rules and exemptions add to the configuration's.
        let relaxed = Registration {
            ignore: vec![IgnoreRule {
                paths: vec!["/spec/template/spec/containers/*/image".into()],
                ..IgnoreRule::default()
            }],
            exempt: Some(crate::policy::Exemptions {
                users: vec!["ci-bot".into()],
                ..Default::default()
            }),
            mode: Some(Mode::Warn),
            ..registration.clone()
        };
        idx.set_registration(ReleaseKey::new("shop", "shop"), Some(relaxed));
        let Decision::Warn(locked) = decide_json(&idx, &config, &write) else {
            panic!("spec.mode warn")
        };
        assert_eq!(locked.changes.len(), 1, "{:?}", locked.changes);
        assert_eq!(locked.changes[0].path, "/spec/replicas");
        let by_bot = deploy_update(
            "ci-bot",
            deployment(7, "nginx:1.26"),
            deployment(3, "nginx:1.25"),
        );
        assert!(matches!(
            decide_json(&idx, &config, &by_bot),
            Decision::Allow(Allowed::Exempt { .. })
        ));
        let suspended = Registration {
            suspend: true,
            ..registration
        };
        idx.set_registration(ReleaseKey::new("shop", "shop"), Some(suspended));
        assert_eq!(
            decide_json(&idx, &config, &write).explain(),
            "allowed: release shop/shop is not locked (its HelmRelease cattle-helm-system/shop is suspended)"
        );
        idx.set_registration(ReleaseKey::new("shop", "shop"), None);
        assert!(decide_json(&idx, &config, &write).is_allowed());
    }

    fn release_secret(name: &str, revision: u64, status: Status) -> ReleaseSecret {
        crate::test_util::release_secret("shop", name, revision, status, CHART)
    }

    fn annotated(mut object: Value, release: &str) -> Value {
        object["metadata"]["annotations"] = json!({
            "meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": "shop"});
        object
    }

    #[test]
    fn a_pending_release_cannot_take_over_an_object_another_release_holds() {
        // `other` renders the same Deployment and installs with --take-ownership (pending);
        // the object's annotations name `shop`, deployed: its lock holds.
        let index = Index::from_secrets([
            release_secret("shop", 2, Status::Deployed),
            release_secret("other", 1, Status::PendingInstall),
        ]);
        let old = annotated(deployment(3, "nginx:1.25"), "shop");
        let takeover = annotated(deployment(3, "nginx:1.25"), "other");
        let d = decide_json(
            &index,
            &Config::default(),
            &deploy_update("admin", takeover, old),
        );
        let Decision::Deny(locked) = &d else {
            panic!("{d:?}")
        };
        assert_eq!(locked.release, ReleaseKey::new("shop", "shop"));
        assert!(
            locked.message.contains("meta.helm.sh~1release-name"),
            "{}",
            locked.message
        );
        // Once the object names `other`, `other` at work opens it.
        let mine = annotated(deployment(3, "nginx:1.25"), "other");
        let d = decide_json(
            &index,
            &Config::default(),
            &deploy_update(
                "admin",
                annotated(deployment(4, "nginx:1.25"), "other"),
                mine,
            ),
        );
        assert!(
            matches!(d, Decision::Allow(Allowed::HelmAtWork { .. })),
            "{d:?}"
        );
    }

    #[test]
    fn adding_an_owner_reference_is_a_delete() {
        let old = deployment(3, "nginx:1.25");
        let mut new = old.clone();
        new["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "u-1"}]);
        let d = decide_json(
            &index(Status::Deployed),
            &Config::default(),
            &deploy_update("admin", new.clone(), old.clone()),
        );
        let Decision::Deny(locked) = &d else {
            panic!("{d:?}")
        };
        assert!(
            locked.message.contains(
                "adds an owner reference the chart does not set (/metadata/ownerReferences/0)"
            ),
            "{}",
            locked.message
        );
        // Repair takes it out again.
        let repair = Config {
            mode: Mode::Repair,
            ..Config::default()
        };
        let d = decide_json(
            &index(Status::Deployed),
            &repair,
            &deploy_update("admin", new.clone(), old),
        );
        let Decision::Repair(_, patch) = d else {
            panic!("{d:?}")
        };
        let mut repaired = new.clone();
        json_patch::patch(&mut repaired, &patch).unwrap();
        assert_eq!(repaired["metadata"]["ownerReferences"], json!([]));
        // One that was already there is not this write's doing.
        let d = decide_json(
            &index(Status::Deployed),
            &Config::default(),
            &deploy_update("admin", new.clone(), new),
        );
        assert!(d.is_allowed(), "{d:?}");
    }

    #[test]
    fn denies_a_chart_field_change_with_an_actionable_message() {
        let d = decide_json(
            &index(Status::Deployed),
            &Config::default(),
            &deploy_update(
                "admin",
                deployment(7, "nginx:1.25"),
                deployment(3, "nginx:1.25"),
            ),
        );
        let Decision::Deny(locked) = &d else {
            panic!("{d:?}")
        };
        assert_eq!(locked.message, "Deployment shop/web is locked by Helm release shop/shop (revision 2, deployed): /spec/replicas is 3 in the chart, this request sets 7. Change it with helm upgrade, or ask an admin.");
        assert_eq!(
            d.needs_confirmation(),
            Some(&ReleaseKey::new("shop", "shop"))
        );
    }

    #[test]
    fn rules_two_to_four_allow() {
        let body = deploy_update(
            "admin",
            deployment(7, "nginx:1.25"),
            deployment(3, "nginx:1.25"),
        );
        for status in [
            Status::PendingUpgrade,
            Status::PendingInstall,
            Status::PendingRollback,
            Status::Uninstalling,
        ] {
            assert!(matches!(
                decide_json(&index(status), &Config::default(), &body),
                Decision::Allow(Allowed::HelmAtWork { .. })
            ));
        }
        for status in [Status::Superseded, Status::Uninstalled, Status::Unknown] {
            assert!(matches!(
                decide_json(&index(status), &Config::default(), &body),
                Decision::Allow(Allowed::NotLocked { .. })
            ));
        }
        let off = Config {
            mode: Mode::Off,
            ..Config::default()
        };
        assert!(matches!(
            decide_json(&index(Status::Deployed), &off, &body),
            Decision::Allow(Allowed::NotLocked { .. })
        ));
        let controller = deploy_update(
            "system:serviceaccount:kube-system:deployment-controller",
            deployment(7, "nginx:1.25"),
            deployment(3, "nginx:1.25"),
        );
        assert!(matches!(
            decide_json(&index(Status::Deployed), &Config::default(), &controller),
            Decision::Allow(Allowed::Exempt { .. })
        ));
    }

    #[test]
    fn unowned_objects_and_unlocked_fields_are_allowed() {
        let mut other = deployment(7, "x");
        other["metadata"]["name"] = json!("other");
        let body = review(
            "UPDATE",
            json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
            json!({"group": "apps", "resource": "deployments"}),
            None,
            "other",
            Some("shop"),
            "admin",
            other.clone(),
            other,
        );
        assert_eq!(
            decide_json(&index(Status::Deployed), &Config::default(), &body),
            Decision::Allow(Allowed::NotOwned)
        );
        let mut annotated = deployment(3, "nginx:1.25");
        annotated["metadata"]["annotations"]["note"] = json!("hello");
        let d = decide_json(
            &index(Status::Deployed),
            &Config::default(),
            &deploy_update("admin", annotated, deployment(3, "nginx:1.25")),
        );
        assert!(matches!(d, Decision::Allow(Allowed::NoLockedChange { .. })));
    }

    #[test]
    fn delete_is_denied_and_a_collection_delete_reads_the_old_object() {
        let body = review(
            "DELETE",
            json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
            json!({"group": "apps", "resource": "deployments"}),
            None,
            "",
            Some("shop"),
            "admin",
            Value::Null,
            deployment(3, "nginx:1.25"),
        );
        let Decision::Deny(l) = decide_json(&index(Status::Deployed), &Config::default(), &body)
        else {
            panic!()
        };
        assert!(l.delete);
        assert!(
            l.message.contains("deleting it is not allowed"),
            "{}",
            l.message
        );
    }

    /// The trust boundary (issue 24): a release's word reaches only objects that carry its
    /// annotations, which only those who may write the object can put there.
    #[test]
    fn only_an_object_carrying_the_releases_annotations_is_locked() {
        let chart = format!("{CHART}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: victim-config, namespace: victim}}\ndata: {{mode: forged}}\n");
        let idx = index_of(&chart);
        let config = Config::default();
        let plain = |replicas| {
            let mut d = deployment(replicas, "nginx:1.25");
            d["metadata"].as_object_mut().unwrap().remove("annotations");
            d
        };
        // Stored without the annotations (made by someone else, or before Helm 3.2): free.
        let d = decide_json(&idx, &config, &deploy_update("alice", plain(7), plain(3)));
        assert!(
            matches!(&d, Decision::Allow(Allowed::Unproven { release }) if release.name == "shop"),
            "{d:?}"
        );
        assert!(d
            .explain()
            .contains("does not carry the release's meta.helm.sh annotations"));
        // Naming another release: not this one's either.
        let other = annotated(plain(3), "other");
        let d = decide_json(&idx, &config, &deploy_update("alice", plain(7), other));
        assert!(
            matches!(d, Decision::Allow(Allowed::Unproven { .. })),
            "{d:?}"
        );
        // Adding the release's annotations to an object that lacks them claims nothing stored.
        let claimed = annotated(plain(7), "shop");
        assert!(
            decide_json(&idx, &config, &deploy_update("alice", claimed, plain(3))).is_allowed()
        );
        // Stored with them: locked, and removing them is a change of what Helm owns.
        let d = decide_json(
            &idx,
            &config,
            &deploy_update("alice", plain(3), deployment(3, "nginx:1.25")),
        );
        assert!(
            matches!(&d, Decision::Deny(l) if l.proof == OwnerProof::Shown),
            "{d:?}"
        );

        let configmap = |data: &str, annotations: Option<(&str, &str)>| {
            let mut c = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "victim-config", "namespace": "victim"}, "data": {"mode": data}});
            if let Some((name, namespace)) = annotations {
                c["metadata"]["annotations"] = json!({"meta.helm.sh/release-name": name, "meta.helm.sh/release-namespace": namespace});
            }
            c
        };
        let write = |op: &str, user: &str, new: Value, old: Value| {
            review(
                op,
                json!({"group": "", "version": "v1", "kind": "ConfigMap"}),
                json!({"group": "", "version": "v1", "resource": "configmaps"}),
                None,
                "victim-config",
                Some("victim"),
                user,
                new,
                old,
            )
        };
        // Another team's own ConfigMap in another namespace: its writes and its delete are free.
        let theirs = configmap("theirs", None);
        for (op, new) in [
            ("UPDATE", configmap("changed", None)),
            ("DELETE", Value::Null),
        ] {
            let d = decide_json(&idx, &config, &write(op, "bob", new, theirs.clone()));
            assert!(
                matches!(d, Decision::Allow(Allowed::Unproven { .. })),
                "{op}: {d:?}"
            );
        }
        // A CREATE outside the release's namespace is locked only when it claims the release.
        let d = decide_json(
            &idx,
            &config,
            &write("CREATE", "bob", configmap("theirs", None), Value::Null),
        );
        assert!(
            matches!(d, Decision::Allow(Allowed::Unproven { .. })),
            "{d:?}"
        );
        let d = decide_json(
            &idx,
            &config,
            &write(
                "CREATE",
                "bob",
                configmap("theirs", Some(("shop", "shop"))),
                Value::Null,
            ),
        );
        assert!(matches!(d, Decision::Deny(_)), "{d:?}");
        // In the release's own namespace, a CREATE is compared with the chart as before.
        let create = review(
            "CREATE",
            json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
            json!({"group": "apps", "version": "v1", "resource": "deployments"}),
            None,
            "web",
            Some("shop"),
            "alice",
            plain(7),
            Value::Null,
        );
        assert!(matches!(
            decide_json(&idx, &config, &create),
            Decision::Deny(_)
        ));
    }

    /// A CREATE has no stored object: a field the chart sets that the new object leaves out,
    /// or a keyed item under another key, is a change (the next helm upgrade puts it back).
    #[test]
    fn a_create_is_compared_with_the_whole_chart() {
        let create = |object: Value| {
            review(
                "CREATE",
                json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
                json!({"group": "apps", "version": "v1", "resource": "deployments"}),
                None,
                "web",
                Some("shop"),
                "alice",
                object,
                Value::Null,
            )
        };
        let mut exact = deployment(3, "nginx:1.25");
        exact["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("Helm");
        let idx = index(Status::Deployed);
        let d = decide_json(&idx, &Config::default(), &create(exact.clone()));
        assert!(d.is_allowed(), "{d:?}");
        let mut no_image = exact.clone();
        no_image["spec"]["template"]["spec"]["containers"][0]
            .as_object_mut()
            .unwrap()
            .remove("image");
        let Decision::Deny(l) = decide_json(&idx, &Config::default(), &create(no_image)) else {
            panic!("a CREATE without the chart's image was allowed")
        };
        assert_eq!(l.changes[0].path, "/spec/template/spec/containers/0/image");
        let mut renamed = exact.clone();
        renamed["spec"]["template"]["spec"]["containers"][0]["name"] = json!("api");
        assert!(matches!(
            decide_json(&idx, &Config::default(), &create(renamed)),
            Decision::Deny(_)
        ));
        let mut unlabelled = exact;
        unlabelled["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("app.kubernetes.io/managed-by");
        assert!(matches!(
            decide_json(&idx, &Config::default(), &create(unlabelled)),
            Decision::Deny(_)
        ));
    }

    /// On a release Helm applies server-side, a CREATE of the chart's own content by another
    /// field manager is denied: that manager would co-own every field it set, and the next
    /// helm upgrade that changes one fails with a conflict. Helm's own apply is not.
    #[test]
    fn a_create_by_another_field_manager_of_a_server_side_release_is_denied() {
        let mut secret =
            crate::test_util::release_secret("shop", "shop", 2, Status::Deployed, CHART);
        secret.release.apply_method = Some("ssa".into());
        let ssa = Index::from_secrets([secret]);
        let created = |manager: &str, operation: &str, owns_annotation: bool| {
            let mut object = deployment(3, "nginx:1.25");
            object["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("Helm");
            let mut fields = json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}});
            if owns_annotation {
                fields["f:metadata"] =
                    json!({"f:annotations": {"f:meta.helm.sh/release-name": {}}});
            }
            object["metadata"]["managedFields"] = json!([{"manager": manager, "operation": operation,
                "apiVersion": "apps/v1", "fieldsType": "FieldsV1", "fieldsV1": fields}]);
            review(
                "CREATE",
                json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
                json!({"group": "apps", "version": "v1", "resource": "deployments"}),
                None,
                "web",
                Some("shop"),
                "alice",
                object,
                Value::Null,
            )
        };
        let d = decide_json(
            &ssa,
            &Config::default(),
            &created("kubectl-create", "Update", true),
        );
        let Decision::Deny(l) = &d else {
            panic!("a kubectl create of a server-side release's object was allowed: {d:?}")
        };
        assert!(
            l.message.contains("field manager \"kubectl-create\""),
            "{}",
            l.message
        );
        assert!(l.message.contains("/spec/replicas"), "{}", l.message);
        // Helm's own apply (an Apply entry owning the release annotation) is not a co-owner.
        let d = decide_json(&ssa, &Config::default(), &created("helm", "Apply", true));
        assert!(d.is_allowed(), "{d:?}");
        // Another applier that leaves Helm's annotation to others still co-owns the fields.
        let d = decide_json(&ssa, &Config::default(), &created("ops", "Apply", false));
        assert!(matches!(d, Decision::Deny(_)), "{d:?}");
        // A client-side (Helm 3 style) release has no conflicts to fear: compared by content.
        let d = decide_json(
            &index(Status::Deployed),
            &Config::default(),
            &created("kubectl-create", "Update", true),
        );
        assert!(d.is_allowed(), "{d:?}");
    }

    /// A Scale or an Eviction holds no annotations: the server reads them before a deny.
    #[test]
    fn a_scale_is_denied_only_once_the_stored_object_proves_its_owner() {
        let scale = |r| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": r}});
        let body = review(
            "UPDATE",
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
            json!({"group": "apps", "version": "v1", "resource": "deployments"}),
            Some("scale"),
            "web",
            Some("shop"),
            "admin",
            scale(5),
            scale(3),
        );
        let d = decide_json(&index(Status::Deployed), &Config::default(), &body);
        assert!(
            matches!(&d, Decision::Deny(l) if l.proof == OwnerProof::ToRead),
            "{d:?}"
        );
        let shop = ReleaseKey::new("shop", "shop");
        assert_eq!(prove(d.clone(), Some(&shop)), d);
        for read in [None, Some(&ReleaseKey::new("shop", "other"))] {
            assert!(matches!(
                prove(d.clone(), read),
                Decision::Allow(Allowed::Unproven { .. })
            ));
        }
        // A decision the request already proved is not read again.
        let update = deploy_update(
            "admin",
            deployment(7, "nginx:1.25"),
            deployment(3, "nginx:1.25"),
        );
        let d = decide_json(&index(Status::Deployed), &Config::default(), &update);
        assert_eq!(prove(d.clone(), None), d);
    }

    /// Every subresource kube-apiserver 1.20, 1.28, 1.34 and 1.36 serves for writes (read from
    /// their recorded `/openapi/v2` paths, `../shared/fixtures/openapi`: 1.20 serves 39, 1.36
    /// 44) is decided on purpose, as docs/subresources.md says. A newer version's new
    /// subresource belongs in one of these lists, with what it writes in that document.
    #[test]
    fn every_subresource_served_from_1_20_to_1_36_is_decided_on_purpose() {
        const LOCKED: &[&str] = &[
            "deployments/scale",
            "replicasets/scale",
            "statefulsets/scale",
            "replicationcontrollers/scale",
            "namespaces/finalize",
            "pods/eviction",
            "pods/resize",
            "apiservices/status",
            "certificatesigningrequests/status",
            "cronjobs/status",
            "customresourcedefinitions/status",
            "daemonsets/status",
            "deployments/status",
            "flowschemas/status",
            "horizontalpodautoscalers/status",
            "ingresses/status",
            "jobs/status",
            "namespaces/status",
            "nodes/status",
            "persistentvolumeclaims/status",
            "persistentvolumes/status",
            "poddisruptionbudgets/status",
            "pods/status",
            "prioritylevelconfigurations/status",
            "replicasets/status",
            "replicationcontrollers/status",
            "resourceclaims/status",
            "resourcequotas/status",
            "servicecidrs/status",
            "services/status",
            "statefulsets/status",
            "validatingadmissionpolicies/status",
            "volumeattachments/status",
        ];
        // Persist nothing a chart sets: approval of a CSR, a token, a binding of an unscheduled
        // Pod, ephemeral containers (never in a manifest), and CONNECT.
        const NOT_LOCKED: &[&str] = &[
            "certificatesigningrequests/approval",
            "serviceaccounts/token",
            "pods/binding",
            "pods/ephemeralcontainers",
            "pods/attach",
            "pods/exec",
            "pods/portforward",
            "pods/proxy",
            "nodes/proxy",
            "services/proxy",
        ];
        let index = index(Status::Deployed);
        let schema = Schema::builtin();
        for (path, locked) in LOCKED
            .iter()
            .map(|p| (p, true))
            .chain(NOT_LOCKED.iter().map(|p| (p, false)))
        {
            let (resource, sub) = path.split_once('/').unwrap();
            let body = review(
                "UPDATE",
                json!({"group": "", "version": "v1", "kind": "Thing"}),
                json!({"group": "", "version": "v1", "resource": resource}),
                Some(sub),
                "web",
                Some("shop"),
                "admin",
                json!({}),
                json!({}),
            );
            let review = parse_review(body.as_bytes()).unwrap();
            let head = decide_head(&index, &schema, &review.request).unwrap();
            let never = matches!(head, Some(Decision::Allow(Allowed::Subresource)));
            assert_eq!(!never, locked, "{path}");
        }
    }

    /// `pods/resize` (1.33+) writes a Pod's containers' resources: a chart's Pod is locked
    /// there as through the Pod itself; other subresources of a Pod are not.
    #[test]
    fn a_resize_of_a_charts_pod_is_a_write_of_the_pod() {
        let chart = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: once\nspec:\n  containers:\n  - name: app\n    image: busybox\n    resources:\n      requests: {cpu: 100m}\n";
        let index = Index::from_secrets([crate::test_util::release_secret(
            "shop",
            "shop",
            1,
            Status::Deployed,
            chart,
        )]);
        let pod = |cpu: &str| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "once", "namespace": "shop",
            "annotations": {"meta.helm.sh/release-name": "shop", "meta.helm.sh/release-namespace": "shop"}},
            "spec": {"containers": [{"name": "app", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}})
        };
        let write = |sub: &str, cpu: &str| {
            review(
                "UPDATE",
                json!({"group": "", "version": "v1", "kind": "Pod"}),
                json!({"group": "", "version": "v1", "resource": "pods"}),
                Some(sub),
                "once",
                Some("shop"),
                "admin",
                pod(cpu),
                pod("100m"),
            )
        };
        let config = Config::default();
        let Decision::Deny(l) = decide_json(&index, &config, &write("resize", "2")) else {
            panic!("a resize of the chart's cpu request was allowed")
        };
        assert_eq!(
            l.changes[0].path,
            "/spec/containers/0/resources/requests/cpu"
        );
        assert!(decide_json(&index, &config, &write("resize", "0.1")).is_allowed());
        assert!(decide_json(&index, &config, &write("ephemeralcontainers", "2")).is_allowed());
    }

    /// On a server-side release, a `/scale` write that keeps the replicas but names a field
    /// manager may be a server-side apply, which from 1.22 makes the manager a co-owner of the
    /// chart's replicas: denied. `kubectl scale` (no manager), a client-side release, and a
    /// chart that leaves replicas to an autoscaler are not concerned.
    #[test]
    fn a_scale_to_the_same_replicas_naming_a_manager_is_denied_on_a_server_side_release() {
        let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": 3}});
        let write = |manager: Option<&str>| {
            let mut review = crate::test_util::review("UPDATE", "apps/v1", "Scale", "deployments")
                .kind("autoscaling/v1", "Scale")
                .uid("u")
                .name(Some("shop"), "web")
                .user("admin")
                .object(scale.clone())
                .old_object(scale.clone())
                .sub_resource("scale");
            if let Some(manager) = manager {
                review = review.field_manager(manager);
            }
            String::from_utf8(review.body()).unwrap()
        };
        let release = |chart: &str, ssa: bool| {
            let mut secret =
                crate::test_util::release_secret("shop", "shop", 2, Status::Deployed, chart);
            secret.release.apply_method = ssa.then(|| "ssa".into());
            Index::from_secrets([secret])
        };
        let config = Config::default();
        let d = decide_json(&release(CHART, true), &config, &write(Some("ops&sre")));
        let Decision::Deny(l) = &d else {
            panic!("{d:?}")
        };
        assert!(l.changes.is_empty(), "{l:?}");
        assert!(
            l.message.contains("names field manager \"ops&sre\"")
                && l.message.contains("/spec/replicas beside Helm"),
            "{}",
            l.message
        );
        // kubectl scale to the same value: no manager, no owner.
        assert!(decide_json(&release(CHART, true), &config, &write(None)).is_allowed());
        // A Helm 3 style release: no conflicts to fear.
        assert!(decide_json(&release(CHART, false), &config, &write(Some("ops"))).is_allowed());
        // A chart that leaves replicas out (an HPA sets them): Helm owns nothing there.
        let no_replicas = CHART.replace("  replicas: 3\n", "");
        assert_ne!(no_replicas, CHART);
        assert!(
            decide_json(&release(&no_replicas, true), &config, &write(Some("ops"))).is_allowed()
        );
    }

    #[test]
    fn scale_is_a_write_to_the_parents_replicas() {
        let scale = |r| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": r}});
        let body = review(
            "UPDATE",
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
            json!({"group": "apps", "version": "v1", "resource": "deployments"}),
            Some("scale"),
            "web",
            Some("shop"),
            "admin",
            scale(5),
            scale(3),
        );
        let Decision::Deny(l) = decide_json(&index(Status::Deployed), &Config::default(), &body)
        else {
            panic!()
        };
        assert_eq!(l.changes[0].path, "/spec/replicas");
        // `kubectl scale --replicas=0`: the Scale carries no replicas (omitempty).
        let to_zero = review(
            "UPDATE",
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
            json!({"group": "apps", "version": "v1", "resource": "deployments"}),
            Some("scale"),
            "web",
            Some("shop"),
            "admin",
            json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "shop"}, "spec": {}}),
            scale(3),
        );
        let Decision::Deny(l) = decide_json(&index(Status::Deployed), &Config::default(), &to_zero)
        else {
            panic!()
        };
        assert!(
            l.message
                .contains("/spec/replicas is 3 in the chart, this request sets 0"),
            "{}",
            l.message
        );
        let hpa_free = Config {
            ignore: vec![crate::policy::IgnoreRule {
                paths: vec!["/spec/replicas".into()],
                target: crate::policy::Target {
                    kind: Some("Deployment".into()),
                    ..Default::default()
                },
            }],
            ..Config::default()
        };
        assert!(decide_json(&index(Status::Deployed), &hpa_free, &body).is_allowed());
        let status = review(
            "UPDATE",
            json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
            json!({"group": "apps", "resource": "deployments"}),
            Some("status"),
            "web",
            Some("shop"),
            "admin",
            deployment(9, "x"),
            deployment(3, "nginx:1.25"),
        );
        // Through status only metadata can stick: spec is the chart's business elsewhere.
        assert!(matches!(
            decide_json(&index(Status::Deployed), &Config::default(), &status),
            Decision::Allow(Allowed::NoLockedChange { .. })
        ));
        let mut relabelled = deployment(3, "nginx:1.25");
        relabelled["metadata"]["labels"]["app"] = json!("other");
        let status = review(
            "UPDATE",
            json!({"group": "apps", "version": "v1", "kind": "Deployment"}),
            json!({"group": "apps", "resource": "deployments"}),
            Some("status"),
            "web",
            Some("shop"),
            "admin",
            relabelled,
            deployment(3, "nginx:1.25"),
        );
        let d = decide_json(&index(Status::Deployed), &Config::default(), &status);
        let Decision::Deny(locked) = &d else {
            panic!("{d:?}")
        };
        assert!(
            locked
                .message
                .contains("/metadata/labels/app is \"web\" in the chart"),
            "{}",
            locked.message
        );
    }

    #[test]
    fn warn_and_repair_modes() {
        let body = deploy_update(
            "admin",
            deployment(7, "nginx:1.27"),
            deployment(3, "nginx:1.25"),
        );
        let warn = Config {
            mode: Mode::Warn,
            ..Config::default()
        };
        let d = decide_json(&index(Status::Deployed), &warn, &body);
        assert!(matches!(&d, Decision::Warn(l) if l.changes.len() == 2));
        assert!(d.needs_confirmation().is_none());
        let repair = Config {
            mode: Mode::Repair,
            ..Config::default()
        };
        let Decision::Repair(_, patch) = decide_json(&index(Status::Deployed), &repair, &body)
        else {
            panic!()
        };
        let mut object = deployment(7, "nginx:1.27");
        json_patch::patch(&mut object, &patch).unwrap();
        assert_eq!(object, deployment(3, "nginx:1.25"));
    }

    #[test]
    fn a_fresh_pending_status_turns_a_deny_into_an_allow() {
        let d = decide_json(
            &index(Status::Deployed),
            &Config::default(),
            &deploy_update(
                "admin",
                deployment(7, "nginx:1.25"),
                deployment(3, "nginx:1.25"),
            ),
        );
        assert!(!confirm(d.clone(), Some(Status::Deployed)).is_allowed());
        assert!(!confirm(d.clone(), None).is_allowed());
        assert!(matches!(
            confirm(d, Some(Status::PendingUpgrade)),
            Decision::Allow(Allowed::HelmAtWork {
                confirmed: true,
                ..
            })
        ));
    }

    #[test]
    fn a_secrets_values_are_not_quoted_in_the_message() {
        let chart = "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\ndata: {password: aHVudGVyMg==, user: YWRtaW4=}\n";
        // Revision 3 of the release owns only the Secret.
        let mut index = index(Status::Deployed);
        index.upsert(crate::test_util::release_secret(
            "shop",
            "shop",
            3,
            Status::Deployed,
            chart,
        ));
        let object = |password: Option<&str>| {
            let mut data = json!({"user": "YWRtaW4="});
            if let Some(p) = password {
                data["password"] = json!(p);
            }
            annotated(
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "shop"}, "data": data}),
                "shop",
            )
        };
        for new in [object(Some("c3RvbGVu")), object(None)] {
            let body = review(
                "UPDATE",
                json!({"group": "", "version": "v1", "kind": "Secret"}),
                json!({"group": "", "version": "v1", "resource": "secrets"}),
                None,
                "creds",
                Some("shop"),
                "admin",
                new,
                object(Some("aHVudGVyMg==")),
            );
            for mode in [Mode::Deny, Mode::Warn] {
                let config = Config {
                    mode,
                    ..Config::default()
                };
                let (Decision::Deny(l) | Decision::Warn(l)) = decide_json(&index, &config, &body)
                else {
                    panic!()
                };
                assert!(
                    l.message.contains("/data/password is set by the chart"),
                    "{}",
                    l.message
                );
                assert!(l.message.contains("not shown"), "{}", l.message);
                for value in ["aHVudGVyMg==", "c3RvbGVu", "YWRtaW4="] {
                    assert!(!l.message.contains(value), "{}", l.message);
                }
            }
        }
    }

    #[test]
    fn repair_mode_denies_a_write_its_patch_cannot_repair() {
        // Found by fuzzing (fuzz target `review`): a scale request without an object (or a
        // Scale without `spec`) got a patch adding /spec/replicas under a missing parent.
        let repair = Config {
            mode: Mode::Repair,
            ..Config::default()
        };
        let scale = |spec: Value| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "shop"}, "spec": spec});
        let body = |object: Value| {
            review(
                "UPDATE",
                json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
                json!({"group": "apps", "version": "v1", "resource": "deployments"}),
                Some("scale"),
                "web",
                Some("shop"),
                "admin",
                object,
                scale(json!({"replicas": 7})),
            )
        };
        for malformed in [Value::Null, json!({"kind": "Scale"})] {
            let d = decide_json(&index(Status::Deployed), &repair, &body(malformed));
            assert!(matches!(d, Decision::Deny(_)), "{d:?}");
        }
        // Scaled to 0, the Scale's `spec` is empty (replicas is omitempty): repaired.
        let d = decide_json(&index(Status::Deployed), &repair, &body(scale(json!({}))));
        let Decision::Repair(_, patch) = d else {
            panic!("{d:?}")
        };
        let mut object = scale(json!({}));
        json_patch::patch(&mut object, &patch).unwrap();
        assert_eq!(object["spec"]["replicas"], 3);
    }

    #[test]
    fn a_long_value_is_shown_where_it_first_differs() {
        let config: String = (1..=40).map(|i| format!("key{i} = value{i}\n")).collect();
        let edited = config.replace("key23 = value23", "key23 = hacked");
        assert_eq!(
            first_difference("/data/app.conf", &json!(config), &json!(edited)).unwrap(),
            "/data/app.conf differs from the chart at line 23: \"key23 = value23\" in the chart, \"key23 = hacked\" in this request"
        );
        let shorter: String = config.lines().take(30).map(|l| format!("{l}\n")).collect();
        assert!(
            first_difference("/data/app.conf", &json!(config), &json!(shorter))
                .unwrap()
                .ends_with(
                    "at line 31: \"key31 = value31\" in the chart, the request ends before it"
                )
        );
        let rule = |verbs: &[&str]| json!({"apiGroups": [""], "resources": ["pods", "services", "configmaps"], "verbs": verbs});
        let rules = json!([rule(&["get"]), rule(&["list"]), rule(&["watch"])]);
        let escalated = json!([rule(&["get"]), rule(&["list", "delete"]), rule(&["watch"])]);
        assert_eq!(
            first_difference("/rules", &rules, &escalated).unwrap(),
            "/rules/1/verbs is [\"list\"] in the chart, this request sets [\"list\",\"delete\"]"
        );
        let added = json!([
            rule(&["get"]),
            rule(&["list"]),
            rule(&["watch"]),
            rule(&["*"])
        ]);
        assert!(first_difference("/rules", &rules, &added)
            .unwrap()
            .starts_with("/rules has 3 items in the chart, this request adds {"));
        // Short values are shown whole, as before.
        assert_eq!(
            first_difference("/spec/replicas", &json!(3), &json!(7)),
            None
        );
    }

    #[test]
    fn a_malformed_object_is_an_error_not_a_panic() {
        let body = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"apps","kind":"Deployment"},"name":"web","namespace":"shop","operation":"UPDATE","userInfo":{"username":"admin"},"object":"not an object but a string","oldObject":{"metadata":{"annotations":{"meta.helm.sh/release-name":"shop","meta.helm.sh/release-namespace":"shop"}}}}}"#;
        let d = decide_json(&index(Status::Deployed), &Config::default(), body);
        // A string where an object belongs changes every locked field: it is denied, not a crash.
        assert!(!d.is_allowed());
        assert!(decide(&index(Status::Deployed), &Schema::builtin(), &Config::default(), &parse_review(b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"kind\":{\"kind\":\"ClusterRole\",\"group\":\"rbac.authorization.k8s.io\"},\"operation\":\"DELETE\",\"oldObject\":{\"metadata\":{\"name\":7}}}}").unwrap().request).is_err());
    }

    fn index_of(manifest: &str) -> Index {
        let mut secret = release_secret("shop", 1, Status::Deployed);
        secret.release.manifest = manifest.into();
        Index::from_secrets([secret])
    }

    const IDENTITY_CHART: &str = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web\n  labels: {app: web}\nspec:\n  ingressClassName: nginx\n---\napiVersion: example.com/v1\nkind: Zone\nmetadata:\n  name: eu\n  namespace: wherever\nspec:\n  size: 3\n---\napiVersion: storage.k8s.io/v1\nkind: SomethingNew\nmetadata: {name: fresh}\nspec: {a: 1}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: once}\nspec:\n  containers: [{name: c, image: busybox}]\n";

    #[test]
    fn another_group_serving_the_kind_reaches_the_same_locked_object() {
        let idx = index_of(IDENTITY_CHART);
        let ingress = |class: &str| {
            annotated(
                json!({"apiVersion": "extensions/v1beta1", "kind": "Ingress",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
            "spec": {"ingressClassName": class}}),
                "shop",
            )
        };
        let write = |group: &str, version: &str, new: Value| {
            review(
                "UPDATE",
                json!({"group": group, "version": version, "kind": "Ingress"}),
                json!({"group": group, "version": version, "resource": "ingresses"}),
                None,
                "web",
                Some("shop"),
                "admin",
                new,
                ingress("nginx"),
            )
        };
        for (group, version) in [("extensions", "v1beta1"), ("networking.k8s.io", "v1beta1")] {
            let d = decide_json(
                &idx,
                &Config::default(),
                &write(group, version, ingress("other")),
            );
            let Decision::Deny(l) = &d else {
                panic!("{group}/{version}: {d:?}")
            };
            assert!(
                l.message.contains(&format!(
                    "this request uses {}",
                    crate::manifest::api_version(group, version)
                )),
                "{}",
                l.message
            );
            // Unchanged outside metadata, a label the chart does not set: allowed.
            let mut labelled = ingress("nginx");
            labelled["metadata"]["labels"]["team"] = json!("a");
            assert!(
                decide_json(&idx, &Config::default(), &write(group, version, labelled))
                    .is_allowed()
            );
        }
        // A restore (CREATE) through the other group: the same content at the same paths is
        // no change; another class is.
        let create = |new: Value| {
            review(
                "CREATE",
                json!({"group": "extensions", "version": "v1beta1", "kind": "Ingress"}),
                json!({"group": "extensions", "version": "v1beta1", "resource": "ingresses"}),
                None,
                "web",
                Some("shop"),
                "admin",
                new,
                Value::Null,
            )
        };
        let mut restored = ingress("nginx");
        restored["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("Helm");
        let d = decide_json(&idx, &Config::default(), &create(restored.clone()));
        assert!(d.is_allowed(), "{d:?}");
        restored["spec"]["ingressClassName"] = json!("other");
        let d = decide_json(&idx, &Config::default(), &create(restored));
        let Decision::Deny(l) = &d else {
            panic!("{d:?}")
        };
        assert_eq!(l.changes[0].path, "/spec/ingressClassName");
        // A group that does not serve Ingress is another object.
        let d = decide_json(
            &idx,
            &Config::default(),
            &write("example.com", "v1", ingress("other")),
        );
        assert!(matches!(d, Decision::Allow(Allowed::NotOwned)), "{d:?}");
    }

    /// Through autoscaling/v1, the API server converts the annotation
    /// `autoscaling.alpha.kubernetes.io/metrics` into the v2 `spec.metrics` the chart owns.
    #[test]
    fn a_conversion_annotation_is_the_field_it_becomes() {
        let chart = "apiVersion: autoscaling/v2beta2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web}\nspec:\n  maxReplicas: 4\n  metrics:\n  - type: Resource\n    resource: {name: memory, target: {type: Utilization, averageUtilization: 80}}\n";
        let idx = index_of(chart);
        let hpa = |annotations: Value| {
            annotated(
                json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "shop"}, "spec": {"maxReplicas": 4}}),
                "shop",
            )
            .as_object()
            .cloned()
            .map(|mut o| {
                for (k, v) in annotations.as_object().unwrap() {
                    o["metadata"]["annotations"][k] = v.clone();
                }
                Value::Object(o)
            })
            .unwrap()
        };
        let write = |new: Value| {
            review(
                "UPDATE",
                json!({"group": "autoscaling", "version": "v1", "kind": "HorizontalPodAutoscaler"}),
                json!({"group": "autoscaling", "version": "v1", "resource": "horizontalpodautoscalers"}),
                None,
                "web",
                Some("shop"),
                "alice",
                new,
                hpa(json!({})),
            )
        };
        let metrics =
            r#"[{"type":"Resource","resource":{"name":"memory","targetAverageUtilization":500}}]"#;
        let d = decide_json(
            &idx,
            &Config::default(),
            &write(hpa(
                json!({"autoscaling.alpha.kubernetes.io/metrics": metrics}),
            )),
        );
        let Decision::Deny(l) = &d else {
            panic!("{d:?}")
        };
        assert!(l.changes.iter().any(|c| c.path == "/metadata/annotations/autoscaling.alpha.kubernetes.io~1metrics"), "{:?}", l.changes);
        // Another annotation is only an annotation.
        let d = decide_json(
            &idx,
            &Config::default(),
            &write(hpa(json!({"team": "web"}))),
        );
        assert!(d.is_allowed(), "{d:?}");
        // Through v2beta1, `behavior` travels the same way.
        let chart = "apiVersion: autoscaling/v2beta2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web}\nspec:\n  maxReplicas: 4\n  behavior:\n    scaleDown: {stabilizationWindowSeconds: 60}\n";
        let idx = index_of(chart);
        let v2beta1 = |annotations: Value| {
            let mut o = annotated(
                json!({"apiVersion": "autoscaling/v2beta1", "kind": "HorizontalPodAutoscaler",
                       "metadata": {"name": "web", "namespace": "shop"}, "spec": {"maxReplicas": 4}}),
                "shop",
            );
            for (k, v) in annotations.as_object().unwrap() {
                o["metadata"]["annotations"][k] = v.clone();
            }
            o
        };
        let body = review(
            "UPDATE",
            json!({"group": "autoscaling", "version": "v2beta1", "kind": "HorizontalPodAutoscaler"}),
            json!({"group": "autoscaling", "version": "v2beta1", "resource": "horizontalpodautoscalers"}),
            None,
            "web",
            Some("shop"),
            "alice",
            v2beta1(
                json!({"autoscaling.alpha.kubernetes.io/behavior": r#"{"ScaleDown":{"StabilizationWindowSeconds":600}}"#}),
            ),
            v2beta1(json!({})),
        );
        let d = decide_json(&idx, &Config::default(), &body);
        assert!(matches!(d, Decision::Deny(_)), "{d:?}");
    }

    #[test]
    fn a_kind_of_unknown_scope_is_locked_in_the_scope_the_request_states() {
        let idx = index_of(IDENTITY_CHART);
        // A cluster-scoped custom resource: Helm ignores the chart's namespace for it.
        let delete = |group: &str, kind: &str, name: &str, ns: Option<&str>| {
            review(
                "DELETE",
                json!({"group": group, "version": "v1", "kind": kind}),
                json!({"group": group, "version": "v1", "resource": "whatever"}),
                None,
                name,
                ns,
                "admin",
                Value::Null,
                annotated(json!({"metadata": {"name": name}}), "shop"),
            )
        };
        for (group, kind, name) in [
            ("example.com", "Zone", "eu"),
            ("storage.k8s.io", "SomethingNew", "fresh"),
        ] {
            let cluster = decide_json(&idx, &Config::default(), &delete(group, kind, name, None));
            assert!(
                matches!(cluster, Decision::Deny(_)),
                "{kind} cluster-scoped: {cluster:?}"
            );
        }
        // Namespaced after all: in the chart's namespace, else the release's.
        let zone = decide_json(
            &idx,
            &Config::default(),
            &delete("example.com", "Zone", "eu", Some("wherever")),
        );
        assert!(matches!(zone, Decision::Deny(_)), "{zone:?}");
        let fresh = decide_json(
            &idx,
            &Config::default(),
            &delete("storage.k8s.io", "SomethingNew", "fresh", Some("shop")),
        );
        assert!(matches!(fresh, Decision::Deny(_)), "{fresh:?}");
        let elsewhere = decide_json(
            &idx,
            &Config::default(),
            &delete("example.com", "Zone", "eu", Some("shop")),
        );
        assert!(elsewhere.is_allowed(), "{elsewhere:?}");
    }

    #[test]
    fn a_custom_resources_scale_writes_its_spec_replicas_path() {
        let idx = index_of(IDENTITY_CHART);
        let crd = json!({"spec": {"group": "example.com", "names": {"kind": "Zone"},
            "versions": [{"name": "v1", "subresources": {"scale": {"specReplicasPath": ".spec.size"}}}]}});
        let scale = |r| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "eu"}, "spec": {"replicas": r}});
        let body = |to| {
            review(
                "UPDATE",
                json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
                json!({"group": "example.com", "version": "v1", "resource": "zones"}),
                Some("scale"),
                "eu",
                None,
                "admin",
                scale(to),
                scale(3),
            )
        };
        let with_crd = Schema::empty().with_scale_paths([&crd]);
        let decide_with = |schema: &Schema, config: &Config, to| {
            decide(
                &idx,
                schema,
                config,
                &parse_review(body(to).as_bytes()).unwrap().request,
            )
            .unwrap()
        };
        let d = decide_with(&with_crd, &Config::default(), 5);
        let Decision::Deny(l) = &d else {
            panic!("{d:?}")
        };
        assert_eq!(l.changes[0].path, "/spec/size");
        assert!(
            l.message
                .contains("/spec/size is 3 in the chart, this request sets 5"),
            "{}",
            l.message
        );
        assert!(decide_with(&with_crd, &Config::default(), 3).is_allowed());
        // Without the CRD the chart's /spec/replicas is compared, which this chart does not set.
        assert!(decide_with(&Schema::empty(), &Config::default(), 5).is_allowed());
        // Repair puts the chart's value where the Scale holds it.
        let repair = Config {
            mode: Mode::Repair,
            ..Config::default()
        };
        let Decision::Repair(_, patch) = decide_with(&with_crd, &repair, 5) else {
            panic!()
        };
        let mut object = scale(5);
        json_patch::patch(&mut object, &patch).unwrap();
        assert_eq!(object["spec"]["replicas"], 3);
    }

    /// A Scale names its parent by resource; the schema (the API server's paths, a CRD's
    /// `names`) says which kind that is, irregular plurals included.
    #[test]
    fn a_scale_finds_its_parent_by_the_kind_the_api_server_names() {
        let chart = "apiVersion: goharbor.io/v1\nkind: Registry\nmetadata: {name: r}\nspec: {replicas: 2}\n---\napiVersion: zoo.example.com/v1\nkind: Mouse\nmetadata: {name: m}\nspec: {replicas: 2}\n";
        let idx = index_of(chart);
        let scale = |r| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "x"}, "spec": {"replicas": r}});
        let body = |group: &str, resource: &str, name: &str| {
            review(
                "UPDATE",
                json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
                json!({"group": group, "version": "v1", "resource": resource}),
                Some("scale"),
                name,
                Some("shop"),
                "admin",
                scale(0),
                scale(2),
            )
        };
        let decide_with = |schema: &Schema, body: String| {
            decide(
                &idx,
                schema,
                &Config::default(),
                &parse_review(body.as_bytes()).unwrap().request,
            )
            .unwrap()
        };
        let crd = |group: &str, plural: &str, kind: &str| json!({"spec": {"group": group, "names": {"plural": plural, "kind": kind}}});
        let crds = [
            crd("goharbor.io", "registries", "Registry"),
            crd("zoo.example.com", "mice", "Mouse"),
        ];
        let with_crds = Schema::empty().with_scale_paths(crds.iter());
        assert!(matches!(
            decide_with(&with_crds, body("goharbor.io", "registries", "r")),
            Decision::Deny(_)
        ));
        assert!(matches!(
            decide_with(&with_crds, body("zoo.example.com", "mice", "m")),
            Decision::Deny(_)
        ));
        // Without the CRDs: a regular plural is still read right; an irregular one is not known.
        assert!(matches!(
            decide_with(&Schema::empty(), body("goharbor.io", "registries", "r")),
            Decision::Deny(_)
        ));
        assert!(decide_with(&Schema::empty(), body("zoo.example.com", "mice", "m")).is_allowed());
        // The API server's own paths say the same for every kind it serves.
        let openapi = json!({"definitions": {}, "paths": {
            "/apis/zoo.example.com/v1/namespaces/{namespace}/mice/{name}": {"get": {"x-kubernetes-group-version-kind": {"group": "zoo.example.com", "version": "v1", "kind": "Mouse"}}},
            "/apis/zoo.example.com/v1/namespaces/{namespace}/mice/{name}/scale": {"get": {"x-kubernetes-group-version-kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}}}}});
        let served = Schema::from_openapi_v2(openapi.to_string().as_bytes()).unwrap();
        assert_eq!(
            served.kind_of_resource("zoo.example.com", "mice"),
            Some("Mouse")
        );
        assert_eq!(
            served.kind_of_resource("apps", "statefulsets"),
            Some("StatefulSet")
        );
        assert!(matches!(
            decide_with(&served, body("zoo.example.com", "mice", "m")),
            Decision::Deny(_)
        ));
        // The fast path reads the same schema.
        let head = body("zoo.example.com", "mice", "m");
        let request = parse_review(head.as_bytes()).unwrap().request;
        assert_eq!(decide_head(&idx, &served, &request).unwrap(), None);
        assert!(decide_head(&idx, &Schema::empty(), &request)
            .unwrap()
            .is_some());
    }

    /// A failed upgrade leaves what Helm applied in place: the release stays locked at the
    /// failed revision until a helm upgrade or rollback (pending while it works) succeeds.
    #[test]
    fn a_release_whose_newest_revision_failed_stays_locked() {
        let body = deploy_update(
            "alice",
            deployment(7, "nginx:1.25"),
            deployment(3, "nginx:1.25"),
        );
        let Decision::Deny(l) = decide_json(&index(Status::Failed), &Config::default(), &body)
        else {
            panic!()
        };
        assert!(l.message.contains("(revision 2, failed)"), "{}", l.message);
        for status in [Status::PendingUpgrade, Status::PendingRollback] {
            assert!(decide_json(&index(status), &Config::default(), &body).is_allowed());
        }
    }

    /// Break glass: an open LockException turns the denial of a write it covers into an allow
    /// that names it; closed, or for another user, the denial stands.
    #[test]
    fn an_open_exception_excuses_the_writes_it_covers() {
        let exception = crate::exception::Exception {
            name: "shop/oncall".into(),
            release: ReleaseKey::new("shop", "shop"),
            users: vec!["oncall".into()],
            groups: vec![],
            objects: vec![],
            paths: vec!["/spec/replicas".into()],
            reason: "INC-42".into(),
            opened: 100,
            until: 200,
        };
        let deny = decide_json(
            &index(Status::Deployed),
            &Config::default(),
            &deploy_update(
                "oncall",
                deployment(7, "nginx:1.25"),
                deployment(3, "nginx:1.25"),
            ),
        );
        assert!(matches!(deny, Decision::Deny(_)));
        let no_groups: [&str; 0] = [];
        let d = excuse(deny.clone(), &[&exception], "oncall", &no_groups, 150);
        assert!(
            matches!(&d, Decision::Allow(Allowed::Excepted { exception, user, .. }) if exception == "shop/oncall" && user == "oncall"),
            "{d:?}"
        );
        assert!(
            d.explain()
                .contains("LockException shop/oncall opens release shop/shop to oncall (INC-42)"),
            "{}",
            d.explain()
        );
        assert_eq!(
            excuse(deny.clone(), &[&exception], "oncall", &no_groups, 200),
            deny
        );
        assert_eq!(
            excuse(deny.clone(), &[&exception], "mallory", &no_groups, 150),
            deny
        );
        let image = decide_json(
            &index(Status::Deployed),
            &Config::default(),
            &deploy_update(
                "oncall",
                deployment(7, "nginx:1.27"),
                deployment(3, "nginx:1.25"),
            ),
        );
        assert_eq!(
            excuse(image.clone(), &[&exception], "oncall", &no_groups, 150),
            image
        );
    }

    /// What Helm owns follows the markers of the cluster's version: the same write to the same
    /// chart, decided with the embedded schema of each version (1.20's granular selectors became
    /// atomic; lists without a marker were always atomic; finalizers are a set throughout).
    #[test]
    fn the_same_write_is_decided_by_the_versions_markers() {
        use crate::schema::KubeVersion;
        let chart = "apiVersion: v1\nkind: Service\nmetadata: {name: svc, finalizers: [example.com/keep]}\nspec:\n  selector: {app: web}\n  ports: [{port: 80, protocol: TCP}]\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      nodeSelector: {disk: ssd}\n      tolerations: [{key: dedicated, operator: Exists}]\n      containers:\n      - name: web\n        image: nginx\n        args: [--port=80]\n        env: [{name: A, value: a}]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: reader}\nrules: [{apiGroups: [''], resources: [pods], verbs: [get]}]\n";
        let idx = index_of(chart);
        let owned = |object: Value| annotated(object, "shop");
        let service = |selector: Value, finalizers: Value| {
            owned(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "svc", "namespace": "shop", "finalizers": finalizers},
            "spec": {"selector": selector, "ports": [{"port": 80, "protocol": "TCP"}]}}))
        };
        let deployment = |pod: Value| {
            owned(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"}, "spec": {"template": {"spec": pod}}}))
        };
        let pod = |node: Value, tolerations: Value, args: Value, env: Value| {
            json!({"nodeSelector": node,
            "tolerations": tolerations, "containers": [{"name": "web", "image": "nginx", "args": args, "env": env}]})
        };
        let base_pod = || {
            pod(
                json!({"disk": "ssd"}),
                json!([{"key": "dedicated", "operator": "Exists"}]),
                json!(["--port=80"]),
                json!([{"name": "A", "value": "a"}]),
            )
        };
        let role = |rules: Value| {
            owned(
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "reader"}, "rules": rules}),
            )
        };
        let write = |kind: (&str, &str, &str, &str),
                     name: &str,
                     ns: Option<&str>,
                     new: Value,
                     old: Value| {
            let (group, version, kind, resource) = kind;
            review(
                "UPDATE",
                json!({"group": group, "version": version, "kind": kind}),
                json!({"group": group, "version": version, "resource": resource}),
                None,
                name,
                ns,
                "alice",
                new,
                old,
            )
        };
        let svc = ("", "v1", "Service", "services");
        let deploy = ("apps", "v1", "Deployment", "deployments");
        let cr = (
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
        );
        let base_svc = service(json!({"app": "web"}), json!(["example.com/keep"]));
        let rule = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]});
        // (what, the write, allowed on 1.20, 1.28, 1.34, 1.36)
        let cases = [
            (
                "a Service selector key",
                write(
                    svc,
                    "svc",
                    Some("shop"),
                    service(
                        json!({"app": "web", "tier": "x"}),
                        json!(["example.com/keep"]),
                    ),
                    base_svc.clone(),
                ),
                [true, false, false, false],
            ),
            (
                "a nodeSelector key",
                write(
                    deploy,
                    "web",
                    Some("shop"),
                    deployment(pod(
                        json!({"disk": "ssd", "zone": "a"}),
                        json!([{"key": "dedicated", "operator": "Exists"}]),
                        json!(["--port=80"]),
                        json!([{"name": "A", "value": "a"}]),
                    )),
                    deployment(base_pod()),
                ),
                [true, false, false, false],
            ),
            (
                "a toleration",
                write(
                    deploy,
                    "web",
                    Some("shop"),
                    deployment(pod(
                        json!({"disk": "ssd"}),
                        json!([{"key": "dedicated", "operator": "Exists"}, {"key": "gpu", "operator": "Exists"}]),
                        json!(["--port=80"]),
                        json!([{"name": "A", "value": "a"}]),
                    )),
                    deployment(base_pod()),
                ),
                [false; 4],
            ),
            (
                "an argument",
                write(
                    deploy,
                    "web",
                    Some("shop"),
                    deployment(pod(
                        json!({"disk": "ssd"}),
                        json!([{"key": "dedicated", "operator": "Exists"}]),
                        json!(["--port=80", "--debug"]),
                        json!([{"name": "A", "value": "a"}]),
                    )),
                    deployment(base_pod()),
                ),
                [false; 4],
            ),
            (
                "an env var",
                write(
                    deploy,
                    "web",
                    Some("shop"),
                    deployment(pod(
                        json!({"disk": "ssd"}),
                        json!([{"key": "dedicated", "operator": "Exists"}]),
                        json!(["--port=80"]),
                        json!([{"name": "A", "value": "a"}, {"name": "B", "value": "b"}]),
                    )),
                    deployment(base_pod()),
                ),
                [true; 4],
            ),
            (
                "an RBAC rule",
                write(
                    cr,
                    "reader",
                    None,
                    role(
                        json!([rule.clone(), {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]),
                    ),
                    role(json!([rule.clone()])),
                ),
                [false; 4],
            ),
            (
                "another finalizer",
                write(
                    svc,
                    "svc",
                    Some("shop"),
                    service(
                        json!({"app": "web"}),
                        json!(["example.com/keep", "example.com/other"]),
                    ),
                    base_svc.clone(),
                ),
                [true; 4],
            ),
            (
                "the chart's finalizer removed",
                write(
                    svc,
                    "svc",
                    Some("shop"),
                    service(json!({"app": "web"}), json!([])),
                    base_svc.clone(),
                ),
                [false; 4],
            ),
        ];
        for (what, body, expected) in cases {
            for (version, allowed) in KubeVersion::ALL.into_iter().zip(expected) {
                let d = decide(
                    &idx,
                    &Schema::embedded(version),
                    &Config::default(),
                    &parse_review(body.as_bytes()).unwrap().request,
                )
                .unwrap();
                assert_eq!(
                    d.is_allowed(),
                    allowed,
                    "{what} on {version}: {}",
                    d.explain()
                );
            }
        }
        assert_eq!(KubeVersion::parse("v1.30.2"), Some(KubeVersion::V1_28));
        assert_eq!(KubeVersion::parse("1.36"), Some(KubeVersion::V1_36));
        assert_eq!(KubeVersion::parse("1.19"), None);
    }

    #[test]
    fn evicting_a_locked_pod_is_deleting_it() {
        let idx = index_of(IDENTITY_CHART);
        let evict = |user: &str, name: &str| {
            review(
                "CREATE",
                json!({"group": "policy", "version": "v1beta1", "kind": "Eviction"}),
                json!({"group": "", "version": "v1", "resource": "pods"}),
                Some("eviction"),
                name,
                Some("shop"),
                user,
                json!({"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": name, "namespace": "shop"}}),
                Value::Null,
            )
        };
        let d = decide_json(&idx, &Config::default(), &evict("admin", "once"));
        let Decision::Deny(l) = &d else {
            panic!("{d:?}")
        };
        assert!(
            l.message.contains("evicting it deletes it"),
            "{}",
            l.message
        );
        assert!(decide_json(
            &idx,
            &Config::default(),
            &evict("admin", "not-in-the-chart")
        )
        .is_allowed());
    }
}
