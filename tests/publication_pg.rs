//! The publication suite again, with every data directory's store on PostgreSQL: the same
//! tests as `tests/publication.rs` (its modules, included as they are), each data directory on
//! a throwaway cluster of its own that `svc serve` and `svc admin` reach through `SVC_DATABASE`,
//! as an operator sets it. This binary's name is what puts it on PostgreSQL
//! (`svc_e2e::service::on_postgres`), so one `cargo test --workspace` or `cargo nextest run`
//! runs both backends; `.config/nextest.toml` leaves out here what already runs on PostgreSQL
//! in `publication` (the `instances` module and the tests with a cluster of their own).

#[path = "publication.rs"]
mod suite;
