//! The PostgreSQL backend (issue 19, in progress): its migrations, versioned apart from
//! SQLite's (`migrations/postgres/`), and applied through `svc-postgres` under the store name
//! `relay`. Its first migration is the schema SQLite reaches after all of its own, and a test
//! (`tests/postgres_schema.rs`) holds the two schemas to the same tables, columns and
//! indexes, so a SQLite migration without its PostgreSQL twin fails it. The row traits of
//! [`super::backend`] come next, on this schema.

use svc_postgres::{Database, DbError};

/// The migrations, in order; `svc_migrations` records those applied.
pub const MIGRATIONS: &[&str] = &[include_str!("../../../migrations/postgres/0001_relay.sql")];

/// The relay store's name in `svc_migrations`.
pub const STORE: &str = "relay";

/// Connects to `db` and applies the relay store's migrations it does not have yet (once,
/// however many coordinators start together); how many were applied.
pub fn migrate(db: &Database) -> Result<usize, DbError> {
    let mut client = db.connect()?;
    svc_postgres::migrate(db, &mut client, STORE, MIGRATIONS)
}
