//! Secrets at rest (issue 40): the wrapped data keys, and provisioned secret values sealed
//! under them, as a write seals them, a launch opens them, and the store's start and a
//! rotation find and reseal them.

use std::collections::BTreeMap;

use svc_keys::{Context, DataKeyId, KekId, Keyring, WrappedKey};
use svc_sql::{Sql, SqlError, SqlRow, params};

use super::Tx;
use crate::service::store::{KeyRows, StoreError, StoredSecret};

/// The row a secret's value is sealed for: its organization, application and secret.
pub(in crate::service::store) fn context(organization: i64, application_id: &str, secret_id: &str) -> Context {
    Context::new("provisioned_secrets", &[&organization.to_string(), application_id, secret_id])
}

/// The columns of a data key, `k` the table's alias.
const KEY_COLUMNS: &str = "k.id, k.kek_id, k.wrapped";

/// A data key from [`KEY_COLUMNS`] at `at`; `None` where the join found none.
fn key_row(r: &SqlRow, at: usize) -> Result<Option<WrappedKey>, SqlError> {
    let Some(id) = r.opt_i64(at)? else { return Ok(None) };
    let id =
        DataKeyId::try_from(id).map_err(|_| SqlError::Corrupt { column: at, what: format!("data key id {id}") })?;
    Ok(Some(WrappedKey {
        id,
        kek: KekId::from_stored(&r.text(at + 1)?),
        wrapped: r.opt_bytes(at + 2)?.unwrap_or_default(),
    }))
}

/// The columns of a stored secret with its data key (`p`: `provisioned_secrets`, `k`:
/// `data_keys`, joined).
const SECRET_COLUMNS: &str = "p.organization_id, p.application_id, p.secret_id, p.value, k.id, k.kek_id, k.wrapped";

/// `provisioned_secrets` with its data key (none for a value in clear).
const SECRET_TABLES: &str = "provisioned_secrets p LEFT JOIN data_keys k ON k.id = p.data_key_id";

fn secret_row(r: &SqlRow) -> Result<StoredSecret, SqlError> {
    Ok(StoredSecret {
        organization: r.i64(0)?,
        application_id: r.text(1)?,
        secret_id: r.text(2)?,
        value: r.opt_bytes(3)?.unwrap_or_default(),
        data_key: key_row(r, 4)?,
    })
}

impl<S: Sql> Tx<S> {
    /// The keys, or why there are none (a store whose keys were not started: every command
    /// starts them when it opens the store).
    fn keyring(&self) -> Result<&Keyring, StoreError> {
        self.1.as_deref().ok_or_else(|| {
            StoreError::Backend("the store's keys were not started, so no secret value can be sealed or opened".into())
        })
    }

    /// `value` sealed for its row under the current data key, read in this transaction (so
    /// a rotation that made a newer one has committed it, or waits for this one), and that
    /// key's id.
    pub(super) fn seal_secret(
        &mut self,
        organization: i64,
        application_id: &str,
        secret_id: &str,
        value: &[u8],
    ) -> Result<(Vec<u8>, DataKeyId), StoreError> {
        let current = self
            .current_data_key()?
            .ok_or_else(|| StoreError::Backend("the store has no data key: its keys were not started".into()))?;
        let sealed = self.keyring()?.seal(&current, &context(organization, application_id, secret_id), value)?;
        Ok((sealed, current.id))
    }

    /// The values of application `app`'s secrets that have one, opened for its job. A value
    /// in clear (written by an older version, sealed at the next start or rotation) is given
    /// as it is.
    pub(super) fn open_secrets(&mut self, app: i64) -> Result<BTreeMap<String, Vec<u8>>, StoreError> {
        let rows = self.sql().query(
            &format!(
                "SELECT {SECRET_COLUMNS} FROM {SECRET_TABLES} JOIN applications a
                   ON a.organization_id = p.organization_id AND a.application_id = p.application_id
                 WHERE a.id = ?1 AND p.value IS NOT NULL"
            ),
            params![app],
        )?;
        let mut secrets = BTreeMap::new();
        for row in &rows {
            let stored = secret_row(row)?;
            let value = match &stored.data_key {
                None => stored.value,
                Some(key) => {
                    let row = context(stored.organization, &stored.application_id, &stored.secret_id);
                    self.keyring()?.open(&row, &stored.value, Some(key))?.to_vec()
                }
            };
            secrets.insert(stored.secret_id, value);
        }
        Ok(secrets)
    }
}

