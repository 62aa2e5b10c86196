//! What start-up costs a replica, per release, without an API server: `cargo bench --bench startup`.
//!
//! A replica is ready when it has read every release Secret of the cluster and indexed it. The
//! API server's part (listing, the transfer) is the same for every locker; this is the locker's
//! part, done on every core as the watch does it (`src/source/release_secrets.rs`):
//!
//! - **decode**: a Secret's `data.release` (as a Kubernetes client returns it, the Secret's own
//!   base64 already undone) to a release: base64, gunzip, the release JSON;
//! - **parse**: its manifest to the objects the index keeps ([`Index::prepare`]): each document's
//!   identity read on its lines and the manifest kept as one zstd frame (its documents parsed on
//!   first need); a document the identity reader gives up on is parsed to a tree and packed;
//! - **index**: the parsed releases upserted into an empty index ([`Index::upsert_prepared`]),
//!   and the same with every release in one namespace, under its bound and far over it (a
//!   tenant's flood of releases, all but ten refused);
//! - **all three**, the figure to compare builds by;
//! - **first read of every object**: after start, each object's content read once (its
//!   document decompressed and parsed), in the order each kind's list gives them, as the
//!   reverter's first comparison of every live object reads them. Not part of being ready.
//!
//! The releases are `scripts/scale.sh`'s (1,000 of 30 objects, [`synthetic_manifest`], 21 kB
//! each). Read a figure against `decode` in the same run: the machine's speed cancels out.
//! - **list bound**: the namespace bound applied to a list part by part, as the watch does,
//!   against the walk of the whole list after each part that it replaced.
//!
//! Printed once: the index's contents (frames and packed trees) against the manifests' bytes (what the index keeps at
//! rest). `STARTUP_RELEASES=N` sets the count.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use helm_locker_core::test_util::{helm_payload, release_json, synthetic_manifest};
use helm_locker_core::{parallel_map, Index, ReleaseSecret, SecretRef, Status};

/// One release's `data.release` as a client hands it over, and its Secret.
struct Listed {
    secret: SecretRef,
    helm_payload: Vec<u8>,
}

fn listed(releases: usize) -> (Vec<Listed>, usize) {
    let mut manifest_bytes = 0;
    let listed = (0..releases)
        .map(|i| {
            let (ns, name) = (format!("ns{}", i % 100), format!("app-{i}"));
            let manifest = synthetic_manifest(&name, 30);
            manifest_bytes += manifest.len();
            let release = release_json(&ns, &name, 1, Status::Deployed, &manifest);
            Listed {
                secret: SecretRef::secret(&ns, format!("sh.helm.release.v1.{name}.v1")),
                helm_payload: helm_payload(&release).into_bytes(),
            }
        })
        .collect();
    (listed, manifest_bytes)
}

fn decode(listed: &[Listed]) -> Vec<ReleaseSecret> {
    parallel_map(
        listed.iter().collect(),
        4,
        || (),
        |_, l| {
            helm_locker_core::release_secret_from_parts(
                l.secret.clone(),
                Default::default(),
                &l.helm_payload,
            )
            .expect("a synthetic release decodes")
        },
    )
}

