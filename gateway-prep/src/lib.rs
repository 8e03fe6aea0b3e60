//! The operator tool that checks and prepares a gateway host for an admitted operator.
//!
//! Not built yet: it comes in a later issue. This crate exists so the workspace has its final
//! shape.

#![forbid(unsafe_code)]
