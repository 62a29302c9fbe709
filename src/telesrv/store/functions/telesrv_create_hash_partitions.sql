-- Creates the hash partitions of a partitioned table, as many as the partition count
-- this database was created with (schema_settings, written by migrate.py before the
-- first migration), so every per-user table is split the same way:
--   CREATE TABLE message_boxes (...) PARTITION BY HASH (owner_user_id);
--   SELECT telesrv_create_hash_partitions('message_boxes');
-- Partitions are named <table>_p<remainder>.
--
-- Defined by 0001.
CREATE OR REPLACE FUNCTION telesrv_create_hash_partitions(parent regclass) RETURNS void
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
