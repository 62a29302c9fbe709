-- An outbox worker deletes the rows it handled through a function whose one
-- statement is planned once per connection for any keys (a generic plan), not for
-- each batch's keys.
--
-- The statement it ran before gave the keys as two arrays (target users, ids) for
-- every partition to match: each partition's scan compared its rows or index entries
-- with both arrays, whatever few of the keys it held, so a batch of 200 rows cost 16
-- such scans of 200-element arrays (3 to 4 ms on a 40,000-row backlog, seq scans or
-- bitmap index scans alike). A join with the keys is cheaper, but planned for the
-- batch's own keys it costs every partition's planning on each call (a batch of one
-- key took 1.2 ms instead of 0.45), and the planner prices a key's probe as one in
-- every partition, as it cannot count on the pruning at run time. Planned for any
-- keys, the join is a hash join over the partitions while the outbox holds a few
-- thousand rows at most, and a nested loop of primary key probes, each pruned to its
-- partition at run time, past that (about 2 ms for 200 rows of a 40,000-row
-- backlog). The plan is made again when the outbox's statistics change.
CREATE FUNCTION telesrv_delete_outbox_rows(p_target_user_ids bigint[], p_ids bigint[])
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