fn startup(c: &mut Criterion) {
    let releases = std::env::var("STARTUP_RELEASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000);
    let (listed, manifest_bytes) = listed(releases);
    let decoded = decode(&listed);

    let index = {
        let mut index = Index::new();
        index.upsert_prepared(Index::prepare(decoded.clone()));
        index
    };
    let packed = helm_locker_core::test_util::packed_tree_bytes(&index);
    println!(
        "{releases} releases x 30 objects: manifests {manifest_bytes} bytes; contents in the index {packed} bytes ({:.3}x)",
        packed as f64 / manifest_bytes as f64
    );

    let mut group = c.benchmark_group(format!("startup {releases} releases x 30"));
    group.sample_size(10);
    group.throughput(Throughput::Elements(releases as u64));
    group.bench_function("decode", |b| b.iter(|| decode(black_box(&listed))));
    group.bench_function("parse", |b| {
        b.iter_batched(
            || decoded.clone(),
            |d| Index::prepare(black_box(d)),
            criterion::BatchSize::LargeInput,
        )
    });
    group.bench_function("index", |b| {
        b.iter_batched(
            || Index::prepare(decoded.clone()),
            |p| Index::new().upsert_prepared(black_box(p)).len(),
            criterion::BatchSize::LargeInput,
        )
    });
    // The same releases stored in one namespace (a team's, or a tenant's many small ones):
    // under the namespace's bound, each write settles nothing, known without a walk over the
    // namespace's releases.
    let in_one_namespace: Vec<_> = decoded
        .iter()
        .cloned()
        .map(|mut secret| {
            secret.secret.namespace = "one".into();
            secret.release.namespace = "one".into();
            secret
        })
        .collect();
    group.bench_function("index, every release in one namespace", |b| {
        b.iter_batched(
            || Index::prepare(in_one_namespace.clone()),
            |p| {
                Index::new()
                    .with_namespace_bound(usize::MAX)
                    .upsert_prepared(black_box(p))
                    .len()
            },
            criterion::BatchSize::LargeInput,
        )
    });
    // A tenant's namespace far over its bound (10 releases' worth): the list drops the rest
    // before indexing, as the release watch does, and each refused release costs no walk
    // over the namespace's releases.
    group.bench_function(
        "index, every release in one namespace, over its bound",
        |b| {
            b.iter_batched(
                || {
                    let mut prepared = Index::prepare(in_one_namespace.clone());
                    Index::new()
                        .with_namespace_bound(300)
                        .bound_listing(&mut prepared);
                    prepared
                },
                |p| {
                    Index::new()
                        .with_namespace_bound(300)
                        .upsert_prepared(black_box(p))
                        .len()
                },
                criterion::BatchSize::LargeInput,
            )
        },
    );
    // The reverter's first pass after start: every object's content read once, in the order
    // its kind's list gives them (kind, namespace, name), as drift() reads them.
    let mut in_list_order: Vec<_> = index
        .releases()
        .into_iter()
        .flat_map(|state| state.objects.iter().flatten())
        .collect();
    in_list_order
        .sort_by(|a, b| (&a.kind, &a.namespace, &a.name).cmp(&(&b.kind, &b.namespace, &b.name)));
    group.bench_function("first read of every object", |b| {
        b.iter(|| {
            in_list_order
                .iter()
                .filter(|o| !matches!(black_box(o.content()), helm_locker_core::Tree::Null))
                .count()
        })
    });
    group.bench_function("all three", |b| {
        b.iter(|| {
            let mut index = Index::new();
            index.upsert_prepared(Index::prepare(decode(black_box(&listed))));
            index.object_count()
        })
    });
    group.finish();
}

/// The namespace bound applied to a list as its parts arrive (256 Secrets a part, as the
/// release watch decodes them): 50,000 releases of one object each in 100 namespaces, all under
/// their bound. "walked each part" is what the watch did before [`ListingBound`]: the whole
/// list so far walked after every part, quadratic in the list; "as parts arrive" walks only a
/// namespace its part takes over its bound (here none).
///
/// [`ListingBound`]: helm_locker_core::ListingBound
fn list_bound(c: &mut Criterion) {
    let releases = 50_000;
    let secrets: Vec<ReleaseSecret> = (0..releases)
        .map(|i| {
            let (ns, name) = (format!("ns{}", i % 100), format!("app-{i}"));
            let manifest = synthetic_manifest(&name, 1);
            let release = release_json(&ns, &name, 1, Status::Deployed, &manifest);
            helm_locker_core::release_secret_from_parts(
                SecretRef::secret(&ns, format!("sh.helm.release.v1.{name}.v1")),
                Default::default(),
                helm_payload(&release).as_bytes(),
            )
            .expect("a synthetic release decodes")
        })
        .collect();
    let mut group = c.benchmark_group(format!("list bound {releases} releases, 256 a part"));
    group.sample_size(10);
    group.throughput(Throughput::Elements(releases as u64));
    let index = Index::new();
    group.bench_function("walked each part", |b| {
        b.iter_batched(
            || Index::prepare(secrets.clone()),
            |mut prepared| {
                for end in (256..prepared.len()).step_by(256).chain([prepared.len()]) {
                    index.bound_listing(black_box(&mut prepared[..end]));
                }
                prepared.len()
            },
            criterion::BatchSize::LargeInput,
        )
    });
    group.bench_function("as parts arrive", |b| {
        b.iter_batched(
            || Index::prepare(secrets.clone()),
            |mut prepared| {
                let mut bound = index.listing_bound();
                let mut from = 0;
                for end in (256..prepared.len()).step_by(256).chain([prepared.len()]) {
                    bound.add(black_box(&mut prepared[..end]), from);
                    from = end;
                }
                prepared.len()
            },
            criterion::BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, startup, list_bound);
criterion_main!(benches);
