//! The ingress console's sessions (`console_sessions`): each the hash of a random id, the
//! token it was made from, its CSRF token, when it was made and last used
//! (`svc_web::session`). Read through the token's row, so a session whose token is gone is
//! no session.

use super::sql::{Sql, params};
use super::{Caller, RelayStore, StoreError, TokenRole};

/// A live console session: its member, its CSRF token, and when it was last recorded used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSession {
    /// Who its token speaks for.
    pub caller: Caller,
    /// The session's CSRF token.
    pub csrf: String,
    /// When it was last recorded used (Unix ms).
    pub last_seen_at: i64,
}

/// The console's session rows.
pub trait SessionRows {
    /// Records a session made from the token with hash `token_hash` at `now`.
    fn insert_console_session(
        &mut self,
        id_hash: &str,
        token_hash: &str,
        csrf: &str,
        now: i64,
    ) -> Result<(), StoreError>;
    /// The session with this hash, if it is live at `now` and its token still exists.
    fn console_session(&mut self, id_hash: &str, now: i64) -> Result<Option<ConsoleSession>, StoreError>;
    /// Records that the session was used at `now`.
    fn touch_console_session(&mut self, id_hash: &str, now: i64) -> Result<(), StoreError>;
    /// Ends the session: whether there was one.
    fn delete_console_session(&mut self, id_hash: &str) -> Result<bool, StoreError>;
    /// Deletes at most `limit` sessions expired at `now`: how many.
    fn collect_console_sessions(&mut self, now: i64, limit: u32) -> Result<u64, StoreError>;
}

impl<T: Sql> SessionRows for T {
    fn insert_console_session(
        &mut self,
        id_hash: &str,
        token_hash: &str,
        csrf: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO console_sessions (id_hash, token_hash, csrf, created_at, last_seen_at) \
             VALUES (?1, ?2, ?3, ?4, ?4)",
            params![id_hash, token_hash, csrf, now],
        )?;
        Ok(())
    }

    fn console_session(&mut self, id_hash: &str, now: i64) -> Result<Option<ConsoleSession>, StoreError> {
        let (made_after, seen_after) = svc_web::session::live_after(now);
        let row = self.query_opt(
            "SELECT o.id, o.name, o.invited_at IS NOT NULL, t.id, t.role, t.name, s.csrf, s.last_seen_at \
             FROM console_sessions s JOIN tokens t ON t.hash = s.token_hash JOIN orgs o ON o.id = t.org_id \
             WHERE s.id_hash = ?1 AND s.created_at > ?2 AND s.last_seen_at > ?3",
            params![id_hash, made_after, seen_after],
        )?;
        row.map(|r| {
            Ok(ConsoleSession {
                caller: Caller {
                    org_id: r.text(0)?,
                    org_name: r.text(1)?,
                    invited: r.bool(2)?,
                    token_id: r.text(3)?,
                    role: r.spelled(4, TokenRole::parse)?,
                    token_name: r.text(5)?,
                },
                csrf: r.text(6)?,
                last_seen_at: r.i64(7)?,
            })
        })
        .transpose()
    }

    fn touch_console_session(&mut self, id_hash: &str, now: i64) -> Result<(), StoreError> {
        self.execute(
            "UPDATE console_sessions SET last_seen_at = ?2 WHERE id_hash = ?1 AND last_seen_at < ?2",
            params![id_hash, now],
        )?;
        Ok(())
    }

    fn delete_console_session(&mut self, id_hash: &str) -> Result<bool, StoreError> {
        Ok(self.execute("DELETE FROM console_sessions WHERE id_hash = ?1", params![id_hash])? > 0)
    }

    fn collect_console_sessions(&mut self, now: i64, limit: u32) -> Result<u64, StoreError> {
        let (made_after, seen_after) = svc_web::session::live_after(now);
        Ok(self.execute(
            "DELETE FROM console_sessions WHERE id_hash IN (SELECT id_hash FROM console_sessions \
             WHERE created_at <= ?1 OR last_seen_at <= ?2 LIMIT ?3)",
            params![made_after, seen_after, i64::from(limit)],
        )?)
    }
}

impl RelayStore {
    /// Signs in: records a session made from the token with hash `token_hash` at `now`, after
    /// collecting at most `svc_web::session::COLLECT_PER_SIGN_IN` expired ones.
    pub fn start_console_session(
        &self,
        id_hash: &str,
        token_hash: &str,
        csrf: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        self.write(|tx| {
            tx.collect_console_sessions(now, svc_web::session::COLLECT_PER_SIGN_IN)?;
            tx.insert_console_session(id_hash, token_hash, csrf, now)
        })
    }

    /// The session with this hash, if it is live at `now` and its token still exists; recorded
    /// used at `now` if it was last recorded `svc_web::session::TOUCH_MS` ago or more.
    pub fn console_session(&self, id_hash: &str, now: i64) -> Result<Option<ConsoleSession>, StoreError> {
        let found = self.read(|tx| tx.console_session(id_hash, now))?;
        if let Some(s) = &found
            && svc_web::session::needs_touch(s.last_seen_at, now)
        {
            self.write(|tx| tx.touch_console_session(id_hash, now))?;
        }
        Ok(found)
    }

    /// Ends the session with this hash: whether there was one.
    pub fn end_console_session(&self, id_hash: &str) -> Result<bool, StoreError> {
        self.write(|tx| tx.delete_console_session(id_hash))
    }

    /// Deletes at most `limit` sessions expired at `now`: how many.
    pub fn collect_console_sessions(&self, now: i64, limit: u32) -> Result<u64, StoreError> {
        self.write(|tx| tx.collect_console_sessions(now, limit))
    }
}

