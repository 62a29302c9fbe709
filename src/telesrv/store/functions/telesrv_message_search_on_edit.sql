-- Trigger function on private_messages: an edit of the shared body updates every
-- owner's copy of it in message_search. A private message has boxes only in its
-- sender's and recipient's partitions, which the owner list prunes to.
--
-- Defined by 0005; the body column instead of the word vector since 0010.
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
