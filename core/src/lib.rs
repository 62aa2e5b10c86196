//! helm-locker's pure core: what a Helm release locks and whether a write may change it.
//!
//! Data flows one way: release Secret -> [`release`] -> [`manifest`] -> [`index`]; and
//! AdmissionReview -> [`review`] -> [`decide`] (with [`ownership`] by the API's [`schema`] and
//! the [`policy`]) -> [`review`] response. Everything here is synchronous and does no I/O: the
//! binary crate (HTTP, TLS, Kubernetes watches, controllers) is a thin shell around it.
//!
//! The front door is the re-exports below: an index built from release Secrets, a review
//! parsed, a decision made. The modules stay public for the shell's reverter, plugin and tools,
//! which need their parts; modules nothing outside uses (`interning`, `locked`, `packed`,
//! `prune`, `scan`) are private.
//!
//! Every `pub` item is used outside this crate: named by the shell, its tests, the benches or
//! the fuzz targets, or held there as a value (the compiler's type-privacy check fails when such
//! a type is made `pub(crate)`). Three are kept public though nothing outside touches them,
//! because a public item holds them: `policy::ReleaseRule` (a field of `Config`, which callers
//! build with `..Config::default()`), `release::Layer` (carried by `DecodeError::NotBase64`)
//! and `policy::SelectorError` (`LabelSelector`'s `FromStr` error).
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub use decide::{decide, decide_found, find, Decision, Found};
pub use index::{Index, LockedObject, ReleaseKey, ReleaseState};
pub use policy::{Config, Mode};
pub use release::{ReleaseSecret, Status};
pub use review::{parse_review, render_response, Request};
pub use schema::{KubeVersion, Schema};

pub mod author;
pub mod chart;
pub mod decide;
pub mod exception;
pub mod fields_v1;
pub mod fight;
pub mod index;
pub mod inspect;
mod interning;
pub mod kinds;
mod locked;
pub mod manifest;
pub mod ownership;
mod packed;
pub mod parallel;
pub mod policy;
mod prune;
pub mod quantity;
pub mod release;
pub mod revert_plan;
pub mod review;
mod scan;
pub mod schema;
pub mod stamp;
pub mod trace;
pub mod tree;
pub mod yaml;

#[cfg(any(test, feature = "test-util"))]
pub mod test_util;
