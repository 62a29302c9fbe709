-- Private messages, owner-view boxes, dialogs, the per-account update log and the
-- dispatch outbox. Every per-user table is
-- HASH-partitioned by its owner so single-user queries touch one partition.

CREATE SEQUENCE private_messages_id_seq;

-- The shared body of a private message, written once per send.
CREATE TABLE private_messages (
    sender_user_id    bigint  NOT NULL,
    id                bigint  NOT NULL DEFAULT nextval('private_messages_id_seq'),
    recipient_user_id bigint  NOT NULL,
    random_id         bigint  NOT NULL,
    date              integer NOT NULL,
    message           text    NOT NULL,
    entities          bytea,            -- TL Vector<MessageEntity>, as sent
    fwd_from          bytea,            -- TL MessageFwdHeader, for forwards
    quote_text        text,             -- reply quote (shared by both views)
    quote_entities    bytea,
    quote_offset      integer,
    edit_date         integer,
    PRIMARY KEY (sender_user_id, id),
    UNIQUE (sender_user_id, random_id)
) PARTITION BY HASH (sender_user_id);
SELECT telesrv_create_hash_partitions('private_messages');

-- One row per owner per message: the id a client sees is box_id.
CREATE TABLE message_boxes (
    owner_user_id   bigint  NOT NULL,
    box_id          integer NOT NULL,
    peer_user_id    bigint  NOT NULL,
    sender_user_id  bigint  NOT NULL,   -- with message_id: the private_messages row
    message_id      bigint  NOT NULL,
    out             boolean NOT NULL,
    date            integer NOT NULL,
    reply_to_msg_id integer,            -- in this owner's ids
    silent          boolean NOT NULL DEFAULT false,
    noforwards      boolean NOT NULL DEFAULT false,
    media_unread    boolean NOT NULL DEFAULT false,
    reaction_unread boolean NOT NULL DEFAULT false,
    deleted         boolean NOT NULL DEFAULT false,
    PRIMARY KEY (owner_user_id, box_id)
) PARTITION BY HASH (owner_user_id);
SELECT telesrv_create_hash_partitions('message_boxes');
CREATE INDEX message_boxes_history ON message_boxes (owner_user_id, peer_user_id, box_id DESC)
    WHERE NOT deleted;
CREATE INDEX message_boxes_by_message ON message_boxes (sender_user_id, message_id);

CREATE TABLE dialogs (
    user_id            bigint  NOT NULL,
    peer_user_id       bigint  NOT NULL,
    top_message        integer NOT NULL DEFAULT 0,
    top_message_date   integer NOT NULL DEFAULT 0,
    read_inbox_max_id  integer NOT NULL DEFAULT 0,
    read_outbox_max_id integer NOT NULL DEFAULT 0,
    unread_count       integer NOT NULL DEFAULT 0,
    unread_mark        boolean NOT NULL DEFAULT false,
    pinned_order       integer,
    folder_id          integer NOT NULL DEFAULT 0 CHECK (folder_id IN (0, 1)),
    PRIMARY KEY (user_id, peer_user_id)
) PARTITION BY HASH (user_id);
SELECT telesrv_create_hash_partitions('dialogs');
CREATE INDEX dialogs_order ON dialogs
    (user_id, folder_id, top_message_date DESC, top_message DESC, peer_user_id DESC);

-- The account's durable pts log. Every allocated pts ends up here, as a real event
-- or a 'noop' filling a pts whose transaction failed.
CREATE TABLE user_update_events (
    user_id      bigint  NOT NULL,
    pts          integer NOT NULL,
    pts_count    integer NOT NULL,
    event_type   text    NOT NULL,
    date         integer NOT NULL,
    peer_user_id bigint,
    max_id       integer,
    box_ids      integer[],
    payload      jsonb,
    PRIMARY KEY (user_id, pts)
) PARTITION BY HASH (user_id);
SELECT telesrv_create_hash_partitions('user_update_events');
-- messages.getOutboxReadDate: the first outbox read that covers a message.
CREATE INDEX user_update_events_outbox_read ON user_update_events
    (user_id, peer_user_id, max_id, date) WHERE event_type = 'read_history_outbox';

-- Transactional outbox of pushes to online sessions; rows are deleted once handled.
CREATE TABLE dispatch_outbox (
    target_user_id      bigint      NOT NULL,
    id                  bigint      GENERATED ALWAYS AS IDENTITY,
    pts                 integer     NOT NULL,
    exclude_auth_key_id bigint,
    exclude_session_id  bigint,
    status              text        NOT NULL DEFAULT 'pending'
                                    CHECK (status IN ('pending', 'failed')),
    attempts            integer     NOT NULL DEFAULT 0,
    available_at        timestamptz NOT NULL DEFAULT now(),
    last_error          text,
    PRIMARY KEY (target_user_id, id)
) PARTITION BY HASH (target_user_id);
SELECT telesrv_create_hash_partitions('dispatch_outbox');
CREATE INDEX dispatch_outbox_claim ON dispatch_outbox (available_at) WHERE status = 'pending';

