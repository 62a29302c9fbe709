-- One send of a group committed together (store/send_groups.py): what the send function
-- returns, or the refusal it raised (its catalogue name), so that a send refused fails
-- alone and the rest of its group commits. The exception block runs each call in a
-- subtransaction: a refused send leaves no row behind. Only refusals (RAISE EXCEPTION)
-- are caught; any other error fails the group's statement, and the sends are then
-- written one by one.
--
-- Defined by 0028.
CREATE OR REPLACE FUNCTION telesrv_send_or_refusal(
    p_sender bigint, p_recipient bigint, p_random_id bigint, p_date integer,
    p_message text, p_entities bytea, p_fwd_from bytea,
    p_silent boolean, p_noforwards boolean, p_media_unread boolean,
    p_reply_to integer, p_quote_text text, p_quote_entities bytea, p_quote_offset integer,
    p_sender_pts integer, p_sender_box integer,
    p_recipient_pts integer, p_recipient_box integer,
    p_exclude_auth_key_id bigint, p_exclude_session_id bigint,
    p_media jsonb, p_media_id bigint, p_media_kind text, p_grouped_id bigint)
RETURNS TABLE (
    duplicate boolean, message_id bigint, sender_box integer, sender_pts integer,
    recipient_box integer, recipient_pts integer, msg_date integer,
    recipient_folder_id integer, sender_bar_closed boolean, refusal text)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    SELECT s.duplicate, s.message_id, s.sender_box, s.sender_pts, s.recipient_box,
           s.recipient_pts, s.msg_date, s.recipient_folder_id, s.sender_bar_closed,
           NULL::text
      FROM telesrv_send_private_message(
           p_sender => p_sender, p_recipient => p_recipient, p_random_id => p_random_id,
           p_date => p_date, p_message => p_message, p_entities => p_entities,
           p_fwd_from => p_fwd_from, p_silent => p_silent, p_noforwards => p_noforwards,
           p_media_unread => p_media_unread, p_reply_to => p_reply_to,
           p_quote_text => p_quote_text, p_quote_entities => p_quote_entities,
           p_quote_offset => p_quote_offset, p_sender_pts => p_sender_pts,
           p_sender_box => p_sender_box, p_recipient_pts => p_recipient_pts,
           p_recipient_box => p_recipient_box,
           p_exclude_auth_key_id => p_exclude_auth_key_id,
           p_exclude_session_id => p_exclude_session_id, p_media => p_media,
           p_media_id => p_media_id, p_media_kind => p_media_kind,
           p_grouped_id => p_grouped_id) s;
EXCEPTION WHEN raise_exception THEN
    -- The send's own refusal (its catalogue name): it leaves nothing behind.
    RETURN QUERY SELECT NULL::boolean, NULL::bigint, NULL::integer, NULL::integer,
                        NULL::integer, NULL::integer, NULL::integer, NULL::integer,
                        NULL::boolean, SQLERRM;
END
$$;

COMMENT ON FUNCTION telesrv_send_or_refusal(bigint, bigint, bigint, integer, text, bytea,
    bytea, boolean, boolean, boolean, integer, text, bytea, integer, integer, integer,
    integer, integer, bigint, bigint, jsonb, bigint, text, bigint) IS
    'One send of a group committed together: the send function''s row, or its refusal.';
