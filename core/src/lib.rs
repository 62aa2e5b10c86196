//! helm-locker's pure core: what a Helm release locks and whether a write may change it.
//!
//! Data flows one way: release Secret -> [`release`] -> [`manifest`] -> [`index`]; and
//! AdmissionReview -> [`review`] -> [`decide`] (with [`ownership`] by the API's [`schema`] and
//! the [`policy`]) -> [`review`] response. Everything here is synchronous and does no I/O: the
//! binary crate (HTTP, TLS, Kubernetes watches, controllers) is a thin shell around it.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod author;
pub mod chart;
pub mod decide;
pub mod exception;
pub mod fields_v1;
pub mod fight;
pub mod index;
pub mod inspect;
pub mod interning;
pub mod kinds;
pub mod locked;
pub mod manifest;
pub mod ownership;
pub mod policy;
pub mod prune;
pub mod quantity;
pub mod release;
pub mod revert_plan;
pub mod review;
pub mod scan;
pub mod schema;
pub mod stamp;
pub mod trace;
pub mod tree;
pub mod yaml;

#[cfg(any(test, feature = "test-util"))]
pub mod test_util;
