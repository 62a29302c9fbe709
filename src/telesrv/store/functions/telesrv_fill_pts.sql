-- Fills allocated pts that no event will use (a failed, duplicate or blocked send, an
-- edit or delete of a box that went away meanwhile) with 'noop' events, so each user's
-- pts log stays dense. A noop is never pushed: a device learns of it through
-- getDifference only, so it has no outbox row. With telesrv_append_event and
-- telesrv_append_events, the only writer of user_update_events. Returns how many noops it wrote.
--
-- PL/pgSQL returning a count rather than a LANGUAGE sql function returning void: Citus
-- cannot plan a LANGUAGE sql function's statement on a distributed table, and runs a
-- PL/pgSQL one's like any other.
--
-- Defined by 0003; its comment by 0011; PL/pgSQL returning the count since 0031.
CREATE OR REPLACE FUNCTION telesrv_fill_pts(p_user bigint, p_pts integer[], p_date integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_written integer;
BEGIN
    INSERT INTO user_update_events (user_id, pts, pts_count, event_type, date)
    SELECT p_user, pts, 1, 'noop', p_date FROM unnest(p_pts) AS pts
    ON CONFLICT (user_id, pts) DO NOTHING;
    GET DIAGNOSTICS v_written = ROW_COUNT;
    RETURN v_written;
END
$$;

COMMENT ON FUNCTION telesrv_fill_pts(bigint, integer[], integer) IS
    'Noop events for allocated pts no event will use; never pushed, so no outbox row.';
