//! Where releases come from: files and folders (offline, `--releases-dir`) or the API server.

pub(crate) mod author_key;
pub(crate) mod files;
pub(crate) mod folder;
pub(crate) mod lock_exceptions;
pub(crate) mod openapi;
pub(crate) mod release_secrets;

/// Gives memory freed after a full (re)index back to the system. Indexing a cluster holds its
/// manifests and their parsed form for a moment; glibc keeps such freed memory for later
/// allocations, and the process would keep the peak as its resident size.
#[allow(unsafe_code)]
pub(crate) fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free heap pages; it takes no pointers.
    unsafe {
        libc::malloc_trim(0);
    }
}
