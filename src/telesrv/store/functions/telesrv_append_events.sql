-- Events of one type, many at once, with their outbox rows: the set-by-set twin of
-- telesrv_append_event for a group of sends (telesrv_send_group), one statement for any
-- number of events where the one-event function runs two per event. Each event is a
-- message's (one box id); each has its own outbox hold (NULL or 0: due at once).
--
-- Defined by 0036.
CREATE OR REPLACE FUNCTION telesrv_append_events(
    p_user_ids bigint[], p_pts integer[], p_event_type text, p_dates integer[],
    p_peer_user_ids bigint[], p_box_ids integer[], p_exclude_auth_key_ids bigint[],
    p_exclude_session_ids bigint[], p_holds double precision[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WITH appended AS (
        SELECT e.user_id, e.pts, e.date, e.peer_user_id, e.box_id, e.exclude_auth_key_id,
               e.exclude_session_id, e.hold
          FROM unnest(p_user_ids, p_pts, p_dates, p_peer_user_ids, p_box_ids,
                      p_exclude_auth_key_ids, p_exclude_session_ids, p_holds)
               AS e(user_id, pts, date, peer_user_id, box_id, exclude_auth_key_id,
                    exclude_session_id, hold)
    ), logged AS (
        INSERT INTO user_update_events (user_id, pts, pts_count, event_type, date,
                                        peer_user_id, box_ids)
        SELECT a.user_id, a.pts, 1, p_event_type, a.date, a.peer_user_id, ARRAY[a.box_id]
          FROM appended a
    )
    INSERT INTO dispatch_outbox (target_user_id, pts, exclude_auth_key_id,
                                 exclude_session_id, available_at)
    SELECT a.user_id, a.pts, a.exclude_auth_key_id, a.exclude_session_id,
           now() + make_interval(secs => coalesce(a.hold, 0))
      FROM appended a;
END
$$;

COMMENT ON FUNCTION telesrv_append_events(bigint[], integer[], text, integer[], bigint[],
    integer[], bigint[], bigint[], double precision[]) IS
    'Appends events of one type (a box id each) with their outbox rows, each held as asked.';
