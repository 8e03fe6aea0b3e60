//! Secrets at rest (issue 40): the wrapped data keys, and the sealed secret values as they
//! are found, resealed and counted by the store's start and by a rotation.

use svc_keys::{DataKeyId, KekId, WrappedKey};

use crate::coordinator::store::StoreError;
use crate::coordinator::store::backend::{KeyRows, StoredSecret};
use crate::coordinator::store::sql::{Sql, SqlRow, params};

/// The columns of a data key, `k` the table's alias.
const KEY_COLUMNS: &str = "k.id, k.kek_id, k.wrapped";

fn data_key_id(id: i64) -> Result<DataKeyId, StoreError> {
    DataKeyId::try_from(id).map_err(|_| StoreError::Backend(format!("data key id {id} is out of range").into()))
}

fn key_row(row: &SqlRow, at: usize) -> Result<Option<WrappedKey>, StoreError> {
    let Some(id) = row.opt_i64(at)? else { return Ok(None) };
    Ok(Some(WrappedKey {
        id: data_key_id(id)?,
        kek: KekId::from_stored(&row.text(at + 1)?),
        wrapped: row.opt_bytes(at + 2)?.unwrap_or_default(),
    }))
}

/// The columns of a revision's stored secrets with their organization and data key (`r`:
/// `revision_secrets`, `d`: `deployments`, `k`: `data_keys`, joined).
pub(super) const SECRET_COLUMNS: &str = "d.org_id, r.deployment_id, r.revision, r.secrets, k.id, k.kek_id, k.wrapped";

/// `revision_secrets` with its deployment and its data key (none for a value in clear).
pub(super) const SECRET_TABLES: &str =
    "revision_secrets r JOIN deployments d ON d.id = r.deployment_id LEFT JOIN data_keys k ON k.id = r.data_key_id";

pub(super) fn secret_row(row: &SqlRow) -> Result<StoredSecret, StoreError> {
    Ok(StoredSecret {
        org_id: row.text(0)?,
        deployment_id: row.text(1)?,
        revision: row.u32(2)?,
        value: row.text(3)?,
        data_key: key_row(row, 4)?,
    })
}

impl<T: Sql> KeyRows for T {
    fn data_keys(&mut self) -> Result<Vec<WrappedKey>, StoreError> {
        let rows = self.query(&format!("SELECT {KEY_COLUMNS} FROM data_keys k ORDER BY k.id"), &[])?;
        Ok(rows.iter().map(|r| key_row(r, 0)).collect::<Result<Vec<_>, _>>()?.into_iter().flatten().collect())
    }

    fn current_data_key(&mut self) -> Result<Option<WrappedKey>, StoreError> {
        let row = self.query_opt(&format!("SELECT {KEY_COLUMNS} FROM data_keys k ORDER BY k.id DESC LIMIT 1"), &[])?;
        Ok(row.as_ref().map(|r| key_row(r, 0)).transpose()?.flatten())
    }

    fn insert_data_key(&mut self, key: &WrappedKey, now: i64) -> Result<bool, StoreError> {
        let added = self.execute(
            "INSERT INTO data_keys (id, kek_id, wrapped, created_at) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (id) DO NOTHING",
            params![key.id, key.kek.as_str(), key.wrapped.as_slice(), now],
        )?;
        Ok(added > 0)
    }

    fn rewrap_data_key(&mut self, key: &WrappedKey) -> Result<(), StoreError> {
        self.execute(
            "UPDATE data_keys SET kek_id = ?1, wrapped = ?2 WHERE id = ?3",
            params![key.kek.as_str(), key.wrapped.as_slice(), key.id],
        )?;
        Ok(())
    }

    fn delete_unused_data_keys(&mut self, current: DataKeyId) -> Result<u64, StoreError> {
        Ok(self.execute(
            "DELETE FROM data_keys WHERE id < ?1 \
             AND NOT EXISTS (SELECT 1 FROM revision_secrets r WHERE r.data_key_id = data_keys.id)",
            params![current],
        )?)
    }

    fn secrets_to_seal(&mut self, current: Option<DataKeyId>, limit: u32) -> Result<Vec<StoredSecret>, StoreError> {
        // Values in clear first (an older version wrote them), then those under older keys.
        let rows = self.query(
            &format!(
                "SELECT {SECRET_COLUMNS} FROM {SECRET_TABLES} \
                 WHERE r.data_key_id IS NULL OR r.data_key_id <> ?1 \
                 ORDER BY r.data_key_id IS NOT NULL, r.deployment_id, r.revision LIMIT ?2"
            ),
            params![current.map(i64::from), limit],
        )?;
        rows.iter().map(secret_row).collect()
    }

    fn reseal_secret(&mut self, old: &StoredSecret, sealed: &str, key: DataKeyId) -> Result<bool, StoreError> {
        // Only if the row still holds what was read: a value written meanwhile is not lost.
        let changed = self.execute(
            "UPDATE revision_secrets SET secrets = ?1, data_key_id = ?2 \
             WHERE deployment_id = ?3 AND revision = ?4 AND secrets = ?5",
            params![sealed, key, &old.deployment_id, old.revision, &old.value],
        )?;
        Ok(changed > 0)
    }

    fn secrets_by_data_key(&mut self) -> Result<Vec<(Option<DataKeyId>, u64)>, StoreError> {
        let rows = self.query(
            "SELECT data_key_id, COUNT(*) FROM revision_secrets GROUP BY data_key_id ORDER BY data_key_id",
            &[],
        )?;
        rows.iter()
            .map(|r| {
                let id = r.opt_i64(0)?.map(data_key_id).transpose()?;
                Ok((id, r.u64(1)?))
            })
            .collect()
    }

    fn secrets_org(&mut self, deployment_id: &str) -> Result<Option<String>, StoreError> {
        let row = self.query_opt("SELECT org_id FROM deployments WHERE id = ?1", params![deployment_id])?;
        Ok(row.map(|r| r.text(0)).transpose()?)
    }
}
