-- Profile photos. A user's photos are rows of `photos` (made by the server from an
-- upload, like a message's photo); these tables say which of them are the user's
-- profile photos, which is shown now, and which photo a viewer chose to see for a
-- contact instead (a personal photo, seen by that viewer only).
--
-- `users.photo_id`: the current profile photo (NULL: none); `users.fallback_photo_id`:
-- the public photo shown to those the profile photo is hidden from, and when there is
-- no profile photo. Both name rows of profile_photos of the same user.
ALTER TABLE users ADD COLUMN photo_id bigint, ADD COLUMN fallback_photo_id bigint;

-- The user's profile photos, newest (or most recently made current) first by `ord`;
-- the fallback photo is one row too (fallback = true), outside the listed history.
CREATE TABLE profile_photos (
    user_id  bigint  NOT NULL,
    photo_id bigint  NOT NULL,
    fallback boolean NOT NULL DEFAULT false,
    ord      bigint  NOT NULL,
    PRIMARY KEY (user_id, photo_id)
);
CREATE INDEX profile_photos_order ON profile_photos (user_id, ord DESC) WHERE NOT fallback;
-- Downloads ask whether a photo is anyone's profile photo.
CREATE INDEX profile_photos_by_photo ON profile_photos (photo_id);

-- The photo `owner_user_id` set for their contact `user_id`.
CREATE TABLE personal_photos (
    owner_user_id bigint NOT NULL,
    user_id       bigint NOT NULL,
    photo_id      bigint NOT NULL,
    PRIMARY KEY (owner_user_id, user_id)
);
CREATE INDEX personal_photos_by_photo ON personal_photos (photo_id);

-- A photo change is pushed to the users who have the owner in their contacts: found
-- from the owner's side. Contacts change seldom, so the index costs little.
CREATE INDEX contacts_by_contact_user ON contacts (contact_user_id);
