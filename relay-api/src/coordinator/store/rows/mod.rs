//! The row traits of [`super::backend`], implemented once over [`Sql`](super::sql::Sql) for
//! every backend: only SQL that SQLite and PostgreSQL read alike (see [`super::sql`]).

mod activity;
mod admission;
mod columns;
mod deployments;
mod executions;
mod feed;
mod keys;
mod money;
mod policies;
mod revisions;
mod scheduling;
