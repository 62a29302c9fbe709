-- The process that pushed its own held outbox rows deletes them by (target user, pts)
-- through a function whose one statement is planned once per connection for any keys
-- (a generic plan), reading the rows still held from the claim index.
--
-- The statement it ran before probed each key's user in the primary key index, then
-- deleted by (tableoid, ctid) with the row ids given to every partition's TID scan:
-- planned again for each call's keys, it cost 1.1 to 1.9 ms of PostgreSQL CPU for one
-- key on an empty outbox and 4 ms for 34 keys on a 40,000-row backlog. Rows still held
-- are the pending rows due in the future, which the claim index (available_at, pending
-- rows only) holds at its far end: a range scan there finds them, whatever the size
-- of the backlog that is due, and a hash join picks the given keys out of them (0.3 to
-- 0.8 ms in the same cases).
CREATE FUNCTION telesrv_delete_held_outbox_rows(p_target_user_ids bigint[], p_ptss integer[])
RETURNS bigint
LANGUAGE sql
SET plan_cache_mode = force_generic_plan
AS $$
    WITH gone AS (
        DELETE FROM dispatch_outbox o
         USING unnest(p_target_user_ids, p_ptss) AS k(target_user_id, pts)
         WHERE o.target_user_id = k.target_user_id AND o.pts = k.pts
           AND o.status = 'pending' AND o.available_at > now()
        RETURNING 1
    )
    SELECT count(*) FROM gone
$$;

COMMENT ON FUNCTION telesrv_delete_held_outbox_rows(bigint[], integer[]) IS
    'Deletes the still held outbox rows of the given (target user, pts) pairs, the '
    'arrays read pairwise; returns how many were there.';
