-- The account's state log: updates that have no pts in the schema (contacts reset,
-- blocks, and later pins, unread marks, filters, drafts, ...). They never take a pts,
-- so they can neither open a gap on an online device nor leave a hole when their
-- transaction rolls back. Ids are dense per user and committed in order: the writer
-- holds the user's user_state_heads row until commit.
CREATE TABLE user_state_events (
    user_id      bigint  NOT NULL,
    id           bigint  NOT NULL,
    event_type   text    NOT NULL,
    date         integer NOT NULL,
    peer_user_id bigint,
    payload      jsonb,
    PRIMARY KEY (user_id, id)
) PARTITION BY HASH (user_id);
SELECT telesrv_create_hash_partitions('user_state_events');

CREATE TABLE user_state_heads (
    user_id bigint NOT NULL,
    last_id bigint NOT NULL,
    PRIMARY KEY (user_id)
) PARTITION BY HASH (user_id);
SELECT telesrv_create_hash_partitions('user_state_heads');

-- Per device: the last state event it was given (NULL: none yet; it starts at the head
-- when it first asks for its state).
ALTER TABLE update_states ADD COLUMN state_id bigint;

-- An outbox row pushes either a pts event (pts) or a state event (state_id).
ALTER TABLE dispatch_outbox ALTER COLUMN pts DROP NOT NULL;
ALTER TABLE dispatch_outbox ADD COLUMN state_id bigint;
ALTER TABLE dispatch_outbox ADD CONSTRAINT dispatch_outbox_one_event
    CHECK ((pts IS NULL) <> (state_id IS NULL));
