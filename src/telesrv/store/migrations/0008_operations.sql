-- Operator tools: the record of unknown methods and the login blocks.

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

-- Phones the operator barred from signing in (telesrv users block-login); a phone with
-- no account yet can be barred too.
CREATE TABLE login_blocks (
    phone      text        PRIMARY KEY,
    blocked_at timestamptz NOT NULL DEFAULT now()
);
