-- The recipient's half of a send on Citus, after telesrv_send_sender_half in the same
-- transaction: every row it reads or writes is the recipient's, so with the recipient
-- as its distribution argument (store/citus.py) it runs in one call on the recipient's
-- shard. As telesrv_send_private_message does for the recipient: a block since the
-- caller looked (the recipient's contact_blocks) or a duplicate send (the sender's half
-- said so) leaves the recipient nothing but a noop at the allocated pts; otherwise the
-- recipient's box (replying to the recipient's own box of the replied-to message, if
-- it has one), dialog (one more unread; its folder returned, as a send may bring an
-- archived chat back), search row, and event with its outbox row.
--
-- Returns one row; its values are NULL when the recipient got nothing.
--
-- Defined by 0034.
CREATE OR REPLACE FUNCTION telesrv_send_recipient_half(
    p_recipient bigint, p_sender bigint, p_message_id bigint, p_duplicate boolean,
    p_date integer, p_message text, p_silent boolean, p_noforwards boolean,
    p_media_unread boolean, p_reply_message_id bigint, p_reply_sender_id bigint,
    p_recipient_pts integer, p_recipient_box integer, p_media_kind text,
    p_outbox_hold double precision)
RETURNS TABLE (recipient_box integer, recipient_pts integer, recipient_folder_id integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_reply integer;
    v_folder integer;
BEGIN
    IF p_duplicate OR EXISTS (
        SELECT 1 FROM contact_blocks
         WHERE owner_user_id = p_recipient AND blocked_user_id = p_sender
    ) THEN
        PERFORM telesrv_fill_pts(p_user => p_recipient, p_pts => ARRAY[p_recipient_pts],
                                 p_date => p_date);
        RETURN QUERY SELECT NULL::integer, NULL::integer, NULL::integer;
        RETURN;
    END IF;
    PERFORM set_config('telesrv.outbox_hold', coalesce(p_outbox_hold::text, ''), true);

    IF p_reply_message_id IS NOT NULL THEN
        SELECT b.box_id INTO v_reply
          FROM message_boxes b
         WHERE b.owner_user_id = p_recipient AND b.sender_user_id = p_reply_sender_id
           AND b.message_id = p_reply_message_id AND NOT b.deleted;
    END IF;

    INSERT INTO dialogs AS d (user_id, peer_user_id, top_message, top_message_date,
                              unread_count)
    VALUES (p_recipient, p_sender, p_recipient_box, p_date, 1)
    ON CONFLICT (user_id, peer_user_id) DO UPDATE
       SET top_message = GREATEST(d.top_message, EXCLUDED.top_message),
           top_message_date = GREATEST(d.top_message_date, EXCLUDED.top_message_date),
           unread_count = d.unread_count + 1
    RETURNING d.folder_id INTO v_folder;

    INSERT INTO message_boxes (owner_user_id, box_id, peer_user_id, sender_user_id, message_id,
                               out, date, reply_to_msg_id, silent, noforwards, media_unread)
    VALUES (p_recipient, p_recipient_box, p_sender, p_sender, p_message_id,
            false, p_date, v_reply, p_silent, p_noforwards, p_media_unread);
    INSERT INTO message_search (owner_user_id, box_id, peer_user_id, out, date, body,
                                media_kind)
    VALUES (p_recipient, p_recipient_box, p_sender, false, p_date, p_message, p_media_kind);

    PERFORM telesrv_append_event(
        p_user_id => p_recipient, p_pts => p_recipient_pts, p_pts_count => 1,
        p_event_type => 'new_message', p_date => p_date, p_peer_user_id => p_sender,
        p_box_ids => ARRAY[p_recipient_box]);

    RETURN QUERY SELECT p_recipient_box, p_recipient_pts, v_folder;
END
$$;
