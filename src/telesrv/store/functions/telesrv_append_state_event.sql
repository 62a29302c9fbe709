-- Appends a state event (user_state_events: updates without a pts) together with the
-- outbox row that pushes it, and returns its id. The id is the user's next state id:
-- taking it locks the user's head row (user_state_heads) until commit, so a user's
-- state events commit in id order and a rolled-back transaction gives its id back.
--
-- Defined by 0011.
CREATE OR REPLACE FUNCTION telesrv_append_state_event(
    p_user_id bigint, p_event_type text, p_date integer,
    p_peer_user_id bigint DEFAULT NULL, p_payload jsonb DEFAULT NULL,
    p_exclude_auth_key_id bigint DEFAULT NULL, p_exclude_session_id bigint DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    INSERT INTO user_state_heads (user_id, last_id) VALUES (p_user_id, 1)
    ON CONFLICT (user_id) DO UPDATE SET last_id = user_state_heads.last_id + 1
    RETURNING last_id INTO v_id;
    INSERT INTO user_state_events (user_id, id, event_type, date, peer_user_id, payload)
    VALUES (p_user_id, v_id, p_event_type, p_date, p_peer_user_id, p_payload);
    INSERT INTO dispatch_outbox (target_user_id, state_id, exclude_auth_key_id,
                                 exclude_session_id)
    VALUES (p_user_id, v_id, p_exclude_auth_key_id, p_exclude_session_id);
    RETURN v_id;
END
$$;
