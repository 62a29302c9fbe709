-- Edits the text of one of p_editor's outgoing private messages in one call.
-- p_users/p_pts: one pts allocated (in Redis, before the call) per owner whose box of
-- the message was seen undeleted; every one leaves as an edit event or, for a box
-- deleted since, a noop. p_link says whether the new text holds a link (NULL: the text
-- is kept), moving a text message's search rows in or out of the link filter. Errors
-- the caller maps to RPC errors are raised with SQLSTATE P0001 and the error name as
-- the message. Returns one row per owner that got an edit event.
--
-- Lock order, shared with the send: the boxes (ascending owner), then the shared
-- private_messages row.
--
-- Defined by 0004; events through telesrv_append_event since 0011, p_link since 0013;
-- the search rows written here, and the boxes locked one owner at a time, since 0031.
CREATE OR REPLACE FUNCTION telesrv_edit_private_message(
    p_editor bigint, p_peer bigint, p_box integer, p_message text, p_entities bytea,
    p_date integer, p_users bigint[], p_pts integer[],
    p_exclude_auth_key_id bigint, p_exclude_session_id bigint, p_link boolean DEFAULT NULL)
RETURNS TABLE (r_user bigint, r_box integer, r_pts integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_sender bigint;
    v_message_id bigint;
    v_owners bigint[] := '{}';
    v_boxes integer[] := '{}';
    v_owner bigint;
    v_box integer;
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

    -- Every owner's undeleted box of the message, locked smaller owner first, one owner
    -- per statement: each reads one owner's rows only (on Citus, one shard's).
    FOR v_owner IN SELECT DISTINCT o FROM unnest(ARRAY[p_editor, p_peer]) AS o ORDER BY o LOOP
        SELECT b.box_id INTO v_box FROM message_boxes b
         WHERE b.owner_user_id = v_owner
           AND b.sender_user_id = p_editor AND b.message_id = v_message_id
           AND NOT b.deleted
           FOR UPDATE;
        IF FOUND THEN
            v_owners := v_owners || v_owner;
            v_boxes := v_boxes || v_box;
        END IF;
    END LOOP;
    IF NOT p_editor = ANY (v_owners) THEN
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
    -- Each owner's search row gets the new text (a trigger on private_messages did this
    -- before 0031). With p_link, a text message gains or loses its place under the link
    -- filter; a media message keeps its kind whatever its caption says.
    FOR j IN 1 .. coalesce(array_length(v_owners, 1), 0) LOOP
        UPDATE message_search s
           SET body = p_message,
               media_kind = CASE WHEN p_link IS NULL
                                   OR (s.media_kind IS NOT NULL AND s.media_kind <> 'url')
                                 THEN s.media_kind
                                 WHEN p_link THEN 'url' END
         WHERE s.owner_user_id = v_owners[j] AND s.box_id = v_boxes[j];
    END LOOP;

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
