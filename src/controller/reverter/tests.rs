//! Unit tests of a reconcile's steps, without a cluster: the API server is an in-memory
//! [`Cluster`] that keeps one namespace's ConfigMaps, and the fresh read a [`Confirm`] that
//! answers one revision.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use kube::api::DynamicObject;
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::events::Event;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};

use crate::confirm::{BoxFuture, Confirm, ConfirmError, StoredObject};
use crate::core::test_util::release_secret;
use crate::core::{
    Author, AuthorAccess, AuthorNeed, AuthorPermission, Authorship, Config, Index, ReleaseKey,
    Schema, Status, UnknownAuthor, FIGHT_REVERTS,
};
use crate::index_store::IndexStore;
use crate::live_config::LiveConfig;
use crate::metrics::Metrics;

use super::attempt::{Failure, Outcome, SkipReason};
use super::cluster::{Cluster, Place, Write};
use super::key::{Job, ObjectKey};
use super::parts::Parts;
use super::reconcile::Reconcile;
use super::worker::Worker;

const CHART: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: b\n";

fn api_error(code: u16) -> kube::Error {
    kube::Error::Api(Box::new(kube::core::Status {
        code,
        message: format!("answered {code}"),
        ..Default::default()
    }))
}

/// The API server, in memory: the ConfigMaps of namespace `shop`, by name.
#[derive(Default)]
struct FakeCluster {
    objects: Mutex<HashMap<String, Value>>,
    /// The author may not make the writes asked.
    refuse_author: AtomicBool,
    /// The API server stores nothing of what is written (a dry run answers the object as it is).
    drops_writes: AtomicBool,
    /// Guarded writes answered 409 (another writer came first), each after that writer's
    /// write: the object's resourceVersion moves on.
    conflicts: Mutex<usize>,
    /// The writes stored (not dry runs).
    writes: Mutex<usize>,
    /// The reasons of the Events published.
    events: Mutex<Vec<String>>,
    /// The names of the objects written, in order.
    written: Mutex<Vec<String>>,
    /// What a dry-run create answers ([`Cluster::stored_form`]): the body with these defaults
    /// filled in (merged), or this status code; `None`: the body as it is.
    stored_form: Mutex<Option<Result<Value, u16>>>,
    /// The dry-run creates asked.
    stored_form_asks: Mutex<usize>,
}

impl FakeCluster {
    fn with(live: Value) -> Self {
        let cluster = FakeCluster::default();
        cluster.put(live);
        cluster
    }

    fn put(&self, live: Value) {
        let name = live["metadata"]["name"].as_str().unwrap().to_string();
        self.objects.lock().unwrap().insert(name, live);
    }

    fn object(&self) -> Option<Value> {
        self.objects.lock().unwrap().get("settings").cloned()
    }

    fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }

    fn writes(&self) -> usize {
        *self.writes.lock().unwrap()
    }

    fn store(&self, mut object: Value) -> Result<DynamicObject, kube::Error> {
        let rv: u64 = object["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|rv| rv.parse().ok())
            .unwrap_or(0);
        object["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
        self.put(object.clone());
        *self.writes.lock().unwrap() += 1;
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        self.written.lock().unwrap().push(name.to_string());
        serde_json::from_value(object).map_err(kube::Error::SerdeError)
    }
}

impl Cluster for FakeCluster {
    fn discover<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
    ) -> BoxFuture<'a, Result<(ApiResource, bool), kube::Error>> {
        Box::pin(async move { Ok((ApiResource::from_gvk(gvk), true)) })
    }

    fn get<'a>(&'a self, place: &'a Place) -> BoxFuture<'a, Result<Option<Value>, kube::Error>> {
        Box::pin(async move { Ok(self.objects.lock().unwrap().get(&place.name).cloned()) })
    }

    fn patch<'a>(
        &'a self,
        place: &'a Place,
        write: &'a Write,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<DynamicObject, kube::Error>> {
        Box::pin(async move {
            let Some(mut object) = self.objects.lock().unwrap().get(&place.name).cloned() else {
                return Err(api_error(404));
            };
            if dry_run && self.drops_writes.load(Ordering::Relaxed) {
                return serde_json::from_value(object).map_err(kube::Error::SerdeError);
            }
            if !dry_run {
                let mut conflicts = self.conflicts.lock().unwrap();
                if *conflicts > 0 {
                    *conflicts -= 1;
                    // Another writer's write, then the answer to this one.
                    drop(conflicts);
                    self.store(object)?;
                    return Err(api_error(409));
                }
            }
            match write {
                Write::Json { patch, .. } => {
                    json_patch::patch(&mut object, patch).map_err(|_| api_error(422))?
                }
                Write::Apply { body, .. } => json_patch::merge(&mut object, body),
            }
            if dry_run {
                return serde_json::from_value(object).map_err(kube::Error::SerdeError);
            }
            self.store(object)
        })
    }

    fn create<'a>(
        &'a self,
        _place: &'a Place,
        _manager: &'a str,
        body: &'a DynamicObject,
    ) -> BoxFuture<'a, Result<DynamicObject, kube::Error>> {
        Box::pin(async move {
            let mut object = serde_json::to_value(body).map_err(kube::Error::SerdeError)?;
            object["metadata"]["uid"] = json!("uid-2");
            self.store(object)
        })
    }

    fn stored_form<'a>(
        &'a self,
        _place: &'a Place,
        body: &'a Value,
    ) -> BoxFuture<'a, Result<Value, kube::Error>> {
        Box::pin(async move {
            *self.stored_form_asks.lock().unwrap() += 1;
            let mut answer = body.clone();
            match self.stored_form.lock().unwrap().clone() {
                None => {}
                Some(Ok(defaults)) => json_patch::merge(&mut answer, &defaults),
                Some(Err(code)) => return Err(api_error(code)),
            }
            Ok(answer)
        })
    }

    fn author_permission<'a>(
        &'a self,
        author: &'a Authorship,
        needed: &'a [AuthorNeed],
    ) -> BoxFuture<'a, Result<AuthorPermission, kube::Error>> {
        Box::pin(async move {
            Ok(match author {
                Authorship::Unknown(why) => AuthorPermission::NoAuthor(*why),
                Authorship::Known(_) if self.refuse_author.load(Ordering::Relaxed) => {
                    AuthorPermission::Refused(
                        needed.iter().map(|need| need.access.clone()).collect(),
                    )
                }
                Authorship::Known(_) => AuthorPermission::Granted,
            })
        })
    }

    fn publish<'a>(
        &'a self,
        event: &'a Event,
        _reference: &'a k8s_openapi::api::core::v1::ObjectReference,
    ) -> BoxFuture<'a, Result<(), kube::Error>> {
        Box::pin(async move {
            self.events.lock().unwrap().push(event.reason.clone());
            Ok(())
        })
    }
}

/// The fresh read: the release's newest revision, as the source of truth answers.
struct FakeConfirm(Option<(u64, Status)>);

impl Confirm for FakeConfirm {
    fn newest_revision<'a>(
        &'a self,
        _release: &'a ReleaseKey,
        _known: Option<u64>,
    ) -> BoxFuture<'a, Result<Option<(u64, Status)>, ConfirmError>> {
        Box::pin(async move { Ok(self.0) })
    }

    fn owner_of<'a>(
        &'a self,
        _resource: &'a StoredObject,
    ) -> BoxFuture<'a, Result<Option<ReleaseKey>, ConfirmError>> {
        Box::pin(async { Ok(None) })
    }

    fn author_may<'a>(
        &'a self,
        _author: &'a Author,
        _access: &'a AuthorAccess,
    ) -> BoxFuture<'a, Result<bool, ConfirmError>> {
        Box::pin(async { Ok(true) })
    }
}

/// The ConfigMap as the API server has it: the release's, with `a` set to `value`.
fn live(value: &str) -> Value {
    live_of("settings", "shop", value)
}

/// ConfigMap `name` of release `release` (in `shop`), with `a` set to `value`.
fn live_of(name: &str, release: &str, value: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": name, "namespace": "shop", "uid": format!("uid-{name}"), "resourceVersion": "7",
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": "shop"},
        },
        "data": {"a": value},
    })
}

fn data(cluster: &FakeCluster) -> Option<String> {
    cluster
        .object()
        .and_then(|o| o["data"]["a"].as_str().map(str::to_string))
}

/// One release `shop/shop` at revision 1, deployed, rendering the ConfigMap, written by `author`.
struct World {
    index: IndexStore,
    config: LiveConfig,
    schema: crate::source::openapi::SharedSchema,
    leader: watch::Receiver<bool>,
    _leading: watch::Sender<bool>,
    metrics: Arc<Metrics>,
    parts: Parts,
    worker: Worker,
    confirm: FakeConfirm,
    recreate: bool,
}