impl<S: Sql> KeyRows for Tx<S> {
    fn data_keys(&mut self) -> Result<Vec<WrappedKey>, StoreError> {
        let rows = self.sql().query(&format!("SELECT {KEY_COLUMNS} FROM data_keys k ORDER BY k.id"), &[])?;
        Ok(rows.iter().map(|r| key_row(r, 0)).collect::<Result<Vec<_>, _>>()?.into_iter().flatten().collect())
    }

    fn current_data_key(&mut self) -> Result<Option<WrappedKey>, StoreError> {
        let row =
            self.sql().query_opt(&format!("SELECT {KEY_COLUMNS} FROM data_keys k ORDER BY k.id DESC LIMIT 1"), &[])?;
        Ok(row.as_ref().map(|r| key_row(r, 0)).transpose()?.flatten())
    }

    fn insert_data_key(&mut self, key: &WrappedKey, now: i64) -> Result<bool, StoreError> {
        let added = self.sql().execute(
            "INSERT INTO data_keys (id, kek_id, wrapped, created_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (id) DO NOTHING",
            params![key.id, key.kek.as_str(), key.wrapped.as_slice(), now],
        )?;
        Ok(added > 0)
    }

    fn rewrap_data_key(&mut self, key: &WrappedKey) -> Result<(), StoreError> {
        self.sql().execute(
            "UPDATE data_keys SET kek_id = ?1, wrapped = ?2 WHERE id = ?3",
            params![key.kek.as_str(), key.wrapped.as_slice(), key.id],
        )?;
        Ok(())
    }

    fn delete_unused_data_keys(&mut self, current: DataKeyId) -> Result<u64, StoreError> {
        Ok(self.sql().execute(
            "DELETE FROM data_keys WHERE id < ?1
             AND NOT EXISTS (SELECT 1 FROM provisioned_secrets p WHERE p.data_key_id = data_keys.id)",
            params![current],
        )?)
    }

    fn secrets_to_seal(&mut self, current: Option<DataKeyId>, limit: u32) -> Result<Vec<StoredSecret>, StoreError> {
        // Values in clear first (an older version wrote them), then those under older keys.
        let rows = self.sql().query(
            &format!(
                "SELECT {SECRET_COLUMNS} FROM {SECRET_TABLES}
                 WHERE p.value IS NOT NULL AND (p.data_key_id IS NULL OR p.data_key_id <> ?1)
                 ORDER BY p.data_key_id IS NOT NULL, p.organization_id, p.application_id, p.secret_id LIMIT ?2"
            ),
            params![current, limit],
        )?;
        Ok(rows.iter().map(secret_row).collect::<Result<_, _>>()?)
    }

    fn reseal_secret(&mut self, old: &StoredSecret, sealed: &[u8], key: DataKeyId) -> Result<bool, StoreError> {
        // Only if the row still holds what was read: a value written meanwhile is not lost.
        let changed = self.sql().execute(
            "UPDATE provisioned_secrets SET value = ?1, data_key_id = ?2
             WHERE organization_id = ?3 AND application_id = ?4 AND secret_id = ?5 AND value = ?6",
            params![sealed, key, old.organization, &old.application_id, &old.secret_id, old.value.as_slice()],
        )?;
        Ok(changed > 0)
    }

    fn secrets_by_data_key(&mut self) -> Result<Vec<(Option<DataKeyId>, u64)>, StoreError> {
        let rows = self.sql().query(
            "SELECT data_key_id, COUNT(*) FROM provisioned_secrets WHERE value IS NOT NULL
             GROUP BY data_key_id ORDER BY data_key_id",
            &[],
        )?;
        rows.iter()
            .map(|r| {
                let id = r.opt_i64(0)?.map(|id| DataKeyId::try_from(id).unwrap_or(DataKeyId::MAX));
                Ok((id, r.u64(1)?))
            })
            .collect::<Result<_, SqlError>>()
            .map_err(StoreError::from)
    }
}
