//! Where releases come from.

pub mod files;
