-- Two statements keep one plan per connection (a generic plan) instead of being
-- planned again on every call for the call's own arrays: the group send's (three of
-- its statements, about a quarter of a small group's time) and the user projection's
-- (about 1.3 ms of a 1.5 ms call for a couple of pairs), which becomes a function for
-- it. Both read their tables by index probes whatever the statistics were when the
-- plan was made; store/functions/telesrv_send_group.sql and
-- telesrv_project_user_pairs.sql say why.
ALTER FUNCTION telesrv_send_group(bigint[], bigint[], bigint[], integer[], text[],
    bytea[], bytea[], boolean[], boolean[], boolean[], integer[], text[], bytea[],
    integer[], integer[], integer[], integer[], integer[], bigint[], bigint[], jsonb[],
    bigint[], text[], bigint[], double precision[])
    SET plan_cache_mode = force_generic_plan
    SET enable_seqscan = off;

-- The user projection's facts of (viewer, target) pairs (store/users.py), as one
-- statement with a plan kept per connection.
--
-- Defined by 0037.
CREATE OR REPLACE FUNCTION telesrv_project_user_pairs(
    p_viewer_ids bigint[], p_target_ids bigint[], p_keys text[])
RETURNS TABLE (
    viewer_id bigint, user_id bigint, phone text, first_name text, last_name text,
    username text, online_until timestamptz, last_online_at timestamptz,
    saved_first_name text, saved_last_name text, in_viewer_contacts boolean,
    has_viewer_in_contacts boolean, saved_by_phone boolean, viewer_blocked boolean,
    blocked_viewer boolean, photo_id bigint, photo_stripped bytea,
    fallback_photo_id bigint, fallback_stripped bytea, personal_photo_id bigint,
    personal_stripped bytea, privacy_set text[], privacy_denied text[])
LANGUAGE plpgsql
STABLE
SET plan_cache_mode = force_generic_plan
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_seqscan = off
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT p.viewer_id, u.user_id, u.phone, u.first_name, u.last_name, u.username,
           u.online_until, u.last_online_at,
           mine.first_name AS saved_first_name, mine.last_name AS saved_last_name,
           mine.owner_user_id IS NOT NULL AS in_viewer_contacts,
           theirs.owner_user_id IS NOT NULL AS has_viewer_in_contacts,
           COALESCE(mine.saved_by_phone, false) AS saved_by_phone,
           EXISTS (SELECT 1 FROM contact_blocks b
                    WHERE b.owner_user_id = p.viewer_id
                      AND b.blocked_user_id = u.user_id) AS viewer_blocked,
           EXISTS (SELECT 1 FROM contact_blocks b
                    WHERE b.owner_user_id = u.user_id
                      AND b.blocked_user_id = p.viewer_id) AS blocked_viewer,
           u.photo_id, cur.stripped AS photo_stripped,
           u.fallback_photo_id, fb.stripped AS fallback_stripped,
           pe.photo_id AS personal_photo_id, pep.stripped AS personal_stripped,
           pv.privacy_set, pv.privacy_denied
      FROM unnest(p_viewer_ids, p_target_ids) AS p(viewer_id, target_id)
      JOIN users u ON u.user_id = p.target_id
      LEFT JOIN contacts mine
             ON mine.owner_user_id = p.viewer_id AND mine.contact_user_id = u.user_id
      LEFT JOIN contacts theirs
             ON theirs.owner_user_id = u.user_id AND theirs.contact_user_id = p.viewer_id
      LEFT JOIN photos cur ON cur.id = u.photo_id
      LEFT JOIN photos fb ON fb.id = u.fallback_photo_id
      LEFT JOIN personal_photos pe
             ON pe.owner_user_id = p.viewer_id AND pe.user_id = u.user_id
      LEFT JOIN photos pep ON pep.id = pe.photo_id
      LEFT JOIN LATERAL (
            SELECT array_agg(s.key) AS privacy_set,
                   array_agg(s.key) FILTER (WHERE NOT COALESCE((
                       SELECT r.kind LIKE 'allow%'
                         FROM unnest(s.kinds) WITH ORDINALITY AS r(kind, n)
                        WHERE r.kind IN ('allow_all', 'disallow_all')
                           OR (r.kind IN ('allow_contacts', 'disallow_contacts')
                               AND theirs.owner_user_id IS NOT NULL)
                           OR r.n = (SELECT m.n FROM privacy_rule_members m
                                      WHERE m.user_id = s.user_id AND m.key = s.key
                                        AND m.member = p.viewer_id)
                        ORDER BY r.n
                        LIMIT 1), false)) AS privacy_denied
              FROM privacy_rules s
             WHERE s.user_id = u.user_id AND s.key = ANY(p_keys)) pv ON true;
END
$$;

COMMENT ON FUNCTION telesrv_project_user_pairs(bigint[], bigint[], text[]) IS
    'The user projection''s facts of (viewer, target) pairs, the arrays read pairwise, '
    'with the target''s privacy keys among those asked and those refusing the viewer.';
