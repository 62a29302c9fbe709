-- The whole of messages.sendMessage's write in one call, so a send costs one round
-- trip. pts and box ids are allocated in Redis before the call; p_recipient_pts is
-- NULL when nothing may be written for the recipient (saved messages, or the recipient
-- blocked the sender as seen before the call). What the caller checked is checked
-- again here under the locks: the replied-to box, the media row (share-locked, so the
-- clean-up of files no message carries cannot take it), a block since. A retry of a
-- send that happened (its random_id) answers with the original and gives its pts
-- back as noops.
--
-- Lock order, shared with the edit and delete functions: dialogs (smaller user id
-- first), then message boxes, then the shared private_messages row; so A->B and B->A
-- at once cannot deadlock. Both dialogs go in one upsert, both boxes and both search
-- rows in one INSERT each: a send's cost is mostly per partition written, and fewer
-- statements saved a few per cent more.
--
-- The message row's ON CONFLICT names no target: naming (sender_user_id, random_id)
-- made every send map it onto the index of the partition the row is routed to, a
-- catalog walk per index of that partition. The table's only unique keys are that one
-- and the primary key, whose id comes from the sequence, so the one conflict a send
-- can meet is a retry's random_id (a test pins the keys). The dialogs upsert keeps its
-- target: DO UPDATE needs one.
--
-- It returns what the caller pushes and answers with, and two things it read from the
-- dialog rows it writes anyway: the recipient's folder (a send into an archived chat
-- may bring it back) and whether the sender's action bar is closed already.
--
-- Defined by 0003; events through telesrv_append_event and the folder since 0011,
-- media and the action bar since 0013, fewer statements since 0016, no conflict target
-- since 0017.
CREATE OR REPLACE FUNCTION telesrv_send_private_message(
    p_sender bigint, p_recipient bigint, p_random_id bigint, p_date integer,
    p_message text, p_entities bytea, p_fwd_from bytea,
    p_silent boolean, p_noforwards boolean, p_media_unread boolean,
    p_reply_to integer, p_quote_text text, p_quote_entities bytea, p_quote_offset integer,
    p_sender_pts integer, p_sender_box integer,
    p_recipient_pts integer, p_recipient_box integer,
    p_exclude_auth_key_id bigint, p_exclude_session_id bigint,
    p_media jsonb DEFAULT NULL, p_media_id bigint DEFAULT NULL,
    p_media_kind text DEFAULT NULL, p_grouped_id bigint DEFAULT NULL)
