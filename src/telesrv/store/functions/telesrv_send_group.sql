-- Lone sends of any senders committed together (store/send_groups.py), written set by
-- set: each table gets one statement for the whole group, not one per send. A send's
-- cost was mostly per statement (the executor's start, the partition routing, the
-- indexes opened), so a group of 16 costs a fraction of 16 sends one by one.
--
-- What each send gets is what telesrv_send_private_message gives it alone, in the
-- group's order (the c.ord of its row):
-- - a refusal (REPLY_MESSAGE_ID_INVALID, MEDIA_INVALID) fails that send alone, and the
--   send writes nothing (its caller fills its pts with noops). The checks run before
--   anything of the group is written: a reply names a box committed before the send
--   was queued (the caller looks for it first), never one of the group's own;
-- - a retry of a send that happened (its random_id, also a second send of it in the
--   same group) writes noops for its pts and answers with the original, looked up
--   after the group's fresh sends are written, so an original in the group is found;
--   a retry refused by the send function's own checks (its reply deleted meanwhile)
--   is refused alone, as a fresh send would be;
-- - a recipient who blocked the sender gets nothing, not even a pts (a noop);
-- - otherwise the message, both boxes, both search rows, both dialogs, both events and
--   their outbox rows (telesrv_append_events, held for the seconds the send asks).
--
-- Locks: the photo rows the group carries (shared, in id order), then its document
-- rows (the same), then every dialog of the group in one upsert ordered by (user,
-- peer), the order every writer of two dialogs takes. A chat written twice in one
-- group is upserted once, with the sum of its unread counts and the greater of its
-- tops.
--
-- Its statements keep one plan per connection (a generic plan). Left to choose, the
-- planner made three of them anew on every call: a plan made for the call's own arrays
-- counts their elements, one made for any arrays assumes ten, so the latter always
-- looked dearer, and planning them cost about a quarter of a small group's time. Seq
-- scans are off for the function, so that the tables it reads (a reply's boxes, the
-- media rows, the recipient's blocks) are read by index probes even in a plan kept
-- from when they were small; the group's own arrays may still be joined with each
-- other by hashing.
--
-- Defined by 0036; its plans kept since 0037.
CREATE OR REPLACE FUNCTION telesrv_send_group(
    p_sender bigint[], p_recipient bigint[], p_random_id bigint[], p_date integer[],
    p_message text[], p_entities bytea[], p_fwd_from bytea[],
    p_silent boolean[], p_noforwards boolean[], p_media_unread boolean[],
    p_reply_to integer[], p_quote_text text[], p_quote_entities bytea[],
    p_quote_offset integer[], p_sender_pts integer[], p_sender_box integer[],
    p_recipient_pts integer[], p_recipient_box integer[],
    p_exclude_auth_key_id bigint[], p_exclude_session_id bigint[],
    p_media jsonb[], p_media_id bigint[], p_media_kind text[], p_grouped_id bigint[],
    p_outbox_hold double precision[])
RETURNS TABLE (
    ord integer, duplicate boolean, message_id bigint, sender_box integer,
    sender_pts integer, recipient_box integer, recipient_pts integer, msg_date integer,
    recipient_folder_id integer, sender_bar_closed boolean, refusal text)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    n integer := cardinality(p_sender);
    -- Per send, by its place in the group.
    v_refusal text[] := array_fill(NULL::text, ARRAY[n]);
    v_id bigint[];                 -- the new message's id; NULL: refused or a retry
    v_to_recipient boolean[];      -- the recipient gets the message
    v_reply_message bigint[] := array_fill(NULL::bigint, ARRAY[n]);
    v_reply_sender bigint[] := array_fill(NULL::bigint, ARRAY[n]);
    v_recipient_reply integer[] := array_fill(NULL::integer, ARRAY[n]);
    v_folder integer[];
    v_bar_closed boolean[];
    -- The events to append, one a side a fresh send.
    v_event_users bigint[];
    v_event_pts integer[];
    v_event_dates integer[];
    v_event_peers bigint[];
    v_event_boxes integer[];
    v_event_keys bigint[];
    v_event_sessions bigint[];
    v_event_holds double precision[];
    i integer;
BEGIN
    -- Replies: the replied-to box in the sender's chat, as the send alone checks it.
    IF EXISTS (SELECT 1 FROM unnest(p_reply_to) r WHERE r IS NOT NULL) THEN
        SELECT array_agg(b.message_id ORDER BY c.k), array_agg(b.sender_user_id ORDER BY c.k),
               array_agg(CASE WHEN c.reply IS NOT NULL AND b.message_id IS NULL
                              THEN 'REPLY_MESSAGE_ID_INVALID' END ORDER BY c.k)
          INTO v_reply_message, v_reply_sender, v_refusal
          FROM unnest(p_sender, p_recipient, p_reply_to) WITH ORDINALITY AS c(s, r, reply, k)
          LEFT JOIN message_boxes b ON c.reply IS NOT NULL AND b.owner_user_id = c.s
                                   AND b.box_id = c.reply AND b.peer_user_id = c.r
                                   AND NOT b.deleted;
    END IF;

    -- Media: share-locked, in id order, so the clean-up of files no message carries
    -- cannot take one before the message naming it commits; one gone fails its send.
    -- A snapshot that does not say photo names a document, as for a send alone.
    IF EXISTS (SELECT 1 FROM unnest(p_media_id) m WHERE m IS NOT NULL) THEN
        WITH wanted AS (
            SELECT c.k, c.media_id, coalesce(c.media->>'kind' = 'photo', false) AS photo
              FROM unnest(p_media_id, p_media) WITH ORDINALITY AS c(media_id, media, k)
             WHERE c.media_id IS NOT NULL AND v_refusal[c.k] IS NULL
        ), photos_held AS (
            SELECT p.id FROM photos p
             WHERE p.id IN (SELECT w.media_id FROM wanted w WHERE w.photo)
             ORDER BY p.id FOR SHARE
        ), documents_held AS (
            SELECT d.id FROM documents d
             WHERE d.id IN (SELECT w.media_id FROM wanted w WHERE NOT w.photo)
             ORDER BY d.id FOR SHARE
        ), gone AS (
            SELECT w.k FROM wanted w
             WHERE CASE WHEN w.photo THEN w.media_id NOT IN (SELECT id FROM photos_held)
                        ELSE w.media_id NOT IN (SELECT id FROM documents_held) END
        )
        SELECT array_agg(CASE WHEN c.k IN (SELECT k FROM gone) THEN 'MEDIA_INVALID'
                              ELSE v_refusal[c.k] END ORDER BY c.k)
          INTO v_refusal
          FROM generate_series(1, n) AS c(k);
    END IF;

    -- The messages. A retry's random_id meets its original's row and is skipped; of
    -- two sends of one random_id in the group only the first is the message.
    WITH fresh AS (
        INSERT INTO private_messages (sender_user_id, recipient_user_id, random_id, date,
                                      message, entities, fwd_from, quote_text,
                                      quote_entities, quote_offset, media, media_id,
                                      grouped_id)
        SELECT c.s, c.r, c.random_id, c.date, c.message, c.entities, c.fwd_from,
               c.quote_text, c.quote_entities, c.quote_offset, c.media, c.media_id,
               c.grouped_id
          FROM unnest(p_sender, p_recipient, p_random_id, p_date, p_message, p_entities,
                      p_fwd_from, p_quote_text, p_quote_entities, p_quote_offset, p_media,
                      p_media_id, p_grouped_id)
               WITH ORDINALITY AS c(s, r, random_id, date, message, entities, fwd_from,
                                    quote_text, quote_entities, quote_offset, media,
                                    media_id, grouped_id, k)
         WHERE v_refusal[c.k] IS NULL
         ORDER BY c.k
        -- No conflict target, as in telesrv_send_private_message: a retry's random_id
        -- is the one conflict there can be.
        ON CONFLICT DO NOTHING
        RETURNING id, sender_user_id, random_id
    ), firsts AS (
        SELECT DISTINCT ON (c.s, c.random_id) c.s, c.random_id, c.k
          FROM unnest(p_sender, p_random_id) WITH ORDINALITY AS c(s, random_id, k)
         WHERE v_refusal[c.k] IS NULL
         ORDER BY c.s, c.random_id, c.k
    )
    SELECT array_agg(f.id ORDER BY g.k)
      INTO v_id
      FROM generate_series(1, n) AS g(k)
      LEFT JOIN (SELECT firsts.k, fresh.id FROM firsts
                   JOIN fresh ON fresh.sender_user_id = firsts.s
                             AND fresh.random_id = firsts.random_id) f ON f.k = g.k;

    -- Who gets the message: not the sender's saved messages, not a send the caller
    -- found blocked, and not a recipient who blocked the sender since.
    SELECT array_agg(v_id[c.k] IS NOT NULL AND c.recipient_pts IS NOT NULL AND c.s <> c.r
                     AND NOT EXISTS (SELECT 1 FROM contact_blocks b
                                      WHERE b.owner_user_id = c.r AND b.blocked_user_id = c.s)
                     ORDER BY c.k)
      INTO v_to_recipient
      FROM unnest(p_sender, p_recipient, p_recipient_pts) WITH ORDINALITY
           AS c(s, r, recipient_pts, k);

    -- Blocked since the caller looked: the recipient's pts become noops.
    PERFORM telesrv_fill_pts(p_user => c.r, p_pts => ARRAY[c.recipient_pts],
                             p_date => c.date)
       FROM unnest(p_sender, p_recipient, p_recipient_pts, p_date) WITH ORDINALITY
            AS c(s, r, recipient_pts, date, k)
      WHERE v_id[c.k] IS NOT NULL AND c.recipient_pts IS NOT NULL AND c.s <> c.r
        AND NOT v_to_recipient[c.k];

    -- The replied-to message in the recipient's ids.
    IF EXISTS (SELECT 1 FROM unnest(v_reply_message) m WHERE m IS NOT NULL) THEN
        SELECT array_agg(b.box_id ORDER BY c.k)
          INTO v_recipient_reply
          FROM generate_series(1, n) AS c(k)
          LEFT JOIN message_boxes b ON v_to_recipient[c.k] AND v_id[c.k] IS NOT NULL
                                   AND b.owner_user_id = p_recipient[c.k]
                                   AND b.sender_user_id = v_reply_sender[c.k]
                                   AND b.message_id = v_reply_message[c.k]
                                   AND NOT b.deleted;
    END IF;

    -- Every dialog of the group in one upsert, in (user, peer) order. The sender's row
    -- adds 0 to an unread count it never touched; the recipient's adds 1 a message.
    WITH rows AS (
        SELECT c.s AS u, c.r AS peer, c.sender_box AS top, c.date, 0 AS unread, c.k
          FROM unnest(p_sender, p_recipient, p_sender_box, p_date) WITH ORDINALITY
               AS c(s, r, sender_box, date, k)
         WHERE v_id[c.k] IS NOT NULL
        UNION ALL
        SELECT c.r, c.s, c.recipient_box, c.date, 1, c.k
          FROM unnest(p_sender, p_recipient, p_recipient_box, p_date) WITH ORDINALITY
               AS c(s, r, recipient_box, date, k)
         WHERE v_to_recipient[c.k]
    ), written AS (
        INSERT INTO dialogs AS d (user_id, peer_user_id, top_message, top_message_date,
                                  unread_count)
        SELECT rows.u, rows.peer, max(rows.top), max(rows.date), sum(rows.unread)
          FROM rows
         GROUP BY rows.u, rows.peer
         ORDER BY rows.u, rows.peer
        ON CONFLICT (user_id, peer_user_id) DO UPDATE
           SET top_message = GREATEST(d.top_message, EXCLUDED.top_message),
               top_message_date = GREATEST(d.top_message_date, EXCLUDED.top_message_date),
               unread_count = d.unread_count + EXCLUDED.unread_count
        RETURNING d.user_id, d.peer_user_id, d.peer_settings_hidden, d.folder_id
    )
    SELECT array_agg(ws.peer_settings_hidden ORDER BY c.k),
           array_agg(CASE WHEN v_to_recipient[c.k] THEN wr.folder_id END ORDER BY c.k)
      INTO v_bar_closed, v_folder
      FROM unnest(p_sender, p_recipient) WITH ORDINALITY AS c(s, r, k)
      LEFT JOIN written ws ON v_id[c.k] IS NOT NULL AND ws.user_id = c.s
                          AND ws.peer_user_id = c.r
      LEFT JOIN written wr ON v_to_recipient[c.k] AND wr.user_id = c.r
                          AND wr.peer_user_id = c.s;

    -- The boxes and their search rows: the sender's, and the recipient's when the
    -- recipient gets the message.
    INSERT INTO message_boxes (owner_user_id, box_id, peer_user_id, sender_user_id,
                               message_id, out, date, reply_to_msg_id, silent, noforwards,
                               media_unread)
    SELECT b.owner, b.box, b.peer, c.s, v_id[c.k], b.out, c.date, b.reply, c.silent,
           c.noforwards, b.media_unread
      FROM unnest(p_sender, p_recipient, p_date, p_silent, p_noforwards, p_media_unread,
                  p_reply_to, p_sender_box, p_recipient_box) WITH ORDINALITY
           AS c(s, r, date, silent, noforwards, media_unread, reply, sender_box,
                recipient_box, k)
     CROSS JOIN LATERAL (
           VALUES (c.s, c.sender_box, c.r, true, c.reply, false, true),
                  (c.r, c.recipient_box, c.s, false, v_recipient_reply[c.k], c.media_unread,
                   v_to_recipient[c.k])
           ) AS b(owner, box, peer, out, reply, media_unread, wanted)
     WHERE v_id[c.k] IS NOT NULL AND b.wanted;

    INSERT INTO message_search (owner_user_id, box_id, peer_user_id, out, date, body,
                                media_kind)
    SELECT b.owner, b.box, b.peer, b.out, c.date, c.message, c.media_kind
      FROM unnest(p_sender, p_recipient, p_date, p_message, p_media_kind, p_sender_box,
                  p_recipient_box) WITH ORDINALITY
           AS c(s, r, date, message, media_kind, sender_box, recipient_box, k)
     CROSS JOIN LATERAL (
           VALUES (c.s, c.sender_box, c.r, true, true),
                  (c.r, c.recipient_box, c.s, false, v_to_recipient[c.k])
           ) AS b(owner, box, peer, out, wanted)
     WHERE v_id[c.k] IS NOT NULL AND b.wanted;

    -- The events and their outbox rows; the sender's other devices get theirs, the
    -- device that sent does not.
    SELECT array_agg(e.u), array_agg(e.pts), array_agg(c.date), array_agg(e.peer),
           array_agg(e.box), array_agg(e.exclude_key), array_agg(e.exclude_session),
           array_agg(c.hold)
      INTO v_event_users, v_event_pts, v_event_dates, v_event_peers, v_event_boxes,
           v_event_keys, v_event_sessions, v_event_holds
      FROM unnest(p_sender, p_recipient, p_date, p_sender_pts, p_sender_box,
                  p_recipient_pts, p_recipient_box, p_exclude_auth_key_id,
                  p_exclude_session_id, p_outbox_hold) WITH ORDINALITY
           AS c(s, r, date, sender_pts, sender_box, recipient_pts, recipient_box,
                exclude_key, exclude_session, hold, k)
     CROSS JOIN LATERAL (
           VALUES (c.s, c.sender_pts, c.r, c.sender_box, c.exclude_key, c.exclude_session,
                   true),
                  (c.r, c.recipient_pts, c.s, c.recipient_box, NULL::bigint, NULL::bigint,
                   v_to_recipient[c.k])
           ) AS e(u, pts, peer, box, exclude_key, exclude_session, wanted)
     WHERE v_id[c.k] IS NOT NULL AND e.wanted;
    IF v_event_users IS NOT NULL THEN
        PERFORM telesrv_append_events(
            p_user_ids => v_event_users, p_pts => v_event_pts, p_event_type => 'new_message',
            p_dates => v_event_dates, p_peer_user_ids => v_event_peers,
            p_box_ids => v_event_boxes, p_exclude_auth_key_ids => v_event_keys,
            p_exclude_session_ids => v_event_sessions, p_holds => v_event_holds);
    END IF;

    -- The fresh sends' answers.
    RETURN QUERY
    SELECT c.k::integer, false, v_id[c.k], c.sender_box, c.sender_pts,
           CASE WHEN v_to_recipient[c.k] THEN c.recipient_box END,
           CASE WHEN v_to_recipient[c.k] THEN c.recipient_pts END,
           c.date, v_folder[c.k], v_bar_closed[c.k], NULL::text
      FROM unnest(p_sender_box, p_sender_pts, p_recipient_box, p_recipient_pts, p_date)
           WITH ORDINALITY AS c(sender_box, sender_pts, recipient_box, recipient_pts,
                                date, k)
     WHERE v_id[c.k] IS NOT NULL;

    -- The refused.
    RETURN QUERY
    SELECT c.k::integer, NULL::boolean, NULL::bigint, NULL::integer, NULL::integer,
           NULL::integer, NULL::integer, NULL::integer, NULL::integer, NULL::boolean,
           c.refusal
      FROM unnest(v_refusal) WITH ORDINALITY AS c(refusal, k)
     WHERE c.refusal IS NOT NULL;

    -- Retries, now that an original written by this group is in place: each through
    -- the send function alone, which answers with the original and fills the pts.
    FOR i IN SELECT g.k FROM generate_series(1, n) AS g(k)
              WHERE v_id[g.k] IS NULL AND v_refusal[g.k] IS NULL ORDER BY g.k LOOP
      BEGIN
        RETURN QUERY
        SELECT i, s.duplicate, s.message_id, s.sender_box, s.sender_pts, s.recipient_box,
               s.recipient_pts, s.msg_date, s.recipient_folder_id, s.sender_bar_closed,
               NULL::text
          FROM telesrv_send_private_message(
               p_sender => p_sender[i], p_recipient => p_recipient[i],
               p_random_id => p_random_id[i], p_date => p_date[i],
               p_message => p_message[i], p_entities => p_entities[i],
               p_fwd_from => p_fwd_from[i], p_silent => p_silent[i],
               p_noforwards => p_noforwards[i], p_media_unread => p_media_unread[i],
               p_reply_to => p_reply_to[i], p_quote_text => p_quote_text[i],
               p_quote_entities => p_quote_entities[i],
               p_quote_offset => p_quote_offset[i], p_sender_pts => p_sender_pts[i],
               p_sender_box => p_sender_box[i], p_recipient_pts => p_recipient_pts[i],
               p_recipient_box => p_recipient_box[i],
               p_exclude_auth_key_id => p_exclude_auth_key_id[i],
               p_exclude_session_id => p_exclude_session_id[i], p_media => p_media[i],
               p_media_id => p_media_id[i], p_media_kind => p_media_kind[i],
               p_grouped_id => p_grouped_id[i]) s;
      EXCEPTION WHEN raise_exception THEN
        -- Its own refusal (a subtransaction, only for a retry): nothing of it is left.
        RETURN QUERY
        SELECT i, NULL::boolean, NULL::bigint, NULL::integer, NULL::integer,
               NULL::integer, NULL::integer, NULL::integer, NULL::integer, NULL::boolean,
               SQLERRM;
      END;
    END LOOP;
END
$$;

COMMENT ON FUNCTION telesrv_send_group(bigint[], bigint[], bigint[], integer[], text[],
    bytea[], bytea[], boolean[], boolean[], boolean[], integer[], text[], bytea[],
    integer[], integer[], integer[], integer[], integer[], bigint[], bigint[], jsonb[],
    bigint[], text[], bigint[], double precision[]) IS
    'Lone sends of a group committed together, a statement per table: per send its row '
    '(by its place), its refusal, or its original''s row for a retry.';
