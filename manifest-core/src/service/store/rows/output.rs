//! Jobs' output (issue 42, point 2): the lines the output thread collects, each execution's
//! newest kept within [`OUTPUT_LINES_KEPT`] and [`OUTPUT_BYTES_KEPT`], and only the newest
//! [`OUTPUT_EXECUTIONS_KEPT`] executions of a slot keeping theirs; what is not kept is counted
//! as dropped for its execution.

use std::collections::BTreeMap;

use svc_execution::market::Part;
use svc_execution::output::{OutputBatch, OutputLine};
use svc_sql::{Param, Sql, SqlError, SqlRow, params};

use super::int;
use crate::service::store::{OUTPUT_BYTES_KEPT, OUTPUT_EXECUTIONS_KEPT, OUTPUT_LINES_KEPT, OutputDrop, OutputRecord};

/// Lines an execution may hold beyond [`OUTPUT_LINES_KEPT`] before its oldest are pruned, so
/// a `DELETE` runs once per this many lines, not at every collection (the relay's logs do the
/// same); bytes are bounded at every collection.
const PRUNE_STEP: i64 = 1_000;

/// How far under [`OUTPUT_BYTES_KEPT`] a prune for bytes takes an execution's output.
const PRUNE_BYTES: i64 = 1024 * 1024;

/// Lines per `INSERT` (five parameters each).
const INSERT_CHUNK: usize = 100;

/// The part's spelling in the store and the API.
pub(crate) fn part_name(part: Part) -> &'static str {
    match part {
        Part::App => "program",
        Part::Agent => "sidecar",
    }
}

const RECORD_COLUMNS: &str = "o.seq, e.execution_id, e.slot, e.generation, e.attempt, o.part, o.at, o.line";

fn record_row(r: &SqlRow) -> Result<OutputRecord, SqlError> {
    Ok(OutputRecord {
        seq: r.i64(0)?,
        execution_id: r.text(1)?,
        slot: r.u16(2)?,
        generation: r.u64(3)?,
        attempt: r.u32(4)?,
        part: r.text(5)?,
        at: r.u64(6)?,
        line: r.text(7)?,
    })
}

/// Records a collection: per execution, its lines, then its bounds.
pub(super) fn record(sql: &mut impl Sql, batch: &OutputBatch) -> Result<(), SqlError> {
    let mut by_execution: BTreeMap<&str, (Vec<&OutputLine>, u64)> = BTreeMap::new();
    for line in &batch.lines {
        by_execution.entry(line.execution_id.as_str()).or_default().0.push(line);
    }
    for (id, lost) in &batch.lost {
        by_execution.entry(id.as_str()).or_default().1 += lost;
    }
    for (id, (lines, lost)) in by_execution {
        let Some(row) =
            sql.query_opt("SELECT id, application_id, slot FROM executions WHERE execution_id = ?1", params![id])?
        else {
            continue;
        };
        let (execution, app, slot) = (row.i64(0)?, row.i64(1)?, row.i64(2)?);
        let mut bytes: i64 = 0;
        for chunk in lines.chunks(INSERT_CHUNK) {
            let values: Vec<String> = (0..chunk.len())
                .map(|i| {
                    let p = i * 5;
                    format!("(?{}, ?{}, ?{}, ?{}, ?{})", p + 1, p + 2, p + 3, p + 4, p + 5)
                })
                .collect();
            // PostgreSQL's text holds no NUL; a job may print one.
            let texts: Vec<std::borrow::Cow<'_, str>> = chunk
                .iter()
                .map(|l| {
                    if l.line.contains('\0') { l.line.replace('\0', "\u{fffd}").into() } else { l.line.as_str().into() }
                })
                .collect();
            bytes = texts.iter().map(|t| i64::try_from(t.len()).unwrap_or(i64::MAX)).fold(bytes, i64::saturating_add);
            let mut args: Vec<Param<'_>> = Vec::with_capacity(chunk.len() * 5);
            for (line, text) in chunk.iter().zip(&texts) {
                args.extend([
                    Param::from(execution),
                    Param::from(app),
                    Param::from(part_name(line.part)),
                    Param::from(int(line.at)),
                    Param::from(text.as_ref()),
                ]);
            }
            sql.execute(
                &format!(
                    "INSERT INTO execution_output (execution, application_id, part, at, line) VALUES {}",
                    values.join(", ")
                ),
                &args,
            )?;
        }
        let count = i64::try_from(lines.len()).unwrap_or(i64::MAX);
        let first =
            sql.query_opt("SELECT 1 FROM execution_output_sizes WHERE execution = ?1", params![execution])?.is_none();
        if first {
            forget_older_executions(sql, app, slot, execution)?;
        }
        let held = sql.query_one(
            "INSERT INTO execution_output_sizes (execution, lines, bytes, dropped) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (execution) DO UPDATE SET lines = execution_output_sizes.lines + excluded.lines, \
             bytes = execution_output_sizes.bytes + excluded.bytes, \
             dropped = execution_output_sizes.dropped + excluded.dropped \
             RETURNING lines, bytes",
            params![execution, count, bytes, int(lost)],
        )?;
        if held.i64(0)? > OUTPUT_LINES_KEPT + PRUNE_STEP || held.i64(1)? > OUTPUT_BYTES_KEPT {
            prune(sql, execution)?;
        }
    }
    Ok(())
}

