//! The job-side agent: keeps the TLS private key, gets its certificate, serves `/health` and
//! `/.well-known/svc/challenge`, holds the tunnel to the gateway, and forwards the rest to the
//! application.
//!
//! Not built yet: the ingress add-on comes in later issues. This crate exists so the
//! workspace has its final shape.

#![forbid(unsafe_code)]
