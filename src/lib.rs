//! helm-locker: makes Helm the only way to change what Helm installed.
//!
//! Data flows one way: release Secret -> [`release`] -> [`manifest`] -> [`index`]; and
//! AdmissionReview -> [`admission`] -> [`decide`] (with [`ownership`] by the API's [`schema`]) -> response. These modules
//! are pure and synchronous; I/O lives in the binary's shell.

pub mod admission;
pub mod config;
pub mod controller;
pub mod decide;
pub mod helmrelease;
pub mod index;
pub mod inspect;
pub mod interning;
pub mod kinds;
pub mod manifest;
pub mod ownership;
pub mod quantity;
pub mod release;
pub mod revert;
pub mod schema;
pub mod server;
pub mod source;
pub mod tree;
pub mod yaml;
