//! Gateway operators and their admission tokens.

use crate::coordinator::store::StoreError;
use crate::coordinator::store::backend::{AdmissionRows, AdmissionToken};
use crate::coordinator::store::sql::{Sql, SqlRow, params};
use relay_wire::admission::Operator;
use relay_wire::feed::Presence;

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

    fn put_presence(&mut self, operator_id: &str, p: &Presence, now: i64) -> Result<(), StoreError> {
        let (public, tunnel) = (p.public.to_string(), p.tunnel.to_string());
        self.execute(
            "INSERT INTO gateway_presence (operator_id, public_addr, tunnel_addr, tunnel_sha256, seen_at) \
             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (operator_id) DO UPDATE SET public_addr = excluded.public_addr, \
             tunnel_addr = excluded.tunnel_addr, tunnel_sha256 = excluded.tunnel_sha256, seen_at = excluded.seen_at",
            params![operator_id, &public, &tunnel, &p.tunnel_sha256, now],
        )?;
        Ok(())
    }

    fn presences(&mut self) -> Result<Vec<(String, Presence, i64)>, StoreError> {
        let rows = self.query(
            "SELECT operator_id, public_addr, tunnel_addr, tunnel_sha256, seen_at FROM gateway_presence \
             ORDER BY operator_id",
            &[],
        )?;
        let addr = |text: String| {
            text.parse::<std::net::SocketAddr>()
                .map_err(|e| StoreError::Backend(format!("gateway_presence: the address {text:?}: {e}").into()))
        };
        rows.iter()
            .map(|r| {
                let presence =
                    Presence { public: addr(r.text(1)?)?, tunnel: addr(r.text(2)?)?, tunnel_sha256: r.text(3)? };
                Ok((r.text(0)?, presence, r.i64(4)?))
            })
            .collect()
    }
}
