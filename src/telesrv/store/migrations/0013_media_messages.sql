-- Messages with media: photos and documents travel in messages as a snapshot.
--
-- private_messages.media is what a client needs to show the media (ids, access hash,
-- file reference, sizes or mime type, size, attributes, thumbnails), copied from the
-- photo or document when the message is sent, so every read of a message renders it
-- without a join. media_id names that photo or document: a user may download a file
-- that a message they hold carries (the partial indexes serve that check, which looks
-- at the user's own messages only, as sender or as recipient, and a later clean-up of
-- files no message references). grouped_id ties the messages of one album.
-- A message may have media and no text (the text is then an empty caption).

ALTER TABLE private_messages
    ADD COLUMN media      jsonb CHECK (media IS NULL OR jsonb_typeof(media) = 'object'),
    ADD COLUMN media_id   bigint,
    ADD COLUMN grouped_id bigint;
CREATE INDEX private_messages_media_sent ON private_messages (media_id, sender_user_id)
    WHERE media_id IS NOT NULL;
CREATE INDEX private_messages_media_received ON private_messages (media_id, recipient_user_id)
    WHERE media_id IS NOT NULL;

-- What kind of media each box shows ('photo', 'video', 'gif', 'voice', 'round', 'music',
-- 'document', 'sticker'; 'url' for text with a link), for the shared-media filters of
-- a search; NULL for plain text. Filtered listings read the owner's rows of one kind.
ALTER TABLE message_search ADD COLUMN media_kind text;
CREATE INDEX message_search_media ON message_search (owner_user_id, media_kind, box_id DESC)
    WHERE media_kind IS NOT NULL;

-- The send stores the media, its id, the album and the search kind; an ordinary text
-- send passes none of them and costs the same statements as before. The signature
-- grows, so the function is dropped and created again (the body is that of 0011 with
-- the new columns written).

DROP FUNCTION telesrv_send_private_message(
    bigint, bigint, bigint, integer, text, bytea, bytea, boolean, boolean, boolean,
    integer, text, bytea, integer, integer, integer, integer, integer, bigint, bigint);

CREATE FUNCTION telesrv_send_private_message(
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
    v_first bigint;
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
    ON CONFLICT (sender_user_id, random_id) DO NOTHING
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

    -- Lock order: the dialog of the smaller user id first.
    FOR v_first IN SELECT u FROM unnest(ARRAY[p_sender, p_recipient]) AS u
                    GROUP BY u ORDER BY u LOOP
        IF v_first = p_sender THEN
            INSERT INTO dialogs (user_id, peer_user_id, top_message, top_message_date)
            VALUES (p_sender, p_recipient, p_sender_box, p_date)
            ON CONFLICT (user_id, peer_user_id) DO UPDATE
               SET top_message = GREATEST(dialogs.top_message, EXCLUDED.top_message),
                   top_message_date = GREATEST(dialogs.top_message_date, EXCLUDED.top_message_date)
            -- Whether the sender's action bar in this chat is closed already: only a
            -- send into a chat whose bar may still be open needs the closing step.
            RETURNING peer_settings_hidden INTO v_sender_bar_closed;
        ELSIF v_to_recipient THEN
            INSERT INTO dialogs (user_id, peer_user_id, top_message, top_message_date, unread_count)
            VALUES (p_recipient, p_sender, p_recipient_box, p_date, 1)
            ON CONFLICT (user_id, peer_user_id) DO UPDATE
               SET top_message = GREATEST(dialogs.top_message, EXCLUDED.top_message),
                   top_message_date = GREATEST(dialogs.top_message_date, EXCLUDED.top_message_date),
                   unread_count = dialogs.unread_count + 1
            RETURNING folder_id INTO v_recipient_folder;
        END IF;
    END LOOP;

    INSERT INTO message_boxes (owner_user_id, box_id, peer_user_id, sender_user_id, message_id,
                               out, date, reply_to_msg_id, silent, noforwards)
    VALUES (p_sender, p_sender_box, p_recipient, p_sender, v_id,
            true, p_date, p_reply_to, p_silent, p_noforwards);
    -- Search rows (message_search, trigram-indexed body since 0010), written here with
    -- the body given, so the fill trigger has no body to look up (that lookup cost
    -- about a third of send throughput).
    INSERT INTO message_search (owner_user_id, box_id, peer_user_id, out, date, body,
                                media_kind)
    VALUES (p_sender, p_sender_box, p_recipient, true, p_date, p_message, p_media_kind);
    PERFORM telesrv_append_event(
        p_user_id => p_sender, p_pts => p_sender_pts, p_pts_count => 1,
        p_event_type => 'new_message', p_date => p_date, p_peer_user_id => p_recipient,
        p_box_ids => ARRAY[p_sender_box], p_exclude_auth_key_id => p_exclude_auth_key_id,
        p_exclude_session_id => p_exclude_session_id);

    IF v_to_recipient THEN
        INSERT INTO message_boxes (owner_user_id, box_id, peer_user_id, sender_user_id, message_id,
                                   out, date, reply_to_msg_id, silent, noforwards, media_unread)
        VALUES (p_recipient, p_recipient_box, p_sender, p_sender, v_id,
                false, p_date, v_recipient_reply, p_silent, p_noforwards, p_media_unread);
        INSERT INTO message_search (owner_user_id, box_id, peer_user_id, out, date, body,
                                    media_kind)
        VALUES (p_recipient, p_recipient_box, p_sender, false, p_date, p_message,
                p_media_kind);
        PERFORM telesrv_append_event(
            p_user_id => p_recipient, p_pts => p_recipient_pts, p_pts_count => 1,
            p_event_type => 'new_message', p_date => p_date, p_peer_user_id => p_sender,
            p_box_ids => ARRAY[p_recipient_box]);
    END IF;

    RETURN QUERY SELECT false, v_id, p_sender_box, p_sender_pts,
                        CASE WHEN v_to_recipient THEN p_recipient_box END,
                        CASE WHEN v_to_recipient THEN p_recipient_pts END,
                        p_date, v_recipient_folder, v_sender_bar_closed;
END
$$;

-- An edit of a text message's text says whether it now holds a link (p_link; NULL when
-- the text is kept), and moves its search rows in or out of the link filter. The
-- signature grows, so the function is dropped and created again (the body is that of
-- 0011 with the search kind written).

