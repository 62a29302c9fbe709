-- Trigger function on message_boxes: a box deleted, softly or for good, leaves the
-- search index. New boxes get their search rows from the send itself, the only writer
-- of boxes (a row trigger cost about a third of send throughput).
--
-- Defined by 0005.
CREATE OR REPLACE FUNCTION telesrv_message_search_on_box() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- A (soft) delete: the box leaves the index.
    DELETE FROM message_search
     WHERE owner_user_id = OLD.owner_user_id AND box_id = OLD.box_id;
    RETURN NULL;
END
$$;
