-- An outbox worker deletes the rows it handled, by (target user, id), through this
-- function, because its one statement is planned once per connection for any keys (a
-- generic plan) rather than for each batch's keys. Given as two arrays for every
-- partition to match, a batch of 200 keys cost 16 scans of 200-element arrays; a join
-- planned for the batch's own keys paid every partition's planning on each call. Planned
-- for any keys, the join is a hash join while the outbox holds a few thousand rows at
-- most, and a nested loop of primary key probes, each pruned to its partition at run
-- time, past that. The plan is made again when the outbox's statistics change.
--
-- Defined by 0021, which has the measurements.
CREATE OR REPLACE FUNCTION telesrv_delete_outbox_rows(p_target_user_ids bigint[], p_ids bigint[])
RETURNS bigint
LANGUAGE sql
SET plan_cache_mode = force_generic_plan
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
