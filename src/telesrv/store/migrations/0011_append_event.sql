-- One way to write each kind of log row.
--
-- An event a device must be told about is appended together with the outbox row that
-- pushes it, so no event can be logged without being pushed or pushed without being
-- logged:
--   telesrv_append_event        a pts event (user_update_events) and its outbox row;
--   telesrv_append_state_event  a state event (user_state_events, no pts) and its row.
-- The one other writer of the pts log is telesrv_fill_pts: a 'noop' fills an allocated
-- pts that no event will use, and is never pushed (a device learns of it through
-- getDifference only, so it has no outbox row).
--
-- Every call of a telesrv_* function passes its arguments by name, so a reordered or
-- extended signature cannot silently shift values from one parameter to another.

CREATE FUNCTION telesrv_append_event(
    p_user_id bigint, p_pts integer, p_pts_count integer, p_event_type text, p_date integer,
    p_peer_user_id bigint DEFAULT NULL, p_max_id integer DEFAULT NULL,
    p_box_ids integer[] DEFAULT NULL, p_payload jsonb DEFAULT NULL,
    p_exclude_auth_key_id bigint DEFAULT NULL, p_exclude_session_id bigint DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO user_update_events (user_id, pts, pts_count, event_type, date, peer_user_id,
                                    max_id, box_ids, payload)
    VALUES (p_user_id, p_pts, p_pts_count, p_event_type, p_date, p_peer_user_id,
            p_max_id, p_box_ids, p_payload);
    INSERT INTO dispatch_outbox (target_user_id, pts, exclude_auth_key_id, exclude_session_id)
    VALUES (p_user_id, p_pts, p_exclude_auth_key_id, p_exclude_session_id);
END
$$;

-- The id is the user's next state id: taking it locks the user's head row until commit,
-- so a user's state events commit in id order and a rolled-back transaction gives its
-- id back.
CREATE FUNCTION telesrv_append_state_event(
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

COMMENT ON FUNCTION telesrv_fill_pts(bigint, integer[], integer) IS
    'Noop events for allocated pts no event will use; never pushed, so no outbox row.';

-- The bodies below are those of 0003 and 0004 with every event written through
-- telesrv_append_event and every call made with named arguments.

-- The send reports the folder of the recipient's dialog, read from the dialog row it
-- already writes: a message into an archived chat brings that chat back to the main
-- list (unless muted), and only such a send needs a further look, so an ordinary send
-- costs no extra statement. The return type changes, so the function is recreated.

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
    p_exclude_auth_key_id bigint, p_exclude_session_id bigint)
RETURNS TABLE (
    duplicate boolean, message_id bigint, sender_box integer, sender_pts integer,
    recipient_box integer, recipient_pts integer, msg_date integer,
    recipient_folder_id integer)
LANGUAGE plpgsql AS $$
DECLARE
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

    INSERT INTO private_messages (sender_user_id, recipient_user_id, random_id, date, message,
                                  entities, fwd_from, quote_text, quote_entities, quote_offset)
    VALUES (p_sender, p_recipient, p_random_id, p_date, p_message,
            p_entities, p_fwd_from, p_quote_text, p_quote_entities, p_quote_offset)
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
               NULL::integer
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
                   top_message_date = GREATEST(dialogs.top_message_date, EXCLUDED.top_message_date);
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
    INSERT INTO message_search (owner_user_id, box_id, peer_user_id, out, date, body)
    VALUES (p_sender, p_sender_box, p_recipient, true, p_date, p_message);
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
        INSERT INTO message_search (owner_user_id, box_id, peer_user_id, out, date, body)
        VALUES (p_recipient, p_recipient_box, p_sender, false, p_date, p_message);
        PERFORM telesrv_append_event(
            p_user_id => p_recipient, p_pts => p_recipient_pts, p_pts_count => 1,
            p_event_type => 'new_message', p_date => p_date, p_peer_user_id => p_sender,
            p_box_ids => ARRAY[p_recipient_box]);
    END IF;

    RETURN QUERY SELECT false, v_id, p_sender_box, p_sender_pts,
                        CASE WHEN v_to_recipient THEN p_recipient_box END,
                        CASE WHEN v_to_recipient THEN p_recipient_pts END,
                        p_date, v_recipient_folder;
END
$$;

CREATE OR REPLACE FUNCTION telesrv_edit_private_message(
    p_editor bigint, p_peer bigint, p_box integer, p_message text, p_entities bytea,
    p_date integer, p_users bigint[], p_pts integer[],
    p_exclude_auth_key_id bigint, p_exclude_session_id bigint)
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

CREATE OR REPLACE FUNCTION telesrv_delete_message_boxes(
    p_owner bigint, p_box_ids integer[], p_revoke boolean, p_keep_empty boolean,
    p_date integer, p_users bigint[], p_first_pts integer[], p_n_pts integer[],
    p_exclude_auth_key_id bigint, p_exclude_session_id bigint)
RETURNS TABLE (r_user bigint, r_pts integer, r_count integer, r_box_ids integer[])
LANGUAGE plpgsql AS $$
DECLARE
    t_owner bigint[];
    t_box integer[];
    t_peer bigint[];
    d_owner bigint[];
    d_box integer[];
    d_peer bigint[];
    v_ids integer[];
    v_n integer;
    v_k integer;
    v_last integer;
    v_pair record;
    v_top integer;
    v_top_date integer;
BEGIN
    -- What to delete: the caller's boxes, and the other owners' boxes of those messages.
    SELECT array_agg(o ORDER BY o, x), array_agg(x ORDER BY o, x), array_agg(p ORDER BY o, x)
      INTO t_owner, t_box, t_peer
      FROM (SELECT b.owner_user_id AS o, b.box_id AS x, b.peer_user_id AS p
              FROM message_boxes b
             WHERE b.owner_user_id = p_owner AND b.box_id = ANY (p_box_ids) AND NOT b.deleted
            UNION ALL
            SELECT r.owner_user_id, r.box_id, r.peer_user_id
              FROM message_boxes b
             CROSS JOIN LATERAL (
                   -- per box, in the peer's partition: a join could hash whole tables
                   SELECT * FROM message_boxes r
                    WHERE r.owner_user_id = b.peer_user_id
                      AND r.sender_user_id = b.sender_user_id
                      AND r.message_id = b.message_id AND NOT r.deleted
                   OFFSET 0) r
             WHERE p_revoke AND b.owner_user_id = p_owner AND b.box_id = ANY (p_box_ids)
               AND NOT b.deleted AND b.peer_user_id <> p_owner) t;

    IF p_revoke AND EXISTS (
        SELECT 1 FROM unnest(t_owner) AS o
         WHERE o <> p_owner AND EXISTS (SELECT 1 FROM contact_blocks c
                                         WHERE c.owner_user_id = o
                                           AND c.blocked_user_id = p_owner)
    ) THEN
        RAISE EXCEPTION 'DELETE_MESSAGES_FORBIDDEN' USING ERRCODE = 'P0001';
    END IF;
    IF EXISTS (
        SELECT 1 FROM unnest(t_owner) AS o GROUP BY o
        HAVING count(*) > coalesce(
            (SELECT n FROM unnest(p_users, p_n_pts) AS a(u, n) WHERE a.u = o), 0)
    ) THEN
        RAISE EXCEPTION 'delete by % found more boxes than pts were allocated', p_owner;
    END IF;

    -- One primary-key lookup per dialog: a join over the pairs can hash every partition.
    FOR v_pair IN SELECT DISTINCT u, p FROM unnest(t_owner, t_peer) AS k(u, p) ORDER BY u, p LOOP
        PERFORM 1 FROM dialogs
         WHERE user_id = v_pair.u AND peer_user_id = v_pair.p
           FOR UPDATE;
    END LOOP;
    PERFORM 1 FROM message_boxes b
      JOIN unnest(t_owner, t_box) AS k(o, x) ON b.owner_user_id = k.o AND b.box_id = k.x
     ORDER BY b.owner_user_id, b.box_id
       FOR UPDATE OF b;
    WITH gone AS (
        UPDATE message_boxes b SET deleted = true
          FROM unnest(t_owner, t_box) AS k(o, x)
         WHERE b.owner_user_id = k.o AND b.box_id = k.x AND NOT b.deleted
        RETURNING b.owner_user_id, b.box_id, b.peer_user_id
    )
    SELECT array_agg(owner_user_id), array_agg(box_id), array_agg(peer_user_id)
      INTO d_owner, d_box, d_peer
      FROM gone;

    FOR i IN 1 .. coalesce(array_length(p_users, 1), 0) LOOP
        SELECT coalesce(array_agg(x ORDER BY x), '{}') INTO v_ids
          FROM unnest(d_owner, d_box) AS k(o, x) WHERE o = p_users[i];
        v_n := p_n_pts[i];
        v_k := coalesce(array_length(v_ids, 1), 0);
        v_last := p_first_pts[i] + v_n - 1;
        IF v_n > v_k THEN
            PERFORM telesrv_fill_pts(
                p_user => p_users[i],
                p_pts => ARRAY(SELECT generate_series(p_first_pts[i], v_last - v_k)),
                p_date => p_date);
        END IF;
        r_user := p_users[i];
        r_count := v_k;
        r_box_ids := v_ids;
        r_pts := NULL;
        IF v_k > 0 THEN
            PERFORM telesrv_append_event(
                p_user_id => p_users[i], p_pts => v_last, p_pts_count => v_k,
                p_event_type => 'delete_messages', p_date => p_date, p_box_ids => v_ids,
                p_exclude_auth_key_id =>
                    CASE WHEN p_users[i] = p_owner THEN p_exclude_auth_key_id END,
                p_exclude_session_id =>
                    CASE WHEN p_users[i] = p_owner THEN p_exclude_session_id END);
            r_pts := v_last;
        END IF;
        RETURN NEXT;
    END LOOP;

    FOR v_pair IN SELECT DISTINCT u, p FROM unnest(d_owner, d_peer) AS k(u, p) ORDER BY u, p LOOP
        SELECT b.box_id, b.date INTO v_top, v_top_date
          FROM message_boxes b
         WHERE b.owner_user_id = v_pair.u AND b.peer_user_id = v_pair.p AND NOT b.deleted
         ORDER BY b.box_id DESC
         LIMIT 1;
        IF FOUND THEN
            UPDATE dialogs d
               SET top_message = v_top, top_message_date = v_top_date,
                   unread_count = (SELECT count(*) FROM message_boxes b
                                    WHERE b.owner_user_id = v_pair.u
                                      AND b.peer_user_id = v_pair.p
                                      AND NOT b.deleted AND NOT b.out
                                      AND b.box_id > d.read_inbox_max_id)
             WHERE d.user_id = v_pair.u AND d.peer_user_id = v_pair.p;
        ELSIF p_keep_empty THEN
            UPDATE dialogs SET top_message = 0, top_message_date = 0, unread_count = 0
             WHERE user_id = v_pair.u AND peer_user_id = v_pair.p;
        ELSE
            DELETE FROM dialogs WHERE user_id = v_pair.u AND peer_user_id = v_pair.p;
        END IF;
    END LOOP;
END
$$;