impl World {
    fn new(author: Authorship) -> Self {
        let mut secret = release_secret("shop", "shop", 1, Status::Deployed, CHART);
        secret.author = author;
        let (leading, leader) = watch::channel(true);
        let metrics = Arc::new(Metrics::new());
        World {
            index: IndexStore::new(Index::from_secrets([secret])),
            config: LiveConfig::new(Config {
                ownership_returned: true,
                ..Config::default()
            }),
            schema: arc_swap::ArcSwap::new(Schema::builtin()),
            leader,
            _leading: leading,
            parts: Parts::new(&metrics),
            metrics,
            worker: Worker::new(mpsc::unbounded_channel().0),
            confirm: FakeConfirm(Some((1, Status::Deployed))),
            recreate: true,
        }
    }

    fn known() -> Self {
        World::new(alice())
    }

    fn reconcile<'r>(&'r self, cluster: &'r FakeCluster) -> Reconcile<'r> {
        Reconcile {
            cluster,
            confirm: &self.confirm,
            index: &self.index,
            config: &self.config,
            schema: &self.schema,
            leader: &self.leader,
            recreate: self.recreate,
            parts: &self.parts,
        }
    }

    /// One attempt at the ConfigMap, as a job that has waited its backoff (a test's reverts
    /// follow each other at once).
    async fn once(&mut self, cluster: &FakeCluster) -> Result<Outcome, Failure> {
        self.once_at(cluster, &job()).await
    }

    async fn once_at(&mut self, cluster: &FakeCluster, job: &Job) -> Result<Outcome, Failure> {
        let mut worker =
            std::mem::replace(&mut self.worker, Worker::new(mpsc::unbounded_channel().0));
        let outcome = self.reconcile(cluster).once(&mut worker, job, None).await;
        self.worker = worker;
        outcome
    }
}

fn alice() -> Authorship {
    Authorship::Known(Arc::new(Author {
        username: "alice".into(),
        ..Author::default()
    }))
}

fn job() -> Job {
    job_for("settings")
}

/// A job for ConfigMap `name` in `shop`.
fn job_for(name: &str) -> Job {
    Job {
        key: ObjectKey {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("shop".into()),
            name: name.into(),
        },
        writer: None,
        delayed: true,
    }
}

#[tokio::test]
async fn drift_is_written_back_with_a_reverted_event() {
    let mut world = World::known();
    let cluster = FakeCluster::with(live("changed"));
    assert_eq!(world.once(&cluster).await.unwrap(), Outcome::Reverted);
    assert_eq!(data(&cluster).as_deref(), Some("b"));
    assert_eq!(cluster.events(), ["Reverted"]);
    // Nothing left to write.
    assert_eq!(world.once(&cluster).await.unwrap(), Outcome::InSync);
    assert_eq!(cluster.writes(), 1);
}

#[tokio::test]
async fn an_author_without_the_rights_is_refused_and_reported_once() {
    let mut world = World::known();
    let cluster = FakeCluster {
        refuse_author: AtomicBool::new(true),
        ..FakeCluster::with(live("changed"))
    };
    assert_eq!(world.once(&cluster).await.unwrap(), Outcome::Refused);
    assert_eq!(world.once(&cluster).await.unwrap(), Outcome::Refused);
    assert_eq!(data(&cluster).as_deref(), Some("changed"));
    assert_eq!(cluster.events(), ["AuthorLacksRights"]);
    assert_eq!(world.metrics.author_refused_objects.get(), 1);
}

#[tokio::test]
async fn a_revision_whose_author_was_not_read_writes_nothing() {
    let mut world = World::new(Authorship::Unknown(UnknownAuthor::NotRead));
    let cluster = FakeCluster::with(live("changed"));
    assert_eq!(world.once(&cluster).await.unwrap(), Outcome::Refused);
    assert_eq!(data(&cluster).as_deref(), Some("changed"));
    assert_eq!(cluster.events(), ["UnknownAuthor"]);
    assert_eq!(cluster.writes(), 0);
}

