-- Returns p_pass, and holds the outbox rows the rest of the transaction appends for
-- p_seconds (NULL: due at once). The hold travels in a transaction-local setting,
-- set while this call is evaluated as an argument of the function it is passed to,
-- so every event that function appends is held, and the send passes it as its date.
-- See telesrv_append_event for why a send's rows are held.
--
-- Defined by 0015.
CREATE OR REPLACE FUNCTION telesrv_hold_outbox(p_seconds double precision, p_pass integer)
RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM set_config('telesrv.outbox_hold', coalesce(p_seconds::text, ''), true);
    RETURN p_pass;
END
$$;

COMMENT ON FUNCTION telesrv_hold_outbox(double precision, integer) IS
    'Returns p_pass; the outbox rows appended in the rest of the transaction are due '
    'p_seconds from now (held by the writer), or at once for NULL.';
