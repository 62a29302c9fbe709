-- Photos and documents: the objects clients download by (id, access_hash, file_reference).
-- Their contents live in the blob store, named by SHA-256 (the `blob` keys); several rows
-- may share one blob. `owner_user_id` is the account that uploaded the object.

CREATE TABLE photos (
    id              bigint PRIMARY KEY,
    access_hash     bigint NOT NULL,
    file_reference  bytea NOT NULL,
    owner_user_id   bigint NOT NULL,
    date            integer NOT NULL,
    dc_id           integer NOT NULL DEFAULT 2,
    has_stickers    boolean NOT NULL DEFAULT false,
    -- photoStrippedSize bytes (a tiny inline preview), if one was made
    stripped        bytea,
    -- [{"type": "m", "w": 320, "h": 240, "size": 12345, "blob": "<sha256>"}, ...],
    -- smallest first
    sizes           jsonb NOT NULL CHECK (jsonb_typeof(sizes) = 'array')
);
CREATE INDEX photos_owner ON photos (owner_user_id);

CREATE TABLE documents (
    id              bigint PRIMARY KEY,
    access_hash     bigint NOT NULL,
    file_reference  bytea NOT NULL,
    owner_user_id   bigint NOT NULL,
    date            integer NOT NULL,
    dc_id           integer NOT NULL DEFAULT 2,
    mime_type       text NOT NULL,
    size            bigint NOT NULL CHECK (size >= 0),
    blob            text NOT NULL,
    -- each element one serialized DocumentAttribute, in the client's order
    attributes      bytea[] NOT NULL,
    -- thumbnails as photo sizes (same shape as photos.sizes)
    thumbs          jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(thumbs) = 'array'),
    stripped        bytea
);
CREATE INDEX documents_owner ON documents (owner_user_id);
