-- Emoji reactions on private messages.

-- One row per reaction a user put on a message, kept with the message's body: the
-- partition is the author's, like private_messages, so every lookup of one message's
-- reactions touches one partition.
CREATE TABLE message_reactions (
    sender_user_id bigint  NOT NULL,   -- with message_id: the private_messages row
    message_id     bigint  NOT NULL,
    user_id        bigint  NOT NULL,   -- who reacted
    reaction       text    NOT NULL,   -- the emoticon
    big            boolean NOT NULL DEFAULT false,
    date           integer NOT NULL,
    -- Put while the other side blocked the reactor: shown to the reactor alone, for
    -- good, as a message sent to someone who blocked you stays on your side.
    hidden         boolean NOT NULL DEFAULT false,
    PRIMARY KEY (sender_user_id, message_id, user_id, reaction)
) PARTITION BY HASH (sender_user_id);
SELECT telesrv_create_hash_partitions('message_reactions');

-- The message's reactions as every render shows them, rewritten from the rows above in
-- the transaction that changes them: [[user_id, reaction, big, date], ...] oldest
-- first (a hidden one carries a fifth element, true), NULL when there are none. Messages are read with their body, so a page of
-- them carries its reactions without another query, and messages nobody reacted to
-- cost nothing.
ALTER TABLE private_messages ADD COLUMN reactions jsonb;

-- The author's messages with a reaction they have not seen (per owner, per chat):
-- unread_reactions_count and messages.getUnreadReactions read this small index.
CREATE INDEX message_boxes_unread_reactions ON message_boxes (owner_user_id, peer_user_id, box_id)
    WHERE reaction_unread AND NOT deleted;

-- The reaction a double tap sends (messages.setDefaultReaction); no row: the default.
CREATE TABLE reaction_defaults (
    user_id  bigint NOT NULL,
    reaction text   NOT NULL,
    PRIMARY KEY (user_id)
) PARTITION BY HASH (user_id);
SELECT telesrv_create_hash_partitions('reaction_defaults');

-- The reactions a user put lately with add_to_recent (messages.getRecentReactions),
-- newest first (the highest seq, counted per user); the transaction that adds one trims
-- the user's list to its bound.
CREATE TABLE reaction_recent (
    user_id  bigint  NOT NULL,
    reaction text    NOT NULL,
    seq      bigint  NOT NULL,
    PRIMARY KEY (user_id, reaction)
) PARTITION BY HASH (user_id);
SELECT telesrv_create_hash_partitions('reaction_recent');
