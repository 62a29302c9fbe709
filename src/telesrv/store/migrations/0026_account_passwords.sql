-- Two-step verification. An account with a row has a password: the server keeps the
-- salts the client hashed it with and the SRP verifier (g^x mod p), never the password.
-- reset_at: when the owner asked to reset a forgotten password (account.resetPassword),
-- the time from which the reset goes through.
CREATE TABLE account_passwords (
    user_id    bigint      PRIMARY KEY REFERENCES users (user_id) ON DELETE CASCADE,
    salt1      bytea       NOT NULL,
    salt2      bytea       NOT NULL,
    verifier   bytea       NOT NULL,
    hint       text        NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL,
    reset_at   timestamptz
);

-- Keys that gave the right login code for an account with a password: not signed in
-- until auth.checkPassword proves the password (until expires_at). A key that is
-- never signed in may be collected as unused: its wait goes with it.
CREATE TABLE password_logins (
    auth_key_id bigint      PRIMARY KEY REFERENCES auth_keys (auth_key_id) ON DELETE CASCADE,
    user_id     bigint      NOT NULL REFERENCES users (user_id) ON DELETE CASCADE,
    expires_at  timestamptz NOT NULL
);
