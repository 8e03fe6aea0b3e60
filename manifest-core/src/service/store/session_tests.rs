//! The console's sessions in the store, on SQLite and PostgreSQL, with a clock the test moves:
//! idle and absolute expiry, signing out, a revoked token ending its sessions, and expired
//! rows collected a bounded number at a time.

use svc_web::session::{ABSOLUTE_MS, IDLE_MS};

use super::tests::on_each_backend;
use super::*;

const T0: i64 = 1_800_000_000_000;
const MINUTE: i64 = 60_000;

fn token(id: &str) -> NewToken {
    NewToken { id: id.into(), role: Role::Developer, name: format!("name-{id}"), hash: format!("hash-{id}") }
}

#[test]
fn a_console_session_ends_idle_at_its_absolute_bound_on_sign_out_and_with_its_token() {
    on_each_backend("console-sessions", |b| {
        let store = (b.open)();
        let mut tx = store.write().expect("tx");
        let org = tx.ensure_organization("acme").expect("org");
        tx.insert_token(org.id, &token("tok_a")).expect("token");
        tx.insert_token(org.id, &token("tok_b")).expect("token");
        for (hash, token, csrf) in [
            ("s_idle", "tok_a", "c1"),
            ("s_busy", "tok_a", "c2"),
            ("s_out", "tok_a", "c3"),
            ("s_revoked", "tok_b", "c4"),
        ] {
            tx.insert_console_session(hash, token, csrf, T0).expect("session");
        }
        tx.commit().expect("commit");
        let read = |hash: &str, now: i64| store.read().expect("tx").console_session(hash, now).expect("read");
        let touch = |hash: &str, now: i64| {
            let mut tx = store.write().expect("tx");
            tx.touch_console_session(hash, now).expect("touch");
            tx.commit().expect("commit");
        };

        let found = read("s_idle", T0 + 1).expect("live");
        assert_eq!((found.caller.token_id.as_str(), found.csrf.as_str()), ("tok_a", "c1"));
        assert_eq!(found.caller.name, "name-tok_a");
        assert_eq!(found.last_seen_at, T0);
        assert!(read("nobody", T0 + 1).is_none());

        // Idle: unused for 30 minutes, it is over.
        assert!(read("s_idle", T0 + IDLE_MS - 1).is_some());
        assert!(read("s_idle", T0 + IDLE_MS).is_none(), "idle for the bound");

        // Used every 20 minutes, it lives until 12 hours after signing in, and no longer.
        let mut now = T0;
        while now + 20 * MINUTE < T0 + ABSOLUTE_MS {
            now += 20 * MINUTE;
            assert!(read("s_busy", now).is_some(), "used, at +{} min", (now - T0) / MINUTE);
            touch("s_busy", now);
        }
        assert_eq!(read("s_busy", now).expect("live").last_seen_at, now, "its last use recorded");
        assert!(read("s_busy", T0 + ABSOLUTE_MS - 1).is_some());
        assert!(read("s_busy", T0 + ABSOLUTE_MS).is_none(), "12 hours after signing in, however used");

        // Signing out deletes it.
        let mut tx = store.write().expect("tx");
        assert!(tx.delete_console_session("s_out").expect("delete"));
        assert!(!tx.delete_console_session("s_out").expect("delete"), "once");
        tx.commit().expect("commit");
        assert!(read("s_out", T0 + 1).is_none(), "signed out");

        // Its token revoked (its row deleted, as a person with a SQL prompt would), the session
        // is over at once, and its row gone with the token's.
        assert!(read("s_revoked", T0 + 1).is_some());
        (b.raw)("DELETE FROM tokens WHERE id = 'tok_b'").expect("the token revoked");
        assert!(read("s_revoked", T0 + 1).is_none(), "a session never outlives its token");
        let mut tx = store.write().expect("tx");
        tx.insert_console_session("s_revoked", "tok_a", "c5", T0).expect("the hash is free: the row went");
        tx.commit().expect("commit");
        // Even a token deleted around the cascade (foreign keys off) takes its sessions: each
        // is read through its token.
        let mut tx = store.write().expect("tx");
        tx.insert_token(org.id, &token("tok_c")).expect("token");
        tx.insert_console_session("s_orphan", "tok_c", "c6", T0).expect("session");
        tx.commit().expect("commit");
        assert!(read("s_orphan", T0 + 1).is_some());
        let unchecked = if store.kind() == "sqlite" {
            "PRAGMA foreign_keys = OFF; DELETE FROM tokens WHERE id = 'tok_c';"
        } else {
            "SET session_replication_role = replica; DELETE FROM tokens WHERE id = 'tok_c';"
        };
        (b.raw)(unchecked).expect("the token deleted alone");
        assert!(read("s_orphan", T0 + 1).is_none(), "read through its token");
    });
}

#[test]
fn expired_console_sessions_are_collected_a_bounded_number_at_a_time() {
    on_each_backend("console-sessions-collected", |b| {
        let store = (b.open)();
        let mut tx = store.write().expect("tx");
        let org = tx.ensure_organization("acme").expect("org");
        tx.insert_token(org.id, &token("tok_a")).expect("token");
        for i in 0..5 {
            tx.insert_console_session(&format!("old_{i}"), "tok_a", "c", T0).expect("session");
        }
        tx.insert_console_session("fresh", "tok_a", "c", T0 + IDLE_MS).expect("session");
        tx.commit().expect("commit");
        let collect = |now: i64, limit: u32| {
            let mut tx = store.write().expect("tx");
            let n = tx.collect_console_sessions(now, limit).expect("collect");
            tx.commit().expect("commit");
            n
        };
        let later = T0 + IDLE_MS + 1;
        assert_eq!(collect(later, 2), 2, "at most the limit");
        assert_eq!(collect(later, 100), 3, "the rest of the expired");
        assert_eq!(collect(later, 100), 0);
        assert!(
            store.read().expect("tx").console_session("fresh", later).expect("read").is_some(),
            "the live one stays"
        );
    });
}
