//! Gateway operators and their admission tokens, in SQL.

use rusqlite::{OptionalExtension, params};

use super::rows::{OPERATOR_COLUMNS, operator_row};
use super::{SqliteTransaction, unique_violation};
use crate::coordinator::store::StoreError;
use crate::coordinator::store::backend::{AdmissionRows, AdmissionToken};
use relay_wire::admission::Operator;

impl AdmissionRows for SqliteTransaction<'_> {
    fn insert_admission_token(
        &mut self,
        hash: &str,
        id: &str,
        operator: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO admission_tokens (hash, id, operator, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![hash, id, operator, now, expires_at],
        )?;
        Ok(())
    }

    fn admission_token(&mut self, hash: &str) -> Result<Option<AdmissionToken>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT t.id, t.operator, t.expires_at, CASE WHEN t.used_at IS NULL THEN NULL \
                 ELSE COALESCE(o.hostname, '(a gateway since removed)') END \
                 FROM admission_tokens t LEFT JOIN operators o ON o.id = t.used_by WHERE t.hash = ?1",
                [hash],
                |r| {
                    Ok(AdmissionToken {
                        id: r.get(0)?,
                        operator: r.get(1)?,
                        expires_at: r.get(2)?,
                        used_for: r.get(3)?,
                    })
                },
            )
            .optional()?)
    }

    fn hostname_holder(&mut self, hostname: &str) -> Result<Option<(String, String)>, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT id, name FROM operators WHERE hostname = ?1", [hostname], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?)
    }

    fn put_operator(&mut self, o: &Operator, token_id: &str) -> Result<bool, StoreError> {
        let written = self.conn.execute(
            "INSERT INTO operators (id, name, public_key, hostname, admitted_at, admission_token_id) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (id) DO UPDATE SET public_key = excluded.public_key, \
             admitted_at = excluded.admitted_at, admission_token_id = excluded.admission_token_id",
            params![o.id, o.name, o.public_key, o.hostname, o.admitted_at, token_id],
        );
        if unique_violation(&written) {
            return Ok(false);
        }
        written?;
        Ok(true)
    }

    fn use_admission_token(&mut self, hash: &str, operator_id: &str, now: i64) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE admission_tokens SET used_at = ?1, used_by = ?2 WHERE hash = ?3",
            params![now, operator_id, hash],
        )?;
        Ok(())
    }

    fn operator(&mut self, id: &str) -> Result<Option<Operator>, StoreError> {
        Ok(self
            .conn
            .query_row(&format!("SELECT {OPERATOR_COLUMNS} FROM operators WHERE id = ?1"), [id], operator_row)
            .optional()?)
    }

    fn operators(&mut self) -> Result<Vec<Operator>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!("SELECT {OPERATOR_COLUMNS} FROM operators ORDER BY admitted_at, hostname"))?;
        let rows = stmt.query_map([], operator_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
