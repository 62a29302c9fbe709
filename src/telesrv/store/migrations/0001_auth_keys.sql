-- Shared helper for later migrations: create the hash partitions of a partitioned
-- table, as many as the partition count this database was created with
-- (schema_settings, written by migrate.py before the first migration).
--   CREATE TABLE message_boxes (...) PARTITION BY HASH (owner_user_id);
--   SELECT telesrv_create_hash_partitions('message_boxes');
-- Partitions are named <table>_p<remainder>.
CREATE FUNCTION telesrv_create_hash_partitions(parent regclass) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    modulus int;
    parent_schema name;
    parent_name name;
BEGIN
    SELECT value::int INTO STRICT modulus FROM schema_settings WHERE name = 'partition_count';
    SELECT n.nspname, c.relname INTO STRICT parent_schema, parent_name
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = parent;
    FOR remainder IN 0 .. modulus - 1 LOOP
        EXECUTE format(
            'CREATE TABLE %I.%I PARTITION OF %I.%I FOR VALUES WITH (MODULUS %s, REMAINDER %s)',
            parent_schema, parent_name || '_p' || remainder, parent_schema, parent_name,
            modulus, remainder);
    END LOOP;
END
$$;

-- MTProto authorization keys. auth_key_id is the key's id as the wire carries it
-- (lower 64 bits of SHA1(auth_key), read as a signed little-endian int64).
CREATE TABLE auth_keys (
    auth_key_id      bigint PRIMARY KEY,
    auth_key         bytea NOT NULL CHECK (octet_length(auth_key) = 256),
    is_temp          boolean NOT NULL DEFAULT false,
    -- Temporary keys only: when the key stops being valid.
    expires_at       timestamptz,
    -- Temporary keys only: the permanent key auth.bindTempAuthKey bound it to.
    perm_auth_key_id bigint REFERENCES auth_keys (auth_key_id) ON DELETE SET NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CHECK (is_temp OR (expires_at IS NULL AND perm_auth_key_id IS NULL))
);

CREATE INDEX auth_keys_temp_expires_at ON auth_keys (expires_at) WHERE is_temp;
CREATE INDEX auth_keys_perm_auth_key_id ON auth_keys (perm_auth_key_id)
    WHERE perm_auth_key_id IS NOT NULL;

-- What the client last reported in initConnection on this key. A separate table so the
-- hot auth_keys row is never rewritten by reconnects.
CREATE TABLE auth_key_clients (
    auth_key_id      bigint PRIMARY KEY REFERENCES auth_keys (auth_key_id) ON DELETE CASCADE,
    api_id           integer NOT NULL,
    device_model     text NOT NULL,
    system_version   text NOT NULL,
    app_version      text NOT NULL,
    system_lang_code text NOT NULL,
    lang_pack        text NOT NULL,
    lang_code        text NOT NULL,
    layer            integer NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
