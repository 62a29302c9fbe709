-- An outbox worker deletes the rows it handled, by (target user, id), through this
-- function, because its one statement is planned once per connection for any keys (a
-- generic plan) rather than for each batch's keys. Given as two arrays for every
-- partition to match, a batch of 200 keys cost 16 scans of 200-element arrays; a join
-- planned for the batch's own keys paid every partition's planning on each call.
--
-- Hash joins, merge joins and seq scans are off for this function, so that from a few
-- hundred rows on the delete is a nested loop of primary key probes, each pruned to
-- its partition at run time. Left to choose, the planner kept a hash join over every
-- partition through a whole drain: it prices a probe as one in every partition, and
-- the statistics it plans with lag the backlog being drained. Each delete then read
-- the whole backlog, so a drain cost time in the square of its rows (2.3 ms for 200
-- rows of a 20,000-row backlog, against 0.9 ms as probes). With only the joins off, a
-- small outbox got a nested loop over seq scans of every partition instead. Below
-- about a hundred rows the plan is still one scan of each partition's primary key
-- (materialized once per call), which is cheap there; a plan made then lasts until
-- the outbox's statistics are renewed.
--
-- Defined by 0021, which has the measurements; always probes past the smallest
-- outboxes since 0030.
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
