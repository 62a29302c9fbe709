-- Outbox rows born held by the process that wrote them.
--
-- A process that commits a send has everything its push needs in hand (the message,
-- both boxes, both pts), so it pushes at once instead of waiting for an outbox worker
-- to claim the rows and read the events back. For that push not to race a worker's
-- claim, the rows are written already leased: due only after the hold, as if claimed
-- at birth. The writing process deletes them once pushed; should it die first, the
-- lease runs out and any worker delivers them, as it would a crashed worker's batch.
--
-- The hold travels in a transaction-local setting, so every event appended by the one
-- statement that sets it is held, and nothing else: telesrv_hold_outbox sets it while
-- its argument is evaluated, before the function it is passed to runs.

CREATE FUNCTION telesrv_hold_outbox(p_seconds double precision, p_pass integer)
RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM set_config('telesrv.outbox_hold', coalesce(p_seconds::text, ''), true);
    RETURN p_pass;
END
$$;

COMMENT ON FUNCTION telesrv_hold_outbox(double precision, integer) IS
    'Returns p_pass; the outbox rows appended in the rest of the transaction are due '
    'p_seconds from now (held by the writer), or at once for NULL.';

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