/// Deletes an execution's oldest lines beyond the bounds: its newest [`OUTPUT_LINES_KEPT`]
/// of at most [`OUTPUT_BYTES_KEPT`] less [`PRUNE_BYTES`] stay; the others count as dropped.
fn prune(sql: &mut impl Sql, execution: i64) -> Result<(), SqlError> {
    let deleted = sql.execute(
        "DELETE FROM execution_output WHERE execution = ?1 AND seq <= (SELECT COALESCE(MAX(seq), 0) FROM \
         (SELECT seq, ROW_NUMBER() OVER newest AS n, SUM(octet_length(line)) OVER newest AS newer \
         FROM execution_output WHERE execution = ?1 WINDOW newest AS (ORDER BY seq DESC)) AS w \
         WHERE n > ?2 OR newer > ?3)",
        params![execution, OUTPUT_LINES_KEPT, OUTPUT_BYTES_KEPT - PRUNE_BYTES],
    )?;
    sql.execute(
        "UPDATE execution_output_sizes SET lines = (SELECT COUNT(*) FROM execution_output WHERE execution = ?1), \
         bytes = (SELECT COALESCE(SUM(octet_length(line)), 0) FROM execution_output WHERE execution = ?1), \
         dropped = dropped + ?2 WHERE execution = ?1",
        params![execution, int(deleted)],
    )?;
    Ok(())
}

/// An execution's first lines: the output of its slot's executions older than the newest
/// [`OUTPUT_EXECUTIONS_KEPT`] (this one included) goes, and counts as dropped.
fn forget_older_executions(sql: &mut impl Sql, app: i64, slot: i64, execution: i64) -> Result<(), SqlError> {
    let older = sql.query(
        "SELECT execution FROM (SELECT s.execution, ROW_NUMBER() OVER (ORDER BY s.execution DESC) AS n \
         FROM execution_output_sizes s JOIN executions e ON e.id = s.execution \
         WHERE e.application_id = ?1 AND e.slot = ?2 AND s.execution < ?3 AND s.lines > 0) AS w WHERE n >= ?4",
        params![app, slot, execution, OUTPUT_EXECUTIONS_KEPT],
    )?;
    for row in &older {
        let key = row.i64(0)?;
        sql.execute("DELETE FROM execution_output WHERE execution = ?1", params![key])?;
        sql.execute(
            "UPDATE execution_output_sizes SET dropped = dropped + lines, lines = 0, bytes = 0 WHERE execution = ?1",
            params![key],
        )?;
    }
    Ok(())
}

/// An application's lines after `after`, oldest first, at most `limit`; of one execution if
/// `execution` names one.
pub(super) fn after(
    sql: &mut impl Sql,
    app: i64,
    execution: Option<&str>,
    after: i64,
    limit: u32,
) -> Result<Vec<OutputRecord>, SqlError> {
    let rows = match execution {
        None => sql.query(
            &format!(
                "SELECT {RECORD_COLUMNS} FROM execution_output o JOIN executions e ON e.id = o.execution \
                 WHERE o.application_id = ?1 AND o.seq > ?2 ORDER BY o.seq LIMIT ?3"
            ),
            params![app, after, limit],
        )?,
        Some(id) => sql.query(
            &format!(
                "SELECT {RECORD_COLUMNS} FROM execution_output o JOIN executions e ON e.id = o.execution \
                 WHERE e.application_id = ?1 AND e.execution_id = ?4 AND o.seq > ?2 ORDER BY o.seq LIMIT ?3"
            ),
            params![app, after, limit, id],
        )?,
    };
    rows.iter().map(record_row).collect()
}

/// The newest `limit` lines of an application's execution, oldest first.
pub(super) fn tail(
    sql: &mut impl Sql,
    app: i64,
    execution_id: &str,
    limit: u32,
) -> Result<Vec<OutputRecord>, SqlError> {
    let rows = sql.query(
        &format!(
            "SELECT {RECORD_COLUMNS} FROM execution_output o JOIN executions e ON e.id = o.execution \
             WHERE e.application_id = ?1 AND e.execution_id = ?2 ORDER BY o.seq DESC LIMIT ?3"
        ),
        params![app, execution_id, limit],
    )?;
    let mut lines: Vec<OutputRecord> = rows.iter().map(record_row).collect::<Result<_, _>>()?;
    lines.reverse();
    Ok(lines)
}

/// What the executions named (by ID) of an application hold and dropped, those that printed.
pub(super) fn drops(sql: &mut impl Sql, app: i64, executions: &[&str]) -> Result<Vec<OutputDrop>, SqlError> {
    let mut found = Vec::new();
    for chunk in executions.chunks(INSERT_CHUNK) {
        let marks: Vec<String> = (0..chunk.len()).map(|i| format!("?{}", i + 2)).collect();
        let mut args = vec![Param::from(app)];
        args.extend(chunk.iter().map(|id| Param::from(*id)));
        let rows = sql.query(
            &format!(
                "SELECT e.execution_id, e.slot, e.generation, e.attempt, s.lines, s.dropped \
                 FROM execution_output_sizes s JOIN executions e ON e.id = s.execution \
                 WHERE e.application_id = ?1 AND e.execution_id IN ({}) ORDER BY e.id",
                marks.join(", ")
            ),
            &args,
        )?;
        for r in &rows {
            found.push(OutputDrop {
                execution_id: r.text(0)?,
                slot: r.u16(1)?,
                generation: r.u64(2)?,
                attempt: r.u32(3)?,
                kept: r.u64(4)?,
                dropped: r.u64(5)?,
            });
        }
    }
    Ok(found)
}
