-- The process that pushed its own held outbox rows deletes them by (target user, pts)
-- through this function, planned once per connection for any keys (a generic plan),
-- reading the rows it may delete from a slice of the claim index.
--
-- A held row is due one hold after the send that wrote it, and its writer deletes it
-- within moments of that send: it lies in the claim index (available_at, pending rows
-- only) among the rows due between p_due_after and p_due_by seconds from now, a slice
-- the caller sets from the hold. A range scan of that slice finds the keys' rows
-- whatever else the outbox holds (the due backlog lies before it, rows put back for a
-- retry or held by a process that died earlier lie outside it). With its bounds given
-- as parameters the planner estimates the slice as a small fixed share of the table,
-- so a plan made while the outbox looked different does not turn it into scans of
-- every partition. No row in the slice is due within p_due_after seconds (the caller
-- keeps it at least half the hold), so while that is longer than the statement takes
-- no worker holds a lock on one.
--
-- Defined by 0022, which has the measurements.
CREATE OR REPLACE FUNCTION telesrv_delete_held_outbox_rows(
    p_target_user_ids bigint[], p_ptss integer[],
    p_due_after double precision, p_due_by double precision)
RETURNS bigint
LANGUAGE sql
SET plan_cache_mode = force_generic_plan
AS $$
    WITH gone AS (
        DELETE FROM dispatch_outbox o
         USING unnest(p_target_user_ids, p_ptss) AS k(target_user_id, pts)
         WHERE o.target_user_id = k.target_user_id AND o.pts = k.pts
           AND o.status = 'pending'
           AND o.available_at > now() + make_interval(secs => p_due_after)
           AND o.available_at <= now() + make_interval(secs => p_due_by)
        RETURNING 1
    )
    SELECT count(*) FROM gone
$$;

COMMENT ON FUNCTION telesrv_delete_held_outbox_rows(bigint[], integer[], double precision,
                                                    double precision) IS
    'Deletes the pending outbox rows of the given (target user, pts) pairs, the arrays '
    'read pairwise, that are due more than p_due_after and at most p_due_by seconds '
    'from now; returns how many were there.';