#[tokio::test]
async fn an_unstamped_revision_holds_what_was_live_at_first_sight() {
    let mut world = World::new(Authorship::Unknown(UnknownAuthor::NotStamped));
    let cluster = FakeCluster::with(live("changed"));
    // First seen differing at data.a: held there, at what is live, and reported.
    assert_eq!(world.once(&cluster).await.unwrap(), Outcome::InSync);
    assert_eq!(world.metrics.held_objects.get(), 1);
    assert_eq!(cluster.events(), ["UnknownAuthor"]);
    // Changed again: data.a is held, never written from that revision.
    cluster.put(live("again"));
    assert_eq!(world.once(&cluster).await.unwrap(), Outcome::InSync);
    assert_eq!(data(&cluster).as_deref(), Some("again"));
    assert_eq!(cluster.writes(), 0);
    // The release uninstalled: nothing is held any more.
    world.parts.holds.forget(&Index::new());
    assert_eq!(world.metrics.held_objects.get(), 0);
}

#[tokio::test]
async fn an_unstamped_revision_holds_nothing_where_the_api_server_stores_it_as_live() {
    let mut world = World::new(Authorship::Unknown(UnknownAuthor::NotStamped));
    let cluster = FakeCluster::with(live("changed"));
    // The local comparison differs at data.a; the API server answers that it would store the
    // revision's object with `a: changed` (as a default it fills in would be).
    *cluster.stored_form.lock().unwrap() = Some(Ok(json!({"data": {"a": "changed"}})));
    world.once(&cluster).await.unwrap();
    assert_eq!(world.metrics.held_objects.get(), 0);
    assert!(!cluster.events().contains(&"UnknownAuthor".to_string()));
    assert_eq!(*cluster.stored_form_asks.lock().unwrap(), 1);
    // Asked once per object and revision.
    world.once(&cluster).await.unwrap();
    assert_eq!(*cluster.stored_form_asks.lock().unwrap(), 1);
}

#[tokio::test]
async fn an_unstamped_revision_holds_where_the_api_server_stores_it_otherwise() {
    let mut world = World::new(Authorship::Unknown(UnknownAuthor::NotStamped));
    let cluster = FakeCluster::with(live("changed"));
    // The dry run answers `a: b`, the revision's: live differs from it for real.
    assert_eq!(world.once(&cluster).await.unwrap(), Outcome::InSync);
    assert_eq!(*cluster.stored_form_asks.lock().unwrap(), 1);
    assert_eq!(world.metrics.held_objects.get(), 1);
    assert_eq!(cluster.events(), ["UnknownAuthor"]);
    assert_eq!(cluster.writes(), 0);
}

#[tokio::test]
async fn an_unstamped_revision_holds_when_the_api_server_refuses_the_dry_run() {
    let mut world = World::new(Authorship::Unknown(UnknownAuthor::NotStamped));
    let cluster = FakeCluster::with(live("changed"));
    // No create on the kind (revert.recreate=false): the local answer stands.
    *cluster.stored_form.lock().unwrap() = Some(Err(403));
    assert_eq!(world.once(&cluster).await.unwrap(), Outcome::InSync);
    assert_eq!(*cluster.stored_form_asks.lock().unwrap(), 1);
    assert_eq!(world.metrics.held_objects.get(), 1);
    assert_eq!(cluster.events(), ["UnknownAuthor"]);
    cluster.put(live("again"));
    world.once(&cluster).await.unwrap();
    assert_eq!(data(&cluster).as_deref(), Some("again"));
    assert_eq!(cluster.writes(), 0);
}

/// A writer rule gives `data.a` of the ConfigMap to the operator's service account.
fn operator_rule() -> crate::core::WriterRule {
    serde_saphyr::from_str("id: operator-a\nwriters: {serviceAccounts: [ops/operator]}\nobjects: {release: {namespace: shop, name: shop}, group: '', kind: ConfigMap, names: [settings]}\npaths: [/data/a]\nreason: the operator tunes a\n").unwrap()
}

#[tokio::test]
async fn a_path_a_writer_rule_gives_is_left_while_it_stands_and_reverted_once_it_goes() {
    let mut world = World::known();
    let cluster = FakeCluster::with(live("tuned"));
    let (_, refused) = world.config.apply_rules(vec![operator_rule()]);
    assert!(refused.is_empty());
    // The rule stands: no revert, no fight, however often the writer keeps it.
    for _ in 0..=FIGHT_REVERTS {
        assert_eq!(world.once(&cluster).await.unwrap(), Outcome::InSync);
    }
    assert_eq!(data(&cluster).as_deref(), Some("tuned"));
    assert_eq!(cluster.writes(), 0);
    assert_eq!(world.metrics.revert_fights.get(), 0);
    // The rule is gone: the next reconcile puts the chart's value back.
    world.config.apply_rules(vec![]);
    assert_eq!(world.once(&cluster).await.unwrap(), Outcome::Reverted);
    assert_eq!(data(&cluster).as_deref(), Some("b"));
}

