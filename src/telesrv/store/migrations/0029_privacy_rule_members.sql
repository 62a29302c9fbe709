-- 0024 and 0025 both indexed contacts by contact_user_id (`contacts_by_contact` and
-- `contacts_by_contact_user`): every contact write kept two copies of the same index.
-- The first stays (docs/updates.md names it).
DROP INDEX contacts_by_contact_user;

-- What the projection needs of a user's rules for one viewer, without reading the
-- rules themselves (a list can name a thousand users): the kinds in order, and who is
-- named by a users rule (`n`: the 1-based place of the first rule naming them, the
-- only one of those rules that can decide). Both are written with `rules`, in the
-- same transaction (store/privacy.py set_rules_txn).
ALTER TABLE privacy_rules ADD COLUMN kinds text[];
UPDATE privacy_rules s
   SET kinds = ARRAY(
       SELECT r.e->>'rule'
         FROM jsonb_array_elements(s.rules) WITH ORDINALITY AS r(e, n)
        ORDER BY r.n);
ALTER TABLE privacy_rules ALTER COLUMN kinds SET NOT NULL;

CREATE TABLE privacy_rule_members (
    user_id bigint  NOT NULL,
    key     text    NOT NULL,
    member  bigint  NOT NULL,
    n       integer NOT NULL,
    PRIMARY KEY (user_id, key, member)
);
INSERT INTO privacy_rule_members (user_id, key, member, n)
SELECT s.user_id, s.key, u.member::bigint, min(r.n)
  FROM privacy_rules s
 CROSS JOIN LATERAL jsonb_array_elements(s.rules) WITH ORDINALITY AS r(e, n)
 CROSS JOIN LATERAL jsonb_array_elements_text(COALESCE(r.e->'users', '[]')) AS u(member)
 GROUP BY s.user_id, s.key, u.member::bigint;