-- Fill allocated pts that no event will use (a failed or duplicate send).
CREATE FUNCTION telesrv_fill_pts(p_user bigint, p_pts integer[], p_date integer)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO user_update_events (user_id, pts, pts_count, event_type, date)
    SELECT p_user, pts, 1, 'noop', p_date FROM unnest(p_pts) AS pts
    ON CONFLICT (user_id, pts) DO NOTHING
$$;

-- The whole of messages.sendMessage's write in one call.
-- pts and box ids are allocated in Redis before the call; p_recipient_pts is NULL when
-- nothing may be written for the recipient (saved messages, or the recipient blocked
-- the sender as seen before the call). Dialog rows are locked in ascending user id
-- order, so A->B and B->A at once cannot deadlock.
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
    recipient_box integer, recipient_pts integer, msg_date integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
    v_self boolean := p_sender = p_recipient;  -- saved messages: one box, one dialog
    v_to_recipient boolean := p_recipient_pts IS NOT NULL AND p_sender <> p_recipient;
    v_reply_message bigint;
    v_reply_sender bigint;
    v_recipient_reply integer;
    v_first bigint;
    v_words tsvector;
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
        PERFORM telesrv_fill_pts(p_sender, ARRAY[p_sender_pts], p_date);
        IF p_recipient_pts IS NOT NULL AND NOT v_self THEN
            PERFORM telesrv_fill_pts(p_recipient, ARRAY[p_recipient_pts], p_date);
        END IF;
        RETURN QUERY
        SELECT true, m.id, b.box_id, e.pts, NULL::integer, NULL::integer, m.date
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
        PERFORM telesrv_fill_pts(p_recipient, ARRAY[p_recipient_pts], p_date);
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
                   unread_count = dialogs.unread_count + 1;
        END IF;
    END LOOP;

    INSERT INTO message_boxes (owner_user_id, box_id, peer_user_id, sender_user_id, message_id,
                               out, date, reply_to_msg_id, silent, noforwards)
    VALUES (p_sender, p_sender_box, p_recipient, p_sender, v_id,
            true, p_date, p_reply_to, p_silent, p_noforwards);
    -- Search index rows (message_search, migration 0005), written here rather than by
    -- a row trigger on message_boxes: the words are computed once for both owners and
    -- no lookup of the body is needed (a trigger cost about a third of send throughput).
    v_words := to_tsvector('simple', p_message);
    INSERT INTO message_search (owner_user_id, box_id, peer_user_id, out, date, terms)
    VALUES (p_sender, p_sender_box, p_recipient, true, p_date,
            v_words || array_to_tsvector(ARRAY['@o' || p_sender, '@p' || p_recipient]));
    INSERT INTO user_update_events (user_id, pts, pts_count, event_type, date, peer_user_id, box_ids)
    VALUES (p_sender, p_sender_pts, 1, 'new_message', p_date, p_recipient, ARRAY[p_sender_box]);
    INSERT INTO dispatch_outbox (target_user_id, pts, exclude_auth_key_id, exclude_session_id)
    VALUES (p_sender, p_sender_pts, p_exclude_auth_key_id, p_exclude_session_id);

    IF v_to_recipient THEN
        INSERT INTO message_boxes (owner_user_id, box_id, peer_user_id, sender_user_id, message_id,
                                   out, date, reply_to_msg_id, silent, noforwards, media_unread)
        VALUES (p_recipient, p_recipient_box, p_sender, p_sender, v_id,
                false, p_date, v_recipient_reply, p_silent, p_noforwards, p_media_unread);
        INSERT INTO message_search (owner_user_id, box_id, peer_user_id, out, date, terms)
        VALUES (p_recipient, p_recipient_box, p_sender, false, p_date,
                v_words || array_to_tsvector(ARRAY['@o' || p_recipient, '@p' || p_sender]));
        INSERT INTO user_update_events (user_id, pts, pts_count, event_type, date, peer_user_id,
                                        box_ids)
        VALUES (p_recipient, p_recipient_pts, 1, 'new_message', p_date, p_sender,
                ARRAY[p_recipient_box]);
        INSERT INTO dispatch_outbox (target_user_id, pts)
        VALUES (p_recipient, p_recipient_pts);
    END IF;

    RETURN QUERY SELECT false, v_id, p_sender_box, p_sender_pts,
                        CASE WHEN v_to_recipient THEN p_recipient_box END,
                        CASE WHEN v_to_recipient THEN p_recipient_pts END,
                        p_date;
END
$$;