#[tokio::test]
async fn a_writer_that_changes_the_fields_back_each_time_is_left_to_it() {
    let mut world = World::known();
    let cluster = FakeCluster::with(live("changed"));
    for _ in 0..FIGHT_REVERTS {
        assert_eq!(world.once(&cluster).await.unwrap(), Outcome::Reverted);
        cluster.put(live("changed"));
    }
    assert_eq!(
        world.once(&cluster).await.unwrap(),
        Outcome::Skipped(SkipReason::FightStopped)
    );
    assert_eq!(
        world.once(&cluster).await.unwrap(),
        Outcome::Skipped(SkipReason::FightLeftToOther)
    );
    assert_eq!(data(&cluster).as_deref(), Some("changed"));
    assert_eq!(
        cluster.events().last().map(String::as_str),
        Some("RevertFight")
    );
    assert_eq!(world.metrics.revert_fights.get(), 1);
}

#[tokio::test]
async fn a_write_that_meets_a_concurrent_write_is_tried_again_on_a_fresh_read() {
    let mut world = World::known();
    let cluster = FakeCluster::with(live("changed"));
    *cluster.conflicts.lock().unwrap() = 1;
    // One attempt: the guarded patch conflicts, on the version it read.
    match world.once(&cluster).await {
        Err(Failure::Conflict(conflict)) => assert_eq!(conflict.resource_version, "7"),
        other => panic!("{other:?}"),
    }
    assert_eq!(data(&cluster).as_deref(), Some("changed"));
    // A reconcile reads again at once and writes.
    *cluster.conflicts.lock().unwrap() = 1;
    let mut worker = Worker::new(mpsc::unbounded_channel().0);
    let outcome = world.reconcile(&cluster).run(&mut worker, &job()).await;
    assert_eq!(outcome.unwrap(), Outcome::Reverted);
    assert_eq!(data(&cluster).as_deref(), Some("b"));
}

#[tokio::test]
async fn a_deleted_object_is_created_again_only_when_seen_as_the_releases() {
    let mut world = World::known();
    // Never seen: reported missing once, left to helm upgrade.
    let cluster = FakeCluster::default();
    let missing = Outcome::Skipped(SkipReason::LeftToHelmUpgrade);
    assert_eq!(world.once(&cluster).await.unwrap(), missing);
    assert_eq!(world.once(&cluster).await.unwrap(), missing);
    assert_eq!(cluster.events(), ["LockedObjectMissing"]);
    assert_eq!(world.metrics.missing_objects.get(), 1);
    // Seen carrying the release's annotations, then deleted: created again.
    let object = world
        .index
        .snapshot()
        .lookup("", "ConfigMap", Some("shop"), "settings")
        .unwrap()
        .clone();
    world.parts.proofs.deleted(&object, &live("changed"));
    assert_eq!(world.once(&cluster).await.unwrap(), Outcome::Recreated);
    assert_eq!(data(&cluster).as_deref(), Some("b"));
    // With --recreate=false, never.
    let mut world = World {
        recreate: false,
        ..World::known()
    };
    world.parts.proofs.deleted(&object, &live("changed"));
    assert_eq!(world.once(&FakeCluster::default()).await.unwrap(), missing);
}

#[tokio::test]
async fn nothing_is_written_for_a_release_gone_or_changed_on_the_api_server() {
    let cluster = FakeCluster::with(live("changed"));
    // The index has moved on: the release uninstalled.
    let mut world = World::known();
    world.index = IndexStore::new(Index::new());
    assert_eq!(
        world.once(&cluster).await.unwrap(),
        Outcome::Skipped(SkipReason::NoLongerLocked)
    );
    // The index lags: the API server has no revision left, or a newer one.
    for fresh in [
        None,
        Some((2, Status::Deployed)),
        Some((1, Status::PendingUpgrade)),
    ] {
        let mut world = World {
            confirm: FakeConfirm(fresh),
            ..World::known()
        };
        assert_eq!(
            world.once(&cluster).await.unwrap(),
            Outcome::Skipped(SkipReason::ReleaseChanged)
        );
    }
    assert_eq!(cluster.writes(), 0);
    assert!(cluster.events().is_empty());
}

