//! Rule 7's fresh read: before a deny or a repair, the release's newest revision is read again
//! from its source of truth, so a write racing Helm's own start is not denied; and, for a
//! request that does not hold the stored object's metadata (a `Scale`, an `Eviction`), the
//! release the stored object's annotations name. The server asks through this trait; the
//! Kubernetes source and the reverter provide and use it.

use std::future::Future;
use std::pin::Pin;

use crate::core::{Author, AuthorAccess, ReleaseKey, Status};

pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A fresh read that did not happen.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfirmError {
    #[error("cannot list the release Secrets of {release}")]
    Revisions {
        release: ReleaseKey,
        #[source]
        source: kube::Error,
    },
    #[error("cannot ask whether {author} may {verb} {resource}")]
    Authorize {
        author: String,
        verb: String,
        resource: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot read the metadata of {resource} {name}")]
    Owner {
        resource: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// Reads a release's newest revision and its status straight from the source of truth
/// (rule 7); `None` when the release has no revision left. `known`: the newest revision the
/// index holds, where the read begins (revisions above it are Helm's work it has not seen);
/// the answer is the same with it or without, only cheaper.
pub(crate) trait Confirm: Send + Sync {
    fn newest_revision<'a>(
        &'a self,
        release: &'a ReleaseKey,
        known: Option<u64>,
    ) -> BoxFuture<'a, Result<Option<(u64, Status)>, ConfirmError>>;

    /// The release the stored object's `meta.helm.sh/release-name`/`-namespace` annotations
    /// name (`None`: it carries none, or is gone). `resource` is the object's own resource as
    /// an admission request names it (`apps/v1` `deployments` for a `deployments/scale`).
    fn owner_of<'a>(
        &'a self,
        resource: &'a StoredObject,
    ) -> BoxFuture<'a, Result<Option<ReleaseKey>, ConfirmError>>;

    /// Whether `author` may make `access`, as the API server's authorizer answers (a
    /// SubjectAccessReview as them): may a release at work take objects over from another
    /// ([`crate::core::hand_over`]).
    fn author_may<'a>(
        &'a self,
        author: &'a Author,
        access: &'a AuthorAccess,
    ) -> BoxFuture<'a, Result<bool, ConfirmError>>;
}

/// An object as an admission request addresses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StoredObject {
    pub group: String,
    pub version: String,
    /// The plural resource name (`deployments`).
    pub resource: String,
    pub namespace: Option<String>,
    pub name: String,
}