DROP FUNCTION telesrv_edit_private_message(
    bigint, bigint, integer, text, bytea, integer, bigint[], integer[], bigint, bigint);

CREATE FUNCTION telesrv_edit_private_message(
    p_editor bigint, p_peer bigint, p_box integer, p_message text, p_entities bytea,
    p_date integer, p_users bigint[], p_pts integer[],
    p_exclude_auth_key_id bigint, p_exclude_session_id bigint, p_link boolean DEFAULT NULL)
RETURNS TABLE (r_user bigint, r_box integer, r_pts integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_sender bigint;
    v_message_id bigint;
    v_owners bigint[];
    v_boxes integer[];
    v_unchanged boolean;
    v_at integer;
BEGIN
    SELECT b.sender_user_id, b.message_id INTO v_sender, v_message_id
      FROM message_boxes b
     WHERE b.owner_user_id = p_editor AND b.box_id = p_box AND b.peer_user_id = p_peer
       AND NOT b.deleted;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'MESSAGE_ID_INVALID' USING ERRCODE = 'P0001';
    END IF;
    IF v_sender <> p_editor THEN
        RAISE EXCEPTION 'MESSAGE_AUTHOR_REQUIRED' USING ERRCODE = 'P0001';
    END IF;
    IF p_peer <> p_editor AND EXISTS (
        SELECT 1 FROM contact_blocks WHERE owner_user_id = p_peer AND blocked_user_id = p_editor
    ) THEN
        RAISE EXCEPTION 'EDIT_MESSAGES_FORBIDDEN' USING ERRCODE = 'P0001';
    END IF;

    -- Every owner's undeleted box of the message, locked smaller owner first.
    SELECT array_agg(o ORDER BY o), array_agg(x ORDER BY o) INTO v_owners, v_boxes
      FROM (SELECT b.owner_user_id AS o, b.box_id AS x FROM message_boxes b
             WHERE b.owner_user_id = ANY (ARRAY[p_editor, p_peer])
               AND b.sender_user_id = p_editor AND b.message_id = v_message_id
               AND NOT b.deleted
             ORDER BY b.owner_user_id
               FOR UPDATE) locked;
    IF v_owners IS NULL OR NOT p_editor = ANY (v_owners) THEN
        RAISE EXCEPTION 'MESSAGE_ID_INVALID' USING ERRCODE = 'P0001';  -- deleted meanwhile
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(v_owners) o WHERE NOT o = ANY (p_users)) THEN
        RAISE EXCEPTION 'edit of message % found an owner without a pts', v_message_id;
    END IF;

    SELECT m.message = p_message AND m.entities IS NOT DISTINCT FROM p_entities
      INTO v_unchanged
      FROM private_messages m
     WHERE m.sender_user_id = p_editor AND m.id = v_message_id
       FOR UPDATE;
    IF v_unchanged THEN
        RAISE EXCEPTION 'MESSAGE_NOT_MODIFIED' USING ERRCODE = 'P0001';
    END IF;
    UPDATE private_messages
       SET message = p_message, entities = p_entities, edit_date = p_date
     WHERE sender_user_id = p_editor AND id = v_message_id;
    IF p_link IS NOT NULL THEN
        -- A text message gains or loses its place under the link filter; a media
        -- message keeps its kind whatever its caption says.
        UPDATE message_search s
           SET media_kind = CASE WHEN p_link THEN 'url' END
          FROM unnest(v_owners, v_boxes) AS o(owner, box)
         WHERE s.owner_user_id = o.owner AND s.box_id = o.box
           AND (s.media_kind IS NULL OR s.media_kind = 'url')
           AND s.media_kind IS DISTINCT FROM CASE WHEN p_link THEN 'url' END;
    END IF;

    FOR i IN 1 .. coalesce(array_length(p_users, 1), 0) LOOP
        v_at := array_position(v_owners, p_users[i]);
        IF v_at IS NULL THEN
            -- That owner's box was deleted since the caller looked.
            PERFORM telesrv_fill_pts(p_user => p_users[i], p_pts => ARRAY[p_pts[i]],
                                     p_date => p_date);
            CONTINUE;
        END IF;
        PERFORM telesrv_append_event(
            p_user_id => p_users[i], p_pts => p_pts[i], p_pts_count => 1,
            p_event_type => 'edit_message', p_date => p_date,
            p_peer_user_id => CASE WHEN p_users[i] = p_editor THEN p_peer ELSE p_editor END,
            p_box_ids => ARRAY[v_boxes[v_at]],
            p_exclude_auth_key_id =>
                CASE WHEN p_users[i] = p_editor THEN p_exclude_auth_key_id END,
            p_exclude_session_id =>
                CASE WHEN p_users[i] = p_editor THEN p_exclude_session_id END);
        r_user := p_users[i];
        r_box := v_boxes[v_at];
        r_pts := p_pts[i];
        RETURN NEXT;
    END LOOP;
END
$$;
