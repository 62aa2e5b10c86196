//! Where releases come from: files and folders (offline, `--releases-dir`) or the API server.

pub mod files;
pub mod folder;
pub mod kube;
