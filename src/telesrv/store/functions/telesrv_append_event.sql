-- Appends a pts event (user_update_events) together with the outbox row that pushes
-- it, so no event is logged without being pushed or pushed without being logged; with
-- telesrv_append_events (many at once, for a group of sends), the one way to write a
-- pushed pts event.
--
-- The outbox row is due at once, unless the statement that calls this holds it
-- (telesrv_hold_outbox): the process that commits a send pushes it itself, so the row
-- is written already leased for the hold, as if claimed at birth, and no worker's
-- claim races that push. Should the writer die before deleting it, the hold runs out
-- and any worker delivers the row.
--
-- Every call of a telesrv_* function passes its arguments by name, so a reordered or
-- extended signature cannot silently shift values from one parameter to another.
--
-- Defined by 0011; the held outbox rows since 0015.
CREATE OR REPLACE FUNCTION telesrv_append_event(
    p_user_id bigint, p_pts integer, p_pts_count integer, p_event_type text, p_date integer,
    p_peer_user_id bigint DEFAULT NULL, p_max_id integer DEFAULT NULL,
    p_box_ids integer[] DEFAULT NULL, p_payload jsonb DEFAULT NULL,
    p_exclude_auth_key_id bigint DEFAULT NULL, p_exclude_session_id bigint DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_hold double precision :=
        coalesce(nullif(current_setting('telesrv.outbox_hold', true), '')::double precision, 0);
BEGIN
    INSERT INTO user_update_events (user_id, pts, pts_count, event_type, date, peer_user_id,
                                    max_id, box_ids, payload)
    VALUES (p_user_id, p_pts, p_pts_count, p_event_type, p_date, p_peer_user_id,
            p_max_id, p_box_ids, p_payload);
    INSERT INTO dispatch_outbox (target_user_id, pts, exclude_auth_key_id, exclude_session_id,
                                 available_at)
    VALUES (p_user_id, p_pts, p_exclude_auth_key_id, p_exclude_session_id,
            now() + make_interval(secs => v_hold));
END
$$;
