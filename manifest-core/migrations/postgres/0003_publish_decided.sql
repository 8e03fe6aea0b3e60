-- Version 3: a decided publication's checked write as one call (issue 19). A publication's
-- layers 3-7 are decided on reads taken off the writers' lock; this function takes the lock,
-- then, on a snapshot taken after it, writes the version, the pointer and status, the
-- activity and the wakeup only if what the publication was decided on still holds (the
-- organization's inputs revision, the application's status, pause and settlement, the other
-- applications' job slots, the fence). It returns the version written, or NULL if anything
-- changed (nothing written; the publication then runs again under the lock). Called alone,
-- it is its own transaction: one round trip from the service, and no round trip while the
-- lock is held. SQLite's same steps are in `store/rows/decided.rs`.
CREATE FUNCTION svc_publish_decided(
    p_application BIGINT, p_inputs_rev BIGINT, p_settled BIGINT, p_status TEXT, p_pause_reason TEXT,
    p_expected BIGINT, p_jobs_in_use BIGINT,
    p_schema_version BIGINT, p_authored_digest TEXT, p_policy_digest TEXT, p_policy TEXT, p_authored TEXT,
    p_jobs BIGINT, p_execution TEXT, p_published_by TEXT,
    p_new_status TEXT, p_new_pause_reason TEXT, p_due_at BIGINT, p_rearm BIGINT,
    p_at TEXT, p_actor TEXT, p_action TEXT, p_reason TEXT
) RETURNS BIGINT
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    written BIGINT;
BEGIN
    -- Each statement of a volatile function takes its snapshot when it starts, at READ
    -- COMMITTED: the write below sees every transaction that committed before the lock was
    -- granted. At a stricter level the snapshot would be older than the lock.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN NULL;
    END IF;
    -- The writers' lock (`store/postgres.rs`, WRITE_BEGIN): the key spells `svc_publ`.
    PERFORM pg_advisory_xact_lock(8319396543593100652);
    WITH app AS (
        SELECT a.id AS id, a.active_pointer_version + 1 AS next FROM applications a
        JOIN organizations o ON o.id = a.organization_id
        WHERE a.id = p_application AND o.inputs_rev = p_inputs_rev AND a.settled = p_settled
            AND a.status = p_status AND a.pause_reason IS NOT DISTINCT FROM p_pause_reason
            AND (p_expected IS NULL OR a.active_pointer_version = p_expected)
            AND p_jobs_in_use = (
                SELECT CAST(COALESCE(SUM(pv.jobs), 0) AS BIGINT) FROM applications b
                JOIN policy_versions pv ON pv.application_id = b.id AND pv.version = b.active_pointer_version
                WHERE b.organization_id = a.organization_id AND b.id <> a.id AND b.status <> 'disabled'
                    AND b.settled = 0)
    ),
    ins AS (
        INSERT INTO policy_versions (application_id, version, schema_version, authored_digest, policy_digest,
            policy, authored, jobs, execution, published_by)
        SELECT id, next, p_schema_version, p_authored_digest, p_policy_digest, p_policy, p_authored, p_jobs,
            p_execution, p_published_by FROM app
        ON CONFLICT DO NOTHING RETURNING application_id, version
    ),
    upd AS (
        UPDATE applications SET status = p_new_status, pause_reason = p_new_pause_reason,
            active_pointer_version = ins.version, settled = 0, exec_next_at = p_due_at,
            rearmed_version = CASE WHEN p_rearm = 1 THEN ins.version ELSE applications.rearmed_version END
        FROM ins WHERE applications.id = ins.application_id
        RETURNING applications.id AS id, ins.version AS version
    ),
    act AS (
        INSERT INTO activity (application_id, at, actor, action, policy_version, status, reason)
        SELECT id, p_at, p_actor, p_action, version, p_new_status, p_reason FROM upd
    ),
    wake AS (
        INSERT INTO wakeups (application_id, policy_version) SELECT id, version FROM upd
    )
    SELECT version INTO written FROM upd;
    RETURN written;
END
$$;
