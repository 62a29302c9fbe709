-- messages.deleteMessages and messages.deleteHistory in one call: deletes p_owner's
-- boxes p_box_ids and, with p_revoke, the other owners' boxes of those messages. For
-- owner i the caller allocated p_n_pts[i] pts from p_first_pts[i]; k of them are used
-- by one delete_messages event (pts_count k, stored at the last pts of the range), the
-- first n - k become noops. Dialogs that lose messages get their top message and
-- unread count recomputed; a dialog left empty is removed, or kept empty with
-- p_keep_empty (deleteHistory's just_clear). Returns one row per owner in p_users;
-- r_pts is NULL when nothing of that owner was left to delete.
--
-- Lock order, shared with the send: dialogs (ascending user, peer), then message boxes
-- (ascending owner, box id). Lookups go one dialog or box at a time: a join over the
-- pairs can hash every partition. Every statement reads or writes one owner's rows,
-- so that on Citus each runs on one shard.
--
-- Defined by 0004; events through telesrv_append_event since 0011; the search rows
-- deleted here, and one owner per statement, since 0031.
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
