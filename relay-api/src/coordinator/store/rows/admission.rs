//! Gateway operators and their admission tokens.

use crate::coordinator::store::StoreError;
use crate::coordinator::store::backend::{AdmissionRows, AdmissionToken};
use crate::coordinator::store::sql::{Sql, SqlRow, params};
use relay_wire::admission::Operator;

const OPERATOR_COLUMNS: &str = "id, name, public_key, hostname, admitted_at";

fn operator_row(r: &SqlRow) -> Result<Operator, StoreError> {
    Ok(Operator {
        id: r.text(0)?,
        name: r.text(1)?,
        public_key: r.text(2)?,
        hostname: r.text(3)?,
        admitted_at: r.i64(4)?,
    })
}

impl<T: Sql> AdmissionRows for T {
    fn insert_admission_token(
        &mut self,
        hash: &str,
        id: &str,
        operator: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO admission_tokens (hash, id, operator, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![hash, id, operator, now, expires_at],
        )?;
        Ok(())
    }

    fn admission_token(&mut self, hash: &str) -> Result<Option<AdmissionToken>, StoreError> {
        let row = self.query_opt(
            "SELECT t.id, t.operator, t.expires_at, CASE WHEN t.used_at IS NULL THEN NULL \
             ELSE COALESCE(o.hostname, '(a gateway since removed)') END \
             FROM admission_tokens t LEFT JOIN operators o ON o.id = t.used_by WHERE t.hash = ?1",
            params![hash],
        )?;
        row.map(|r| {
            Ok(AdmissionToken { id: r.text(0)?, operator: r.text(1)?, expires_at: r.i64(2)?, used_for: r.opt_text(3)? })
        })
        .transpose()
    }

    fn hostname_holder(&mut self, hostname: &str) -> Result<Option<(String, String)>, StoreError> {
        self.query_opt("SELECT id, name FROM operators WHERE hostname = ?1", params![hostname])?
            .map(|r| Ok((r.text(0)?, r.text(1)?)))
            .transpose()
    }

    fn put_operator(&mut self, o: &Operator, token_id: &str) -> Result<bool, StoreError> {
        Ok(self.execute_unique(
            "INSERT INTO operators (id, name, public_key, hostname, admitted_at, admission_token_id) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (id) DO UPDATE SET public_key = excluded.public_key, \
             admitted_at = excluded.admitted_at, admission_token_id = excluded.admission_token_id",
            params![&o.id, &o.name, &o.public_key, &o.hostname, o.admitted_at, token_id],
        )?)
    }

    fn use_admission_token(&mut self, hash: &str, operator_id: &str, now: i64) -> Result<(), StoreError> {
        self.execute(
            "UPDATE admission_tokens SET used_at = ?1, used_by = ?2 WHERE hash = ?3",
            params![now, operator_id, hash],
        )?;
        Ok(())
    }

    fn operator(&mut self, id: &str) -> Result<Option<Operator>, StoreError> {
        let sql = format!("SELECT {OPERATOR_COLUMNS} FROM operators WHERE id = ?1");
        self.query_opt(&sql, params![id])?.as_ref().map(operator_row).transpose()
    }

    fn operators(&mut self) -> Result<Vec<Operator>, StoreError> {
        let sql = format!("SELECT {OPERATOR_COLUMNS} FROM operators ORDER BY admitted_at, hostname");
        self.query(&sql, &[])?.iter().map(operator_row).collect()
    }
}
