-- No triggers on the tables a user's rows live in, so that they can be distributed by
-- user (Citus refuses a table with triggers), and fewer hidden writes on plain
-- PostgreSQL too. The three message_search triggers go: a box deleted (softly) leaves
-- the search index in telesrv_delete_message_boxes, the only writer of deletions, and
-- an edit's new text reaches each owner's search row in telesrv_edit_private_message,
-- the only writer of a message's text. The send already wrote the rows (0011).
--
-- The edit and the delete now read and lock the boxes one owner per statement (smaller
-- owner first, as before), so that each statement reads one owner's rows. And telesrv_fill_pts
-- becomes PL/pgSQL returning its count, which Citus can run on distributed tables.
DROP TRIGGER message_search_soft_delete ON message_boxes;
DROP TRIGGER message_search_delete ON message_boxes;
DROP TRIGGER message_search_edit ON private_messages;
DROP FUNCTION telesrv_message_search_on_box();
DROP FUNCTION telesrv_message_search_on_edit();

-- A new result type needs the function dropped first; its callers (PERFORM, or a
-- SELECT whose value is ignored) take either.
DROP FUNCTION telesrv_fill_pts(bigint, integer[], integer);
CREATE FUNCTION telesrv_fill_pts(p_user bigint, p_pts integer[], p_date integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_written integer;
BEGIN
    INSERT INTO user_update_events (user_id, pts, pts_count, event_type, date)
    SELECT p_user, pts, 1, 'noop', p_date FROM unnest(p_pts) AS pts
    ON CONFLICT (user_id, pts) DO NOTHING;
    GET DIAGNOSTICS v_written = ROW_COUNT;
    RETURN v_written;
END
$$;

COMMENT ON FUNCTION telesrv_fill_pts(bigint, integer[], integer) IS
    'Noop events for allocated pts no event will use; never pushed, so no outbox row.';

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
    v_senders bigint[];
    v_messages bigint[];
    v_own_peers bigint[];
    v_peer bigint;
BEGIN
    -- What to delete: the caller's boxes, and the other owners' boxes of those messages,
    -- read one owner per statement (on Citus, one shard each).
    SELECT coalesce(array_agg(b.box_id ORDER BY b.box_id), '{}'),
           coalesce(array_agg(b.peer_user_id ORDER BY b.box_id), '{}'),
           coalesce(array_agg(b.sender_user_id ORDER BY b.box_id), '{}'),
           coalesce(array_agg(b.message_id ORDER BY b.box_id), '{}')
      INTO t_box, t_peer, v_senders, v_messages
      FROM message_boxes b
     WHERE b.owner_user_id = p_owner AND b.box_id = ANY (p_box_ids) AND NOT b.deleted;
    t_owner := array_fill(p_owner, ARRAY[cardinality(t_box)]);
    v_own_peers := t_peer;
    IF p_revoke THEN
        FOR v_peer IN SELECT DISTINCT p FROM unnest(v_own_peers) AS p
                       WHERE p <> p_owner ORDER BY p LOOP
            SELECT coalesce(array_agg(r.box_id ORDER BY r.box_id), '{}') INTO v_ids
              FROM unnest(v_senders, v_messages, v_own_peers) AS k(s, m, p)
             CROSS JOIN LATERAL (
                   -- per box: a join could hash the peer's whole table
                   SELECT r.box_id FROM message_boxes r
                    WHERE r.owner_user_id = v_peer AND r.sender_user_id = k.s
                      AND r.message_id = k.m AND NOT r.deleted
                   OFFSET 0) r
             WHERE k.p = v_peer;
            IF cardinality(v_ids) > 0 AND EXISTS (
                SELECT 1 FROM contact_blocks c
                 WHERE c.owner_user_id = v_peer AND c.blocked_user_id = p_owner
            ) THEN
                RAISE EXCEPTION 'DELETE_MESSAGES_FORBIDDEN' USING ERRCODE = 'P0001';
            END IF;
            -- The peer's boxes of a private chat are all in its chat with the caller.
            t_owner := t_owner || array_fill(v_peer, ARRAY[cardinality(v_ids)]);
            t_box := t_box || v_ids;
            t_peer := t_peer || array_fill(p_owner, ARRAY[cardinality(v_ids)]);
        END LOOP;
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
    -- The boxes, one owner at a time (ascending owner, then box id), locked and marked.
    d_owner := '{}';
    d_box := '{}';
    d_peer := '{}';
    FOR v_peer IN SELECT DISTINCT o FROM unnest(t_owner) AS o ORDER BY o LOOP
        v_ids := ARRAY(SELECT x FROM unnest(t_owner, t_box) AS k(o, x) WHERE o = v_peer);
        PERFORM 1 FROM message_boxes b
         WHERE b.owner_user_id = v_peer AND b.box_id = ANY (v_ids)
         ORDER BY b.box_id
           FOR UPDATE;
        WITH gone AS (
            UPDATE message_boxes b SET deleted = true
             WHERE b.owner_user_id = v_peer AND b.box_id = ANY (v_ids) AND NOT b.deleted
            RETURNING b.box_id, b.peer_user_id
        )
        SELECT d_owner || coalesce(array_agg(v_peer), '{}'),
               d_box || coalesce(array_agg(box_id), '{}'),
               d_peer || coalesce(array_agg(peer_user_id), '{}')
          INTO d_owner, d_box, d_peer
          FROM gone;
    END LOOP;

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
            -- The boxes leave their owner's search rows (a trigger did this before 0031).
            DELETE FROM message_search
             WHERE owner_user_id = p_users[i] AND box_id = ANY (v_ids);
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
