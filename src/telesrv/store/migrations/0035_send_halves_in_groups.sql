-- The sender's half of a send of a group on Citus, answering its refusal as a row
-- (store/send_halves.py; store/citus.py runs it on the sender's shard).

-- The sender's half of one send of a group on Citus (store/send_halves.py): what
-- telesrv_send_sender_half returns, or the refusal it raised (its catalogue name), so
-- that a refused send fails alone and the rest of its group commits without a savepoint
-- sent to every worker of the transaction. The exception block is a subtransaction on
-- the worker running the call: a refused half leaves nothing behind, and the store then
-- skips that send's recipient half. Only refusals (RAISE EXCEPTION) are caught; any
-- other error fails the group, and its sends are then written one by one.
--
-- Distributed by p_sender, like the half it wraps (store/citus.py).
--
-- Defined by 0035.
CREATE OR REPLACE FUNCTION telesrv_send_sender_half_or_refusal(
    p_sender bigint, p_recipient bigint, p_random_id bigint, p_date integer,
    p_message text, p_entities bytea, p_fwd_from bytea,
    p_silent boolean, p_noforwards boolean,
    p_reply_to integer, p_quote_text text, p_quote_entities bytea, p_quote_offset integer,
    p_sender_pts integer, p_sender_box integer,
    p_exclude_auth_key_id bigint, p_exclude_session_id bigint,
    p_media jsonb, p_media_id bigint, p_media_kind text, p_grouped_id bigint,
    p_outbox_hold double precision, p_dialog boolean)
RETURNS TABLE (
    duplicate boolean, message_id bigint, sender_box integer, sender_pts integer,
    msg_date integer, sender_bar_closed boolean, reply_message_id bigint,
    reply_sender_id bigint, refusal text)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    SELECT s.duplicate, s.message_id, s.sender_box, s.sender_pts, s.msg_date,
           s.sender_bar_closed, s.reply_message_id, s.reply_sender_id, NULL::text
      FROM telesrv_send_sender_half(
           p_sender => p_sender, p_recipient => p_recipient, p_random_id => p_random_id,
           p_date => p_date, p_message => p_message, p_entities => p_entities,
           p_fwd_from => p_fwd_from, p_silent => p_silent, p_noforwards => p_noforwards,
           p_reply_to => p_reply_to, p_quote_text => p_quote_text,
           p_quote_entities => p_quote_entities, p_quote_offset => p_quote_offset,
           p_sender_pts => p_sender_pts, p_sender_box => p_sender_box,
           p_exclude_auth_key_id => p_exclude_auth_key_id,
           p_exclude_session_id => p_exclude_session_id, p_media => p_media,
           p_media_id => p_media_id, p_media_kind => p_media_kind,
           p_grouped_id => p_grouped_id, p_outbox_hold => p_outbox_hold,
           p_dialog => p_dialog) s;
EXCEPTION WHEN raise_exception THEN
    -- The send's own refusal (its catalogue name): it leaves nothing behind.
    RETURN QUERY SELECT NULL::boolean, NULL::bigint, NULL::integer, NULL::integer,
                        NULL::integer, NULL::boolean, NULL::bigint, NULL::bigint, SQLERRM;
END
$$;

COMMENT ON FUNCTION telesrv_send_sender_half_or_refusal(bigint, bigint, bigint, integer,
    text, bytea, bytea, boolean, boolean, integer, text, bytea, integer, integer, integer,
    bigint, bigint, jsonb, bigint, text, bigint, double precision, boolean) IS
    'The sender''s half of one send of a group on Citus: its row, or its refusal.';
