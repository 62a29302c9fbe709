-- The sender's dialog after a send on Citus (the top message, the date; an unread count
-- it never touches): part of telesrv_send_sender_half, or a call of its own after the
-- recipient's half when the sender's user id is the larger, so that the two dialogs
-- are locked in user id order. Returns whether the sender's action bar in the chat is
-- closed already. Distributed by p_sender (store/citus.py).
--
-- Defined by 0034.
CREATE OR REPLACE FUNCTION telesrv_send_sender_dialog(
    p_sender bigint, p_recipient bigint, p_sender_box integer, p_date integer)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_bar_closed boolean;
BEGIN
    INSERT INTO dialogs AS d (user_id, peer_user_id, top_message, top_message_date,
                              unread_count)
    VALUES (p_sender, p_recipient, p_sender_box, p_date, 0)
    ON CONFLICT (user_id, peer_user_id) DO UPDATE
       SET top_message = GREATEST(d.top_message, EXCLUDED.top_message),
           top_message_date = GREATEST(d.top_message_date, EXCLUDED.top_message_date)
    RETURNING d.peer_settings_hidden INTO v_bar_closed;
    RETURN v_bar_closed;
END
$$;
