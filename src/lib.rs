//! helm-locker's shell: the HTTPS admission server, the sources that keep the index current
//! (release Secrets, a folder of releases, the API's schema), the controllers (drift reverter,
//! HelmRelease status, leader election), and the composition root [`app`] that `main.rs`
//! calls.
//!
//! The decisions are made in the pure core crate, `helm-locker-core`, named here [`core`]: a
//! path through `crate::core::` is a pure function; anything else in this crate does I/O.
#![deny(rust_2018_idioms)]
// Two calls into libc are unsafe (malloc_trim, restoring SIGPIPE); each is allowed where it is.
#![deny(unsafe_code)]

pub use helm_locker_core as core;

pub mod app;
pub(crate) mod attempts;
pub(crate) mod chart_files;
pub(crate) mod cli;
mod config_file;
pub(crate) mod confirm;
pub mod controller;
pub(crate) mod crd;
mod error_chain;
pub(crate) mod events;
pub(crate) mod index_store;
pub(crate) mod learning;
pub(crate) mod live_config;
pub(crate) mod lock_exception;
pub(crate) mod metrics;
pub(crate) mod offline;
pub(crate) mod plugin;
pub(crate) mod readiness;
pub mod server;
pub(crate) mod sharded_metrics;
pub(crate) mod source;
