-- Substring search with pg_trgm (ILIKE on a trigram index, as the message design asks) replaces the word
-- prefix search of 0005. Full text search on the 'simple' configuration only found word
-- prefixes, and text without spaces (Chinese, Japanese) only from its first character;
-- a trigram index serves ILIKE '%...%' on any substring of any script.
--
-- pg_trgm is a trusted extension (PostgreSQL >= 13): the database owner may create it.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- message_search keeps its shape and its owner partitions (a search touches one); it
-- now holds each box's text, which the trigram index covers. The tsvector column stays
-- (nullable, no longer indexed or filled) so a send function written for 0005 still
-- inserts its rows.
ALTER TABLE message_search ADD COLUMN body text;
ALTER TABLE message_search ALTER COLUMN terms DROP NOT NULL;
DROP INDEX message_search_terms;
DROP FUNCTION telesrv_search_query(bigint, bigint, text);

-- A send function that inserts the text itself (body) skips the lookup; one written for
-- 0005 inserts terms only, and the text is read from the message the row belongs to
-- (its sender is the owner for an outgoing box, else the peer).
CREATE FUNCTION telesrv_message_search_fill_body() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.body IS NULL THEN
        NEW.body := (
            SELECT m.message
              FROM message_boxes b
              JOIN private_messages m ON m.id = b.message_id
             WHERE b.owner_user_id = NEW.owner_user_id AND b.box_id = NEW.box_id
               AND m.sender_user_id = CASE WHEN NEW.out THEN NEW.owner_user_id
                                           ELSE NEW.peer_user_id END);
    END IF;
    NEW.terms := NULL;
    RETURN NEW;
END
$$;

CREATE TRIGGER message_search_body BEFORE INSERT ON message_search
    FOR EACH ROW EXECUTE FUNCTION telesrv_message_search_fill_body();

-- An edit of the shared body updates every owner's copy of it (replaces 0005's, which
-- recomputed the tsvector).
CREATE OR REPLACE FUNCTION telesrv_message_search_on_edit() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE message_search s
       SET body = NEW.message
      FROM message_boxes b
     WHERE b.owner_user_id IN (NEW.sender_user_id, NEW.recipient_user_id)
       AND b.sender_user_id = NEW.sender_user_id AND b.message_id = NEW.id
       AND s.owner_user_id = b.owner_user_id AND s.box_id = b.box_id;
    RETURN NULL;
END
$$;

-- Rows written before this migration.
UPDATE message_search s
   SET body = m.message, terms = NULL
  FROM message_boxes b
  JOIN private_messages m ON m.sender_user_id = b.sender_user_id AND m.id = b.message_id
 WHERE b.owner_user_id = s.owner_user_id AND b.box_id = s.box_id;

-- A pending list (fastupdate) keeps a send's index write cheap; searches read it too.
CREATE INDEX message_search_body ON message_search USING gin (body gin_trgm_ops)
    WITH (gin_pending_list_limit = 256);
