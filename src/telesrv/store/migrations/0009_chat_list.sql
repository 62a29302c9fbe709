-- The chat list as the user organises it, beyond the dialogs table's own columns
-- (pinned_order, unread_mark, folder_id): notification settings and drafts.

-- Per peer (kind 'peer', peer_user_id set) or per peer type (kind 'users', 'chats',
-- 'broadcasts', peer_user_id 0). A missing row means the defaults; NULL columns mean
-- "not set" (the client applies its own default).
CREATE TABLE notify_settings (
    user_id       bigint  NOT NULL,
    kind          text    NOT NULL CHECK (kind IN ('peer', 'users', 'chats', 'broadcasts')),
    peer_user_id  bigint  NOT NULL DEFAULT 0,
    show_previews boolean,
    silent        boolean,
    mute_until    integer,
    sound         bytea,            -- TL NotificationSound, as sent
    PRIMARY KEY (user_id, kind, peer_user_id)
) PARTITION BY HASH (user_id);
SELECT telesrv_create_hash_partitions('notify_settings');

-- One cloud draft per private chat.
CREATE TABLE dialog_drafts (
    user_id         bigint  NOT NULL,
    peer_user_id    bigint  NOT NULL,
    message         text    NOT NULL,
    entities        bytea,          -- TL Vector<MessageEntity>, as sent
    reply_to_msg_id integer,
    no_webpage      boolean NOT NULL DEFAULT false,
    invert_media    boolean NOT NULL DEFAULT false,
    date            integer NOT NULL,
    PRIMARY KEY (user_id, peer_user_id)
) PARTITION BY HASH (user_id);
SELECT telesrv_create_hash_partitions('dialog_drafts');

-- Pinned dialogs of a folder, in order (getPinnedDialogs, the head of getDialogs).
CREATE INDEX dialogs_pinned ON dialogs (user_id, folder_id, pinned_order)
    WHERE pinned_order IS NOT NULL;

-- Custom dialog filters ("folders" in the apps; ids 2 and up, apart from the archive's
-- folder_id): the filter as the client sent it (TL DialogFilter, peers already
-- checked), and its place in the user's order.
CREATE TABLE dialog_filters (
    user_id   bigint  NOT NULL,
    filter_id integer NOT NULL CHECK (filter_id >= 2),
    position  integer NOT NULL,
    filter    bytea   NOT NULL,
    PRIMARY KEY (user_id, filter_id)
) PARTITION BY HASH (user_id);
SELECT telesrv_create_hash_partitions('dialog_filters');

CREATE TABLE dialog_filter_settings (
    user_id      bigint  NOT NULL,
    tags_enabled boolean NOT NULL DEFAULT false,
    PRIMARY KEY (user_id)
) PARTITION BY HASH (user_id);
SELECT telesrv_create_hash_partitions('dialog_filter_settings');

-- The user hid the add/block/report bar of this chat (messages.hidePeerSettingsBar).
ALTER TABLE dialogs ADD COLUMN peer_settings_hidden boolean NOT NULL DEFAULT false;
