-- How many days of inactivity an account may go through before it is deleted, as its
-- owner set it (account.setAccountTTL). An account without a row has the default,
-- which the service knows: a default changed later then applies to every account that
-- never chose one.
CREATE TABLE account_ttl (
    user_id bigint  PRIMARY KEY,
    days    integer NOT NULL
);
