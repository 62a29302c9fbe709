-- A box's word vector for the full text search of 0005, with two tokens the text
-- parser never produces ('@o<owner>', '@p<peer>') that kept a search to one owner's
-- (or one chat's) rows. Search reads the trigram-indexed body since 0010 and nothing
-- calls this any more; it stays as the migrations left it, until a migration drops it.
--
-- Defined by 0005.
CREATE OR REPLACE FUNCTION telesrv_search_terms(p_owner bigint, p_peer bigint, p_text text)
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_tsvector('simple', p_text)
           || array_to_tsvector(ARRAY['@o' || p_owner, '@p' || p_peer])
$$;
