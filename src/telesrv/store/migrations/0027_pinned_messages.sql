-- Pinned messages and finding people by name.

-- A message pinned in a private chat, per owner: each side has its own flag, since a
-- pin may be made on one side only (pm_oneside) and a block keeps it off the other.
-- A column with a constant default is added without rewriting the table.
ALTER TABLE message_boxes ADD COLUMN pinned boolean NOT NULL DEFAULT false;

-- A chat's pinned messages, newest first: the pinned filter of messages.search, the
-- latest pin of users.getFullUser and unpinAllMessages read this small index only.
CREATE INDEX message_boxes_pinned ON message_boxes (owner_user_id, peer_user_id, box_id DESC)
    WHERE pinned AND NOT deleted;

-- contacts.search: a username prefix and a word prefix of the name ("ali" in "Bob
-- Alice") are LIKE patterns on the lowered texts. Trigram indexes serve both for a
-- query of three letters or more, also when the pattern is a parameter of a prepared
-- statement's generic plan (a btree prefix scan needs a constant pattern).
CREATE INDEX users_username_trigrams ON users USING gin ((lower(username)) gin_trgm_ops)
    WHERE username IS NOT NULL;
CREATE INDEX users_name_trigrams ON users
    USING gin ((lower(first_name || ' ' || last_name)) gin_trgm_ops);
