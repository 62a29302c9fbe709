-- Text search over an owner's private messages, for messages.search
-- and messages.searchGlobal.
--
-- The embedded PostgreSQL (pgserver) ships no contrib extensions (no pg_trgm, no
-- btree_gin), so this uses only PostgreSQL's built-in full text search, which every
-- server has: the 'simple' configuration (lower-cased words, no stemming, any language)
-- and a GIN index. One code path for embedded and external servers.
--
-- message_search holds one row per visible owner box, HASH-partitioned by owner like
-- message_boxes, so a search touches one partition. A plain GIN index on the terms
-- would be shared by every owner hashed into that partition; to keep a search's work
-- proportional to the owner's own messages, each row's terms also carry two tokens
-- the text parser can never produce ('@o<owner>', '@p<peer>'), and every query ANDs
-- them in: GIN intersects the word's posting list with the owner's (or the chat's).
--
-- Rows follow message_boxes and private_messages through triggers, so sends, edits
-- and deletes written by any code path keep the index right.

CREATE TABLE message_search (
    owner_user_id bigint   NOT NULL,
    box_id        integer  NOT NULL,
    peer_user_id  bigint   NOT NULL,
    out           boolean  NOT NULL,
    date          integer  NOT NULL,
    terms         tsvector NOT NULL,
    PRIMARY KEY (owner_user_id, box_id)
) PARTITION BY HASH (owner_user_id);
SELECT telesrv_create_hash_partitions('message_search');
CREATE INDEX message_search_terms ON message_search USING gin (terms)
    WITH (gin_pending_list_limit = 256);

-- The owner and chat tokens: '@' never starts a lexeme of the default parser.
CREATE FUNCTION telesrv_search_terms(p_owner bigint, p_peer bigint, p_text text)
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_tsvector('simple', p_text)
           || array_to_tsvector(ARRAY['@o' || p_owner, '@p' || p_peer])
$$;

-- A search query: every word of p_text as a prefix (at most 16 words), ANDed with the
-- owner token and, for one chat, the chat token. NULL when the text has no words.
CREATE FUNCTION telesrv_search_query(p_owner bigint, p_peer bigint, p_text text)
RETURNS tsquery LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (string_agg(
                '''' || replace(replace(w.lexeme, '\', '\\'), '''', '''''') || ''':*', ' & ')
            || ' & ''@o' || p_owner || ''''
            || CASE WHEN p_peer IS NULL THEN '' ELSE ' & ''@p' || p_peer || '''' END
           )::tsquery
      FROM (SELECT t.lexeme FROM unnest(to_tsvector('simple', p_text)) AS t
             ORDER BY t.lexeme LIMIT 16) AS w
$$;

CREATE FUNCTION telesrv_message_search_on_box() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- A (soft) delete: the box leaves the index.
    DELETE FROM message_search
     WHERE owner_user_id = OLD.owner_user_id AND box_id = OLD.box_id;
    RETURN NULL;
END
$$;

-- New boxes get their rows from telesrv_send_private_message itself (0003), the only
-- writer of boxes; this trigger function keeps deletes in step.
CREATE TRIGGER message_search_soft_delete AFTER UPDATE OF deleted ON message_boxes
    FOR EACH ROW WHEN (NEW.deleted AND NOT OLD.deleted)
    EXECUTE FUNCTION telesrv_message_search_on_box();
CREATE TRIGGER message_search_delete AFTER DELETE ON message_boxes
    FOR EACH ROW EXECUTE FUNCTION telesrv_message_search_on_box();

-- An edit of the shared body re-indexes every owner's box of it. A private message has
-- boxes only in its sender's and recipient's partitions, which the owner list prunes to.
CREATE FUNCTION telesrv_message_search_on_edit() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE message_search s
       SET terms = telesrv_search_terms(s.owner_user_id, s.peer_user_id, NEW.message)
      FROM message_boxes b
     WHERE b.owner_user_id IN (NEW.sender_user_id, NEW.recipient_user_id)
       AND b.sender_user_id = NEW.sender_user_id AND b.message_id = NEW.id
       AND s.owner_user_id = b.owner_user_id AND s.box_id = b.box_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER message_search_edit AFTER UPDATE OF message ON private_messages
    FOR EACH ROW WHEN (OLD.message IS DISTINCT FROM NEW.message)
    EXECUTE FUNCTION telesrv_message_search_on_edit();

-- Messages written before this migration.
INSERT INTO message_search (owner_user_id, box_id, peer_user_id, out, date, terms)
SELECT b.owner_user_id, b.box_id, b.peer_user_id, b.out, b.date,
       telesrv_search_terms(b.owner_user_id, b.peer_user_id, m.message)
  FROM message_boxes b
  JOIN private_messages m ON m.sender_user_id = b.sender_user_id AND m.id = b.message_id
 WHERE NOT b.deleted;
