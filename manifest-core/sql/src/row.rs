//! Rows read back, and their typed getters.

use crate::SqlError;

/// One value of a row read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// NULL.
    Null,
    /// An integer (a PostgreSQL boolean reads as 0 or 1).
    Int(i64),
    /// Text.
    Text(String),
    /// Bytes.
    Bytes(Vec<u8>),
}

impl Cell {
    fn kind(&self) -> String {
        match self {
            Cell::Null => "NULL".to_owned(),
            Cell::Int(v) => v.to_string(),
            Cell::Text(t) => format!("text {t:?}"),
            Cell::Bytes(b) => format!("{} bytes", b.len()),
        }
    }
}

/// A row read back. A value no version of the code writes fails loudly
/// ([`SqlError::Corrupt`]), naming its column.
#[derive(Debug, Clone)]
pub struct SqlRow(pub Vec<Cell>);

fn corrupt(column: usize, what: impl std::fmt::Display) -> SqlError {
    SqlError::Corrupt { column, what: what.to_string() }
}

impl SqlRow {
    fn cell(&self, i: usize) -> Result<&Cell, SqlError> {
        self.0.get(i).ok_or_else(|| corrupt(i, "missing"))
    }

    /// An integer that may be NULL.
    pub fn opt_i64(&self, i: usize) -> Result<Option<i64>, SqlError> {
        match self.cell(i)? {
            Cell::Null => Ok(None),
            Cell::Int(v) => Ok(Some(*v)),
            other => Err(corrupt(i, other.kind())),
        }
    }

    /// An integer.
    pub fn i64(&self, i: usize) -> Result<i64, SqlError> {
        self.opt_i64(i)?.ok_or_else(|| corrupt(i, "NULL"))
    }

    /// A non-negative integer that may be NULL.
    pub fn opt_u64(&self, i: usize) -> Result<Option<u64>, SqlError> {
        self.opt_i64(i)?.map(|v| u64::try_from(v).map_err(|_| corrupt(i, v))).transpose()
    }

    /// A non-negative integer (an amount, a count, a version).
    pub fn u64(&self, i: usize) -> Result<u64, SqlError> {
        self.opt_u64(i)?.ok_or_else(|| corrupt(i, "NULL"))
    }

    /// A non-negative integer within `u32` (a revision, a restart count).
    pub fn u32(&self, i: usize) -> Result<u32, SqlError> {
        let v = self.i64(i)?;
        u32::try_from(v).map_err(|_| corrupt(i, v))
    }

    /// A non-negative integer within `u16` (a slot).
    pub fn u16(&self, i: usize) -> Result<u16, SqlError> {
        let v = self.i64(i)?;
        u16::try_from(v).map_err(|_| corrupt(i, v))
    }

    /// A non-negative integer within `u8` (a schema version).
    pub fn u8(&self, i: usize) -> Result<u8, SqlError> {
        let v = self.i64(i)?;
        u8::try_from(v).map_err(|_| corrupt(i, v))
    }

    /// A flag (0 or 1; a boolean).
    pub fn bool(&self, i: usize) -> Result<bool, SqlError> {
        match self.i64(i)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(corrupt(i, v)),
        }
    }

    /// Text that may be NULL.
    pub fn opt_text(&self, i: usize) -> Result<Option<String>, SqlError> {
        match self.cell(i)? {
            Cell::Null => Ok(None),
            Cell::Text(t) => Ok(Some(t.clone())),
            other => Err(corrupt(i, other.kind())),
        }
    }

    /// Text.
    pub fn text(&self, i: usize) -> Result<String, SqlError> {
        self.opt_text(i)?.ok_or_else(|| corrupt(i, "NULL"))
    }

    /// Bytes that may be NULL.
    pub fn opt_bytes(&self, i: usize) -> Result<Option<Vec<u8>>, SqlError> {
        match self.cell(i)? {
            Cell::Null => Ok(None),
            Cell::Bytes(b) => Ok(Some(b.clone())),
            other => Err(corrupt(i, other.kind())),
        }
    }

    /// A stored spelling (a state, a kind) read back.
    pub fn spelled<T>(&self, i: usize, parse: impl FnOnce(&str) -> Option<T>) -> Result<T, SqlError> {
        let text = self.text(i)?;
        parse(&text).ok_or_else(|| corrupt(i, format!("{text:?}")))
    }

    /// A decimal amount kept as text (beyond 64 bits).
    pub fn amount(&self, i: usize) -> Result<u128, SqlError> {
        let text = self.text(i)?;
        text.parse().map_err(|_| corrupt(i, format!("{text:?}")))
    }

    /// A JSON column read back; unreadable JSON is a corrupt row.
    pub fn json<T: serde::de::DeserializeOwned>(&self, i: usize) -> Result<T, SqlError> {
        let text = self.text(i)?;
        serde_json::from_str(&text).map_err(|e| corrupt(i, format!("JSON that does not read ({e})")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corrupt_row_fails_loudly_and_names_its_column() {
        let row = SqlRow(vec![
            Cell::Int(-5),
            Cell::Text("flying".into()),
            Cell::Null,
            Cell::Int(2),
            Cell::Text("{".into()),
            Cell::Text("12x".into()),
            Cell::Bytes(vec![1, 2]),
        ]);
        assert_eq!(row.i64(0).expect("an integer"), -5);
        assert!(row.u64(0).expect_err("negative").to_string().contains("column 0"));
        assert!(row.spelled(1, |_| None::<()>).expect_err("unknown").to_string().contains("\"flying\""));
        assert_eq!(row.opt_text(2).expect("NULL"), None);
        assert!(row.text(2).is_err(), "NULL where text belongs");
        assert!(row.bool(3).is_err(), "2 is no flag");
        assert!(row.json::<serde_json::Value>(4).is_err());
        assert!(row.amount(5).is_err(), "not a decimal");
        assert!(row.text(6).expect_err("bytes").to_string().contains("2 bytes"));
        assert_eq!(row.opt_bytes(6).expect("bytes"), Some(vec![1, 2]));
        assert!(row.i64(9).is_err(), "a missing column");
    }
}