#[cfg(test)]
mod tests {
    //! On SQLite and PostgreSQL, with a clock the test moves: idle and absolute expiry,
    //! signing out, a revoked token ending its sessions, collection bounded.

    use svc_web::session::{ABSOLUTE_MS, IDLE_MS, TOUCH_MS};

    use super::super::{NewToken, RelayStore, TokenRole, postgres};

    const T0: i64 = 1_800_000_000_000;
    const MINUTE: i64 = 60_000;

    /// Runs `test` on SQLite, then PostgreSQL (skipped, saying so, where it is not
    /// installed), with a way to run SQL outside the store (a person at a SQL prompt).
    fn on_each_backend(name: &str, test: impl Fn(&RelayStore, &dyn Fn(&str))) {
        let scratch =
            tempfile::Builder::new().prefix(&format!("svc-relay-sessions-{name}-")).tempdir().expect("a scratch dir");
        let store = RelayStore::open(scratch.path()).expect("a SQLite store");
        let file = scratch.path().join(super::super::DATABASE_FILE);
        test(&store, &|sql| {
            rusqlite::Connection::open(&file).expect("the database").execute_batch(sql).expect("the SQL");
        });
        let Some(cluster) = svc_pg_cluster::for_test(name) else { return };
        let db = svc_postgres::Database::parse(&cluster.svc_url(), None).expect("the cluster's URL");
        let backend = postgres::PostgresBackend::open(&db, postgres::PoolSettings::default()).expect("a store");
        let key_file = scratch.path().join(super::super::KEY_FILE);
        test(&RelayStore::on(Box::new(backend), &key_file).expect("its keys"), &|sql| {
            cluster.sql("svc", sql).expect("the SQL");
        });
    }

    fn customer(store: &RelayStore, hash: &str, id: &str) {
        store.invite("acme").expect("invited");
        let token = NewToken { hash, id, role: TokenRole::Customer, name: "Ada" };
        store.add_token("acme", &token).expect("a token");
    }

    #[test]
    fn an_ingress_console_session_ends_idle_at_its_absolute_bound_on_sign_out_and_with_its_token() {
        on_each_backend("console-sessions", |store, raw| {
            customer(store, "hash_a", "tok_a");
            customer(store, "hash_b", "tok_b");
            for (hash, token) in [("s_idle", "hash_a"), ("s_busy", "hash_a"), ("s_out", "hash_a"), ("s_gone", "hash_b")]
            {
                store.start_console_session(hash, token, &format!("csrf-{hash}"), T0).expect("signed in");
            }
            let read = |hash: &str, now: i64| store.console_session(hash, now).expect("read");
            let found = read("s_idle", T0 + 1).expect("live");
            assert_eq!((found.caller.token_id.as_str(), found.csrf.as_str()), ("tok_a", "csrf-s_idle"));
            assert_eq!(found.caller.token_name, "Ada");
            assert!(found.caller.invited);

            // Unused since (a read records a use once a minute: the one above did not), it is
            // over 30 minutes after signing in.
            assert!(read("s_idle", T0 + IDLE_MS).is_none(), "idle for the bound");

            // Read every 20 minutes (each read records it used): it lives until 12 hours after
            // signing in, and no longer.
            let mut now = T0;
            while now + 20 * MINUTE < T0 + ABSOLUTE_MS {
                now += 20 * MINUTE;
                assert!(read("s_busy", now).is_some(), "used, at +{} min", (now - T0) / MINUTE);
            }
            assert_eq!(read("s_busy", now + TOUCH_MS - 1).expect("live").last_seen_at, now, "written once a minute");
            assert!(read("s_busy", T0 + ABSOLUTE_MS).is_none(), "12 hours after signing in, however used");

            assert!(store.end_console_session("s_out").expect("signed out"));
            assert!(!store.end_console_session("s_out").expect("signed out"), "once");
            assert!(read("s_out", T0 + 1).is_none());

            assert!(read("s_gone", T0 + 1).is_some());
            raw("DELETE FROM tokens WHERE hash = 'hash_b'");
            assert!(read("s_gone", T0 + 1).is_none(), "a session never outlives its token");
            store.start_console_session("s_gone", "hash_a", "c", T0).expect("the hash is free: the row went");
            // Even a token deleted around the cascade (foreign keys off) takes its sessions:
            // each is read through its token.
            customer(store, "hash_c", "tok_c");
            store.start_console_session("s_orphan", "hash_c", "c", T0).expect("signed in");
            assert!(read("s_orphan", T0 + 1).is_some());
            raw(if store.kind() == "sqlite" {
                "PRAGMA foreign_keys = OFF; DELETE FROM tokens WHERE hash = 'hash_c';"
            } else {
                "SET session_replication_role = replica; DELETE FROM tokens WHERE hash = 'hash_c';"
            });
            assert!(read("s_orphan", T0 + 1).is_none(), "read through its token");
        });
    }

    #[test]
    fn expired_ingress_console_sessions_are_collected_a_bounded_number_at_a_time() {
        on_each_backend("console-sessions-collected", |store, _| {
            customer(store, "hash_a", "tok_a");
            for i in 0..5 {
                store.start_console_session(&format!("old_{i}"), "hash_a", "c", T0).expect("signed in");
            }
            let later = T0 + IDLE_MS + 1;
            assert_eq!(store.collect_console_sessions(later, 2).expect("collected"), 2, "at most the limit");
            // A sign-in collects what it may.
            store.start_console_session("fresh", "hash_a", "c", later).expect("signed in");
            assert_eq!(store.collect_console_sessions(later, 100).expect("collected"), 0, "the sign-in took the rest");
            assert!(store.console_session("fresh", later).expect("read").is_some(), "the live one stays");
        });
    }
}
