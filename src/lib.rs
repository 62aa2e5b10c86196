//! helm-locker's shell: the HTTPS admission server, the sources that keep the index current
//! (release Secrets, a folder of releases, the API's schema), the controllers (drift reverter,
//! HelmRelease status, leader election), and the composition root [`app`] that `main.rs`
//! calls.
//!
//! The decisions are made in the pure core crate, `helm-locker-core`; its modules are
//! re-exported here so the shell, the tests and the benches name one path for each.
#![deny(rust_2018_idioms)]
// Two calls into libc are unsafe (malloc_trim, restoring SIGPIPE); each is allowed where it is.
#![deny(unsafe_code)]

pub use helm_locker_core::{
    chart, decide, exception, fields_v1, index, inspect, interning, kinds, manifest, ownership,
    policy, quantity, release, revert_plan, review, schema, trace, tree, yaml,
};

pub mod app;
pub mod attempts;
pub mod chart_files;
mod config_file;
pub mod confirm;
pub mod controller;
pub mod crd;
pub mod index_store;
pub mod lock_exception;
pub mod metrics;
pub mod plugin;
pub mod readiness;
pub mod server;
pub mod source;
