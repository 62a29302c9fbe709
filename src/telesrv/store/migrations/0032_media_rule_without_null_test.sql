-- The media domain's rule restated without its NULL test: a domain's CHECK passes NULL
-- anyway (as a table's does), so CHECK (jsonb_typeof(VALUE) = 'object') admits exactly
-- what 0020's CHECK (VALUE IS NULL OR jsonb_typeof(VALUE) = 'object') admitted. Citus
-- cannot copy 0020's form to its workers (it fails on the NULL test inside a domain
-- rule), and copies this one. The rule is checked again against the rows already there
-- by one read of private_messages.
ALTER DOMAIN telesrv_message_media DROP CONSTRAINT telesrv_message_media_check;
ALTER DOMAIN telesrv_message_media ADD CONSTRAINT telesrv_message_media_check
    CHECK (jsonb_typeof(VALUE) = 'object');
