-- How a document was uploaded to be shown. A video or an animation uploaded with
-- force_file is a plain file, and a video uploaded with nosound_video is a silent
-- video. A message's media snapshot keeps this for that message; a later send of the
-- same document by id (an album of files prepared with messages.uploadMedia, a resend)
-- has only the document to go by, so the document keeps it too.
ALTER TABLE documents
    ADD COLUMN force_file boolean NOT NULL DEFAULT false,
    ADD COLUMN nosound boolean NOT NULL DEFAULT false;
