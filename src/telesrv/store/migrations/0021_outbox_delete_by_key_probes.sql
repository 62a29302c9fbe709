-- An outbox worker deletes the rows it handled by their keys, one primary key probe
-- per key, each pruned to its partition at run time.
--
-- The statement it ran before gave the keys as two arrays (target users, ids) for
-- every partition to match: each partition's scan compared its rows or index entries
-- with both arrays, whatever few of the keys it held, so a batch of 200 rows cost
-- about 16 such scans of 200-element arrays (3 to 4 ms on a 40,000-row backlog, seq
-- scans or bitmap index scans alike). A join with the keys probes one partition per
-- key, but the planner prefers a hash or merge join over a scan of every partition
-- for it while the outbox is small enough, and then pays for every row the outbox
-- holds. The function below keeps those two joins out of the delete's plan: what is
-- left is a nested loop of index probes (1.4 to 2.2 ms for the same batch, and a
-- probe per key whatever the outbox holds). A worker's batch is at most a few hundred
-- keys, where a probe each is the cheap plan at any outbox size.
CREATE FUNCTION telesrv_delete_outbox_rows(p_target_user_ids bigint[], p_ids bigint[])
RETURNS bigint
LANGUAGE sql
SET enable_hashjoin = off
SET enable_mergejoin = off
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
    'pairwise; returns how many were there. One index probe per pair.';
