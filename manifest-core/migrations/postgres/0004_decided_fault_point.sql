-- Version 4: a fault point inside the decided write (issue 46). Crash tests used to send
-- PostgreSQL publications down the grouped path to crash between the version's insert and
-- the commit, a path production PostgreSQL publications rarely take; the point is now in the
-- call they do take. The function is version 3's (`0003_publish_decided.sql` says what it
-- checks and writes) with one step after its writes, which does nothing unless the session
-- has `svc.inject_fault` set.
CREATE OR REPLACE FUNCTION svc_publish_decided(
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
    -- A crash test's fault (`svc serve --inject-fault after-version-insert` sets this on its
    -- sessions; nothing else does): the session ends here, its rows written and not
    -- committed, as a crash of whatever runs the write would end it.
    IF written IS NOT NULL AND current_setting('svc.inject_fault', true) = 'after-version-insert' THEN
        RAISE WARNING 'svc_publish_decided: injected fault after the version insert: ending the session before the commit';
        PERFORM pg_terminate_backend(pg_backend_pid());
        -- Not reached: the termination is handled within the call above.
        RAISE EXCEPTION 'svc_publish_decided: the injected fault did not end the session';
    END IF;
    RETURN written;
END
$$;
