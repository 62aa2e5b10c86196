//! The bounds on what a release may expand to, set once at start from the flags
//! (`--max-release-bytes`, `--max-release-objects`) and read by every decode of release data:
//! a tenant who may write a release Secret can make it this large and no larger.

use std::sync::atomic::{AtomicU64, Ordering};

/// The default limit on a release's size once decompressed (`--max-release-bytes`). Helm stores
/// a release in one Secret, and the API server takes at most 1 MiB of Secret data: at most
/// 768 KiB of gzip under Helm's base64. A release's JSON carries its chart's templates and
/// files base64-encoded, which compress poorly: the recorded releases (tests/fixtures) compress
/// 2.7 times; even plain YAML compressing 10 times, a full Secret is 7.5 MiB decompressed.
/// 16 MiB is twice that, and keeps decoding one release (its JSON and the strings parsed from
/// it, about twice the limit) at 32 MiB, four decoded together at 128 MiB: under the chart's
/// 256 MiB memory limit.
pub const DEFAULT_MAX_RELEASE_BYTES: u64 = 16 * 1024 * 1024;

/// The limit in force ([`set_max_release_bytes`]), read by every decode of release data.
static MAX_RELEASE_BYTES: AtomicU64 = AtomicU64::new(DEFAULT_MAX_RELEASE_BYTES);

/// Sets the limit on a release's decompressed size for every decode of release data (once, at
/// start, from the flag); a release larger is [`crate::DecodeError::TooLarge`], never decompressed past it.
pub fn set_max_release_bytes(bytes: u64) {
    MAX_RELEASE_BYTES.store(bytes.max(1), Ordering::Relaxed);
}

/// The limit on a release's decompressed size in force.
pub fn max_release_bytes() -> u64 {
    MAX_RELEASE_BYTES.load(Ordering::Relaxed)
}

/// The default limit on the objects one release renders (`--max-release-objects`): its
/// manifest's documents and its hooks. The largest of the twelve public charts the locker is
/// tried on (kube-prometheus-stack) renders about 150 objects, the largest charts in common use
/// (GitLab's, Istio's with every component) under 1,000; 5,000 is five times that. A tenant's
/// release at the limit is at most 5,000 objects in the index, not the 200,000 that 16 MiB of
/// small ConfigMaps make.
pub const DEFAULT_MAX_RELEASE_OBJECTS: u64 = 5_000;

/// The limit in force ([`set_max_release_objects`]), read by every decode of release data.
static MAX_RELEASE_OBJECTS: AtomicU64 = AtomicU64::new(DEFAULT_MAX_RELEASE_OBJECTS);

/// Sets the limit on the objects a release renders for every decode of release data (once, at
/// start, from the flag); a release with more is [`crate::DecodeError::TooManyObjects`].
pub fn set_max_release_objects(objects: u64) {
    MAX_RELEASE_OBJECTS.store(objects.max(1), Ordering::Relaxed);
}

/// The limit on the objects a release renders in force.
pub fn max_release_objects() -> u64 {
    MAX_RELEASE_OBJECTS.load(Ordering::Relaxed)
}

/// The default limit on the objects the index keeps of the releases stored in one namespace
/// (`--max-namespace-objects`). A tenant who may write release Secrets in her namespace makes
/// as many releases as she likes, each within `--max-release-objects`: each of 5,000 objects
/// adds about 13 MiB to the start-up peak, so twelve took the locker past the chart's 256 MiB
/// memory limit. 20,000 objects (four releases at the object limit, a hundred times the largest
/// public chart tried) is about 52 MiB at the start-up peak over the 80 MiB of an idle locker:
/// one namespace full leaves the chart's limit with room for the rest of the cluster.
pub const DEFAULT_MAX_NAMESPACE_OBJECTS: u64 = 20_000;

/// The limit in force ([`set_max_namespace_objects`]), read by every [`crate::Index`] built
/// without its own.
static MAX_NAMESPACE_OBJECTS: AtomicU64 = AtomicU64::new(DEFAULT_MAX_NAMESPACE_OBJECTS);

/// Sets the limit on the objects the index keeps per storage namespace (once, at start, from
/// the flag).
pub fn set_max_namespace_objects(objects: u64) {
    MAX_NAMESPACE_OBJECTS.store(objects.max(1), Ordering::Relaxed);
}

/// The limit on the objects the index keeps per storage namespace in force.
pub fn max_namespace_objects() -> u64 {
    MAX_NAMESPACE_OBJECTS.load(Ordering::Relaxed)
}
