-- The per-user parts of a send, which the store calls on Citus instead of
-- telesrv_send_private_message (store/citus.py runs each on its user's shard).

-- The sender's dialog after a send on Citus (the top message, the date; an unread count
-- it never touches): part of telesrv_send_sender_half, or a call of its own after the
-- recipient's half when the sender's user id is the larger, so that the two dialogs
-- are locked in user id order. Returns whether the sender's action bar in the chat is
-- closed already. Distributed by p_sender (store/citus.py).
--
-- Defined by 0034.
CREATE OR REPLACE FUNCTION telesrv_send_sender_dialog(
    p_sender bigint, p_recipient bigint, p_sender_box integer, p_date integer)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_bar_closed boolean;
BEGIN
    INSERT INTO dialogs AS d (user_id, peer_user_id, top_message, top_message_date,
                              unread_count)
    VALUES (p_sender, p_recipient, p_sender_box, p_date, 0)
    ON CONFLICT (user_id, peer_user_id) DO UPDATE
       SET top_message = GREATEST(d.top_message, EXCLUDED.top_message),
           top_message_date = GREATEST(d.top_message_date, EXCLUDED.top_message_date)
    RETURNING d.peer_settings_hidden INTO v_bar_closed;
    RETURN v_bar_closed;
END
$$;

-- The sender's half of a send on Citus: every row it writes or reads is the sender's,
-- so with the sender as its distribution argument (store/citus.py) Citus runs the whole
-- call on the sender's shard, one statement to one worker instead of one per row. The
-- store calls it, then telesrv_send_recipient_half, in one transaction; plain
-- PostgreSQL keeps telesrv_send_private_message, one call for both users.
--
-- What it does is that function's, for the sender's rows only: the message row (kept by
-- its sender; a retry's random_id meets the unique key and is answered with the
-- original, its pts given back as a noop), the replied-to box (the sender's), the media
-- row's share lock, the sender's box, dialog, search row and event with its outbox row.
-- It also returns what the recipient's half needs: the message id, and the replied-to
-- message as (message id, its sender), which the recipient's box of it is found by.
--
-- The outbox hold comes as an argument: telesrv_hold_outbox sets a transaction-local
-- setting on the node it runs on, and this call runs on a worker.
--
-- Lock order, as in the one-call send: the dialog of the smaller user id first. When the
-- sender's id is the larger, p_dialog is false: this half leaves the sender's dialog
-- alone, and telesrv_send_sender_dialog writes it after the recipient's half. The rows
-- written before are new (the message, its box, search row and event), which no other
-- transaction waits on.
--
-- Defined by 0034.
CREATE OR REPLACE FUNCTION telesrv_send_sender_half(
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
    reply_sender_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
    v_reply_message bigint;
    v_reply_sender bigint;
    v_bar_closed boolean;
BEGIN
    PERFORM set_config('telesrv.outbox_hold', coalesce(p_outbox_hold::text, ''), true);

    IF p_reply_to IS NOT NULL THEN
        SELECT b.message_id, b.sender_user_id INTO v_reply_message, v_reply_sender
          FROM message_boxes b
         WHERE b.owner_user_id = p_sender AND b.box_id = p_reply_to
           AND b.peer_user_id = p_recipient AND NOT b.deleted;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'REPLY_MESSAGE_ID_INVALID' USING ERRCODE = 'P0001';
        END IF;
    END IF;

    IF p_media_id IS NOT NULL THEN
        -- See telesrv_send_private_message: the file stays until this message commits.
        IF p_media->>'kind' = 'photo' THEN
            PERFORM 1 FROM photos WHERE id = p_media_id FOR SHARE;
        ELSE
            PERFORM 1 FROM documents WHERE id = p_media_id FOR SHARE;
        END IF;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'MEDIA_INVALID' USING ERRCODE = 'P0001';
        END IF;
    END IF;

    INSERT INTO private_messages (sender_user_id, recipient_user_id, random_id, date, message,
                                  entities, fwd_from, quote_text, quote_entities, quote_offset,
                                  media, media_id, grouped_id)
    VALUES (p_sender, p_recipient, p_random_id, p_date, p_message,
            p_entities, p_fwd_from, p_quote_text, p_quote_entities, p_quote_offset,
            p_media, p_media_id, p_grouped_id)
    ON CONFLICT DO NOTHING
    RETURNING id INTO v_id;

    IF v_id IS NULL THEN
        -- A retry of a send that happened: the original, and the sender's pts back.
        PERFORM telesrv_fill_pts(p_user => p_sender, p_pts => ARRAY[p_sender_pts],
                                 p_date => p_date);
        RETURN QUERY
        SELECT true, m.id, b.box_id, e.pts, m.date, NULL::boolean, NULL::bigint,
               NULL::bigint
          FROM private_messages m
          JOIN message_boxes b ON b.owner_user_id = p_sender AND b.sender_user_id = p_sender
                              AND b.message_id = m.id
          LEFT JOIN user_update_events e ON e.user_id = p_sender AND e.event_type = 'new_message'
                                        AND e.box_ids = ARRAY[b.box_id]
         WHERE m.sender_user_id = p_sender AND m.random_id = p_random_id;
        RETURN;
    END IF;

    IF p_dialog THEN
        v_bar_closed := telesrv_send_sender_dialog(
            p_sender => p_sender, p_recipient => p_recipient, p_sender_box => p_sender_box,
            p_date => p_date);
    END IF;

    INSERT INTO message_boxes (owner_user_id, box_id, peer_user_id, sender_user_id, message_id,
                               out, date, reply_to_msg_id, silent, noforwards)
    VALUES (p_sender, p_sender_box, p_recipient, p_sender, v_id,
            true, p_date, p_reply_to, p_silent, p_noforwards);
    INSERT INTO message_search (owner_user_id, box_id, peer_user_id, out, date, body,
                                media_kind)
    VALUES (p_sender, p_sender_box, p_recipient, true, p_date, p_message, p_media_kind);

    PERFORM telesrv_append_event(
        p_user_id => p_sender, p_pts => p_sender_pts, p_pts_count => 1,
        p_event_type => 'new_message', p_date => p_date, p_peer_user_id => p_recipient,
        p_box_ids => ARRAY[p_sender_box], p_exclude_auth_key_id => p_exclude_auth_key_id,
        p_exclude_session_id => p_exclude_session_id);

    RETURN QUERY SELECT false, v_id, p_sender_box, p_sender_pts, p_date, v_bar_closed,
                        v_reply_message, v_reply_sender;
END
$$;

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
