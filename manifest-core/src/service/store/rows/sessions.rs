//! The console's sessions (`console_sessions`): each the hash of a random id, the token it was
//! made from, its CSRF token, when it was made and last used. Read through the token's row, so
//! a session whose token is gone is no session; expiry bounds are `svc_web::session`'s.

use svc_sql::{Sql, params};

use super::Tx;
use super::publication::caller_row;
use crate::service::store::{ConsoleSession, SessionRows, StoreError};

/// The session a hash names, live at `?2`/`?3` (made after, last used after), with its
/// token's caller ([`super::publication::CALLER`]'s columns first).
const SESSION: &str = "SELECT t.id, t.name, t.role, o.id, o.name, o.entitlement, o.spend_authority_micros, \
     s.csrf, s.last_seen_at FROM console_sessions s JOIN tokens t ON t.id = s.token_id \
     JOIN organizations o ON o.id = t.organization_id \
     WHERE s.id_hash = ?1 AND s.created_at > ?2 AND s.last_seen_at > ?3";

impl<S: Sql> SessionRows for Tx<S> {
    fn insert_console_session(
        &mut self,
        id_hash: &str,
        token_id: &str,
        csrf: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        self.sql().execute(
            "INSERT INTO console_sessions (id_hash, token_id, csrf, created_at, last_seen_at) VALUES (?1, ?2, ?3, ?4, ?4)",
            params![id_hash, token_id, csrf, now],
        )?;
        Ok(())
    }

    fn console_session(&mut self, id_hash: &str, now: i64) -> Result<Option<ConsoleSession>, StoreError> {
        let (made_after, seen_after) = svc_web::session::live_after(now);
        let Some(r) = self.sql().query_opt(SESSION, params![id_hash, made_after, seen_after])? else { return Ok(None) };
        Ok(Some(ConsoleSession { caller: caller_row(&r)?, csrf: r.text(7)?, last_seen_at: r.i64(8)? }))
    }

    fn touch_console_session(&mut self, id_hash: &str, now: i64) -> Result<(), StoreError> {
        self.sql().execute(
            "UPDATE console_sessions SET last_seen_at = ?2 WHERE id_hash = ?1 AND last_seen_at < ?2",
            params![id_hash, now],
        )?;
        Ok(())
    }

    fn delete_console_session(&mut self, id_hash: &str) -> Result<bool, StoreError> {
        Ok(self.sql().execute("DELETE FROM console_sessions WHERE id_hash = ?1", params![id_hash])? > 0)
    }

    fn collect_console_sessions(&mut self, now: i64, limit: u32) -> Result<u64, StoreError> {
        let (made_after, seen_after) = svc_web::session::live_after(now);
        Ok(self.sql().execute(
            "DELETE FROM console_sessions WHERE id_hash IN (SELECT id_hash FROM console_sessions \
             WHERE created_at <= ?1 OR last_seen_at <= ?2 LIMIT ?3)",
            params![made_after, seen_after, i64::from(limit)],
        )?)
    }
}
