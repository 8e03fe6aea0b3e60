//! The ingress relay: the coordinator (routes, quotes and funding, hostnames, route
//! validation, status) and the public gateway that routes TLS by SNI to jobs.
//!
//! Not built yet: the ingress add-on comes in later issues. This crate exists so the
//! workspace has its final shape.

#![forbid(unsafe_code)]
