-- The privacy rules an account chose, one row per key (account.setPrivacy). A key
-- without a row has the default, which the service knows, so a default changed later
-- applies to every account that never chose. `rules` is the ordered list the owner
-- gave: [{"rule": "allow_users", "users": [ids]}, {"rule": "allow_contacts"}, ...];
-- the first rule that matches a viewer decides, none matching refuses.
CREATE TABLE privacy_rules (
    user_id bigint NOT NULL,
    key     text   NOT NULL,
    rules   jsonb  NOT NULL CHECK (jsonb_typeof(rules) = 'array'),
    PRIMARY KEY (user_id, key)
);

-- Who has a user in their address book: the audience of that user's status and name
-- pushes (the table is partitioned by owner, so without it the lookup reads every row).
CREATE INDEX contacts_by_contact ON contacts (contact_user_id);
