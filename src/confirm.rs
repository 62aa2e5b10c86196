//! Rule 7's fresh read: before a deny or a repair, the release's newest revision is read again
//! from its source of truth, so a write racing Helm's own start is not denied. The server asks
//! through this trait; the Kubernetes source and the reverter provide and use it.

use std::future::Future;
use std::pin::Pin;

use crate::index::ReleaseKey;
use crate::release::Status;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Reads a release's newest revision and its status straight from the source of truth
/// (rule 7); `None` when the release has no revision left.
pub trait Confirm: Send + Sync {
    fn newest_revision<'a>(
        &'a self,
        release: &'a ReleaseKey,
    ) -> BoxFuture<'a, Result<Option<(u64, Status)>, String>>;
}
