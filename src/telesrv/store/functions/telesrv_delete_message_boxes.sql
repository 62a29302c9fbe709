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
-- pairs can hash every partition.
--
-- Defined by 0004; events through telesrv_append_event since 0011.
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