/// Issue 64's churn: releases installed, their objects reverted, refused, left unstored and
/// fought over, then uninstalled; what the reverter keeps per object is forgotten with them,
/// as the watches and the work loop forget it, so it stays flat however long this goes on.
#[tokio::test]
async fn what_is_kept_per_object_is_forgotten_with_its_release() {
    let mut world = World::known();
    let cluster = FakeCluster::default();
    for i in 0..40 {
        let (release, name) = (format!("r{i}"), format!("c{i}"));
        let mut secret = release_secret(
            "shop",
            &release,
            1,
            Status::Deployed,
            &CHART.replace("settings", &name),
        );
        secret.author = alice();
        world.index.update_now(|index| index.upsert(secret));
        cluster.refuse_author.store(i % 4 == 1, Ordering::Relaxed);
        cluster.drops_writes.store(i % 4 == 2, Ordering::Relaxed);
        // Every fourth object fought over until the fight stops.
        let rounds = if i % 4 == 3 { FIGHT_REVERTS + 1 } else { 1 };
        for _ in 0..rounds {
            cluster.put(live_of(&name, &release, "changed"));
            world.once_at(&cluster, &job_for(&name)).await.unwrap();
        }
        let kept = world.parts.kept() + world.worker.kept();
        assert!(kept > 0, "round {i}: nothing was kept to forget");
        // helm uninstall: the release and its object go.
        cluster.objects.lock().unwrap().remove(&name);
        world
            .index
            .update_now(|index| index.remove_release(&ReleaseKey::new("shop", &release)));
        let index = world.index.snapshot();
        world.parts.forget_unclaimed(&index);
        world.parts.holds.forget(&index);
        world.worker.forget_unclaimed(&index);
        assert_eq!(world.parts.kept(), 0, "round {i}: kept after the uninstall");
        // The worker forgets once a map of it holds more objects than the releases render (one,
        // the release `shop`'s, left installed throughout).
        assert!(world.worker.kept() <= 2 * index.object_count(), "round {i}");
    }
    assert_eq!(world.metrics.revert_fights.get(), 0);
    assert_eq!(world.metrics.author_refused_objects.get(), 0);
    assert_eq!(world.metrics.unproven_objects.get(), 0);
}

/// The work loop takes one object of each release in turn: a release with many objects to
/// revert (queued first) delays another release's drift by one write, not by all of its own
/// (each write is at least `MIN_WRITE_INTERVAL` after the last: 30 of them first were 1.5 s).
#[tokio::test]
async fn a_release_with_many_objects_to_revert_does_not_starve_anothers_drift() {
    let many: String = (0..30)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m{i}\ndata:\n  a: b\n"
            )
        })
        .collect();
    let mut world = World::known();
    let mut tenant = release_secret("shop", "many", 1, Status::Deployed, &many);
    tenant.author = alice();
    let mut admin = release_secret("shop", "shop", 1, Status::Deployed, CHART);
    admin.author = alice();
    world.index = IndexStore::new(Index::from_secrets([tenant, admin]));
    let cluster = FakeCluster::with(live("changed"));
    for i in 0..30 {
        cluster.put(live_of(&format!("m{i}"), "many", "changed"));
    }
    let (tx, rx) = mpsc::unbounded_channel();
    for i in 0..30 {
        tx.send(job_for(&format!("m{i}"))).unwrap();
    }
    tx.send(job()).unwrap();
    let metrics = world.metrics.clone();
    let reconcile = world.reconcile(&cluster);
    let written = || cluster.written.lock().unwrap().clone();
    tokio::select! {
        _ = super::work::work(reconcile, &metrics, rx, tx.clone()) => {}
        _ = async {
            while !written().iter().any(|name| name == "settings") {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        } => {}
        _ = tokio::time::sleep(std::time::Duration::from_secs(10)) => {}
    }
    let written = written();
    let at = written.iter().position(|name| name == "settings");
    assert!(
        matches!(at, Some(0 | 1)),
        "written in this order: {written:?}"
    );
    assert_eq!(data(&cluster).as_deref(), Some("b"));
}
