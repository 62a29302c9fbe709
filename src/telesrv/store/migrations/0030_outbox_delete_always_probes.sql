-- The outbox worker's delete is a nested loop of primary key probes past the smallest
-- outboxes (hash joins, merge joins and seq scans off for its function);
-- store/functions/telesrv_delete_outbox_rows.sql says why.
CREATE OR REPLACE FUNCTION telesrv_delete_outbox_rows(p_target_user_ids bigint[], p_ids bigint[])
RETURNS bigint
LANGUAGE sql
SET plan_cache_mode = force_generic_plan
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_seqscan = off
AS $$
    WITH gone AS (
        DELETE FROM dispatch_outbox o
         USING unnest(p_target_user_ids, p_ids) AS k(target_user_id, id)
         WHERE o.target_user_id = k.target_user_id AND o.id = k.id
        RETURNING 1
    )
    SELECT count(*) FROM gone
$$;

COMMENT ON FUNCTION telesrv_delete_outbox_rows(bigint[], bigint[]) IS
    'Deletes the outbox rows of the given (target user, id) pairs, the arrays read '
    'pairwise; returns how many were there.';