RETURNS TABLE (
    duplicate boolean, message_id bigint, sender_box integer, sender_pts integer,
    recipient_box integer, recipient_pts integer, msg_date integer,
    recipient_folder_id integer, sender_bar_closed boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_sender_bar_closed boolean;
    v_id bigint;
    v_self boolean := p_sender = p_recipient;  -- saved messages: one box, one dialog
    v_to_recipient boolean := p_recipient_pts IS NOT NULL AND p_sender <> p_recipient;
    v_reply_message bigint;
    v_reply_sender bigint;
    v_recipient_reply integer;
    v_recipient_folder integer;
BEGIN
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
        -- Photos and documents that no message carries are deleted after a while; the
        -- share lock keeps this one until the message naming it commits, and a row
        -- already gone fails the send instead of leaving a message without its file.
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
    -- No conflict target (see the top of this file): a retry's random_id is the one
    -- conflict there can be. Two concurrent attempts of one send still meet on its
    -- index: the later waits, then gets the duplicate answer if the earlier commits,
    -- or sends the message if it rolls back.
    ON CONFLICT DO NOTHING
    RETURNING id INTO v_id;

    IF v_id IS NULL THEN
        -- A retry of a send that happened: answer with the original, give back the pts.
        PERFORM telesrv_fill_pts(p_user => p_sender, p_pts => ARRAY[p_sender_pts],
                                 p_date => p_date);
        IF p_recipient_pts IS NOT NULL AND NOT v_self THEN
            PERFORM telesrv_fill_pts(p_user => p_recipient, p_pts => ARRAY[p_recipient_pts],
                                     p_date => p_date);
        END IF;
        RETURN QUERY
        SELECT true, m.id, b.box_id, e.pts, NULL::integer, NULL::integer, m.date,
               NULL::integer, NULL::boolean
          FROM private_messages m
          JOIN message_boxes b ON b.owner_user_id = p_sender AND b.sender_user_id = p_sender
                              AND b.message_id = m.id
          LEFT JOIN user_update_events e ON e.user_id = p_sender AND e.event_type = 'new_message'
                                        AND e.box_ids = ARRAY[b.box_id]
         WHERE m.sender_user_id = p_sender AND m.random_id = p_random_id;
        RETURN;
    END IF;

    IF v_to_recipient AND EXISTS (
        SELECT 1 FROM contact_blocks
         WHERE owner_user_id = p_recipient AND blocked_user_id = p_sender
    ) THEN
        -- Blocked since the caller looked: nothing for the recipient, not even a pts.
        PERFORM telesrv_fill_pts(p_user => p_recipient, p_pts => ARRAY[p_recipient_pts],
                                 p_date => p_date);
        v_to_recipient := false;
    END IF;

    IF v_reply_message IS NOT NULL AND v_to_recipient THEN
        SELECT b.box_id INTO v_recipient_reply
          FROM message_boxes b
         WHERE b.owner_user_id = p_recipient AND b.sender_user_id = v_reply_sender
           AND b.message_id = v_reply_message AND NOT b.deleted;
    END IF;

    -- Both dialogs in one upsert. Lock order: the dialog of the smaller user id first.
    -- An INSERT takes its rows' locks one row at a time, in the order its source
    -- yields them, and the ORDER BY fixes that order (a VALUES list alone would give
    -- the sender's first). The recipient's row is there only when the recipient gets
    -- the message (not for a block, nor in saved messages, where the sender's row is
    -- the only one). The sender's row adds 0 to an unread count it never touched; the
    -- recipient's adds 1 (and starts a new dialog at 1).
    WITH written AS (
        INSERT INTO dialogs AS d (user_id, peer_user_id, top_message, top_message_date,
                                  unread_count)
        SELECT v.u, v.peer, v.top, p_date, v.unread
          FROM (VALUES (p_sender, p_recipient, p_sender_box, 0, true),
                       (p_recipient, p_sender, p_recipient_box, 1, v_to_recipient))
               AS v(u, peer, top, unread, wanted)
         WHERE v.wanted
         ORDER BY v.u
        ON CONFLICT (user_id, peer_user_id) DO UPDATE
           SET top_message = GREATEST(d.top_message, EXCLUDED.top_message),
               top_message_date = GREATEST(d.top_message_date, EXCLUDED.top_message_date),
               unread_count = d.unread_count + EXCLUDED.unread_count
        -- Whether the sender's action bar in this chat is closed already: only a send
        -- into a chat whose bar may still be open needs the closing step. And the
        -- recipient's folder: a send into an archived chat may bring it back.
        RETURNING d.user_id, d.peer_settings_hidden, d.folder_id
    )
    SELECT bool_or(w.peer_settings_hidden) FILTER (WHERE w.user_id = p_sender),
           max(w.folder_id) FILTER (WHERE w.user_id <> p_sender)
      INTO v_sender_bar_closed, v_recipient_folder
      FROM written w;

    -- The boxes, then their search rows (message_search, trigram-indexed body since
    -- 0010, written here with the body given so the fill trigger has none to look up):
    -- the sender's row, and the recipient's when the recipient gets the message.
    IF v_to_recipient THEN
        INSERT INTO message_boxes (owner_user_id, box_id, peer_user_id, sender_user_id, message_id,
                                   out, date, reply_to_msg_id, silent, noforwards, media_unread)
        VALUES (p_sender, p_sender_box, p_recipient, p_sender, v_id,
                true, p_date, p_reply_to, p_silent, p_noforwards, false),
               (p_recipient, p_recipient_box, p_sender, p_sender, v_id,
                false, p_date, v_recipient_reply, p_silent, p_noforwards, p_media_unread);
        INSERT INTO message_search (owner_user_id, box_id, peer_user_id, out, date, body,
                                    media_kind)
        VALUES (p_sender, p_sender_box, p_recipient, true, p_date, p_message, p_media_kind),
               (p_recipient, p_recipient_box, p_sender, false, p_date, p_message, p_media_kind);
    ELSE
        INSERT INTO message_boxes (owner_user_id, box_id, peer_user_id, sender_user_id, message_id,
                                   out, date, reply_to_msg_id, silent, noforwards)
        VALUES (p_sender, p_sender_box, p_recipient, p_sender, v_id,
                true, p_date, p_reply_to, p_silent, p_noforwards);
        INSERT INTO message_search (owner_user_id, box_id, peer_user_id, out, date, body,
                                    media_kind)
        VALUES (p_sender, p_sender_box, p_recipient, true, p_date, p_message, p_media_kind);
    END IF;

    PERFORM telesrv_append_event(
        p_user_id => p_sender, p_pts => p_sender_pts, p_pts_count => 1,
        p_event_type => 'new_message', p_date => p_date, p_peer_user_id => p_recipient,
        p_box_ids => ARRAY[p_sender_box], p_exclude_auth_key_id => p_exclude_auth_key_id,
        p_exclude_session_id => p_exclude_session_id);
    IF v_to_recipient THEN
        PERFORM telesrv_append_event(
            p_user_id => p_recipient, p_pts => p_recipient_pts, p_pts_count => 1,
            p_event_type => 'new_message', p_date => p_date, p_peer_user_id => p_sender,
            p_box_ids => ARRAY[p_recipient_box]);
    END IF;

    duplicate := false;
    message_id := v_id;
    sender_box := p_sender_box;
    sender_pts := p_sender_pts;
    recipient_box := CASE WHEN v_to_recipient THEN p_recipient_box END;
    recipient_pts := CASE WHEN v_to_recipient THEN p_recipient_pts END;
    msg_date := p_date;
    recipient_folder_id := v_recipient_folder;
    sender_bar_closed := v_sender_bar_closed;
    RETURN NEXT;
END
$$;
