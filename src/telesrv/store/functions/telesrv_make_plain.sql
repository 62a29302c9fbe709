-- Replaces a hash-partitioned table by a plain one of the same name, columns, rows,
-- defaults, checks, keys and indexes. Only for a database with Citus (store/citus.py),
-- whose shards already split each table by user: telesrv's own partitions under them
-- multiply the shards (16 x 32 per table) and cost a third of a send's time there.
-- Nothing else refers to the tables by their identity (no views, no foreign keys to
-- them, functions find them by name), so the new table takes the old one's place.
--
-- Defined by 0033.
CREATE OR REPLACE FUNCTION telesrv_make_plain(parent regclass) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_schema name;
    v_name name;
    v_copy name;
    v_keys text[];
    v_indexes text[];
    v_owned record;
    v_statement text;
BEGIN
    SELECT n.nspname, c.relname INTO STRICT v_schema, v_name
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = parent AND c.relkind = 'p';
    v_copy := v_name || '__plain';
    -- What LIKE does not copy: keys (with their names) and the other indexes; a
    -- partitioned table's index reads "ON ONLY" the parent.
    SELECT coalesce(array_agg(format('ALTER TABLE %I.%I ADD CONSTRAINT %I %s', v_schema,
                                     v_name, conname, pg_get_constraintdef(oid))
                              ORDER BY contype = 'f', conname), '{}')
      INTO v_keys
      FROM pg_constraint WHERE conrelid = parent AND contype IN ('p', 'u', 'x', 'f');
    SELECT coalesce(array_agg(replace(pg_get_indexdef(i.indexrelid), ' ON ONLY ', ' ON ')
                              ORDER BY i.indexrelid), '{}')
      INTO v_indexes
      FROM pg_index i
     WHERE i.indrelid = parent
       AND NOT EXISTS (SELECT 1 FROM pg_constraint k
                        WHERE k.conrelid = parent AND k.conindid = i.indexrelid);
    EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS'
                   ' INCLUDING GENERATED INCLUDING IDENTITY INCLUDING STORAGE'
                   ' INCLUDING COMMENTS INCLUDING STATISTICS)',
                   v_schema, v_copy, v_schema, v_name);
    EXECUTE format('INSERT INTO %I.%I OVERRIDING SYSTEM VALUE SELECT * FROM %I.%I',
                   v_schema, v_copy, v_schema, v_name);
    -- A serial column's sequence belongs to the old table and would go with it.
    FOR v_owned IN
        SELECT d.objid::regclass AS seq, a.attname
          FROM pg_depend d
          JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
          JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
         WHERE d.refobjid = parent AND d.deptype = 'a'
    LOOP
        EXECUTE format('ALTER SEQUENCE %s OWNED BY %I.%I.%I', v_owned.seq, v_schema, v_copy,
                       v_owned.attname);
    END LOOP;
    -- An identity column's new sequence goes on from the rows copied.
    FOR v_owned IN
        SELECT a.attname FROM pg_attribute a
         WHERE a.attrelid = format('%I.%I', v_schema, v_copy)::regclass
           AND a.attidentity <> ''
    LOOP
        EXECUTE format('SELECT setval(pg_get_serial_sequence(%L, %L), max(%I)) FROM %I.%I'
                       ' HAVING max(%I) IS NOT NULL',
                       format('%I.%I', v_schema, v_copy), v_owned.attname, v_owned.attname,
                       v_schema, v_copy, v_owned.attname);
    END LOOP;
    EXECUTE format('DROP TABLE %I.%I', v_schema, v_name);
    EXECUTE format('ALTER TABLE %I.%I RENAME TO %I', v_schema, v_copy, v_name);
    FOREACH v_statement IN ARRAY v_keys || v_indexes LOOP
        EXECUTE v_statement;
    END LOOP;
END
$$;
