-- Methods clients called that the server does not implement, with the last client
-- seen calling each: which calls operators' users' apps make that nothing answers.
-- One row per TL method name (a bounded set: names come from the schema).
CREATE TABLE unknown_methods (
    method           text        PRIMARY KEY,
    calls            bigint      NOT NULL DEFAULT 0,
    first_seen       timestamptz NOT NULL DEFAULT now(),
    last_seen        timestamptz NOT NULL DEFAULT now(),
    last_layer       integer,
    last_app_version text
);
