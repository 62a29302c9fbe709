"""The people search's SQL on real PostgreSQL: word and username prefixes, LIKE's own
characters taken literally, the viewer and their contacts apart, and plans that read
the trigram indexes and one contacts partition instead of every user, also in the
generic plan a prepared statement may switch to."""

from __future__ import annotations

import itertools
import json
from typing import Any, cast

from delivery.test_outbox import SqlRecorder, scanned_partitions, seq_scans
from generic_plans import generic_plans, plan_nodes

from telesrv.store import contacts as contacts_store
from telesrv.store import people_search
from telesrv.store import users as users_store
from telesrv.store.db import Db

_phones = itertools.count(15558830000)


async def user(db: Db, first: str, last: str = "", username: str | None = None) -> int:
    row = await users_store.create_user(db.pool, str(next(_phones)), first, last, username)
    return row.user_id


def prefix(text: str) -> people_search.Prefix:
    return people_search.Prefix(name=text, username=text if text.isalnum() else None)


async def test_word_and_username_prefixes(db: Db) -> None:
    viewer = await user(db, "Viewer")
    alice = await user(db, "Xylo Alice", "Mbeki", username="xyloalice")
    bob = await user(db, "Xylophone", "Bob%_\\", username="zbobby")
    contact = await user(db, "Xylo Carol")
    # No username and no chat with the viewer: a stranger not found by name.
    await user(db, "Xylo Dave")
    await contacts_store.save_contacts(
        db.pool, viewer, [contacts_store.NewContact(contact, "Friend", "Xylo")]
    )

    async def others(text: str) -> list[int]:
        return await people_search.others_matching(db.pool, viewer, prefix(text), 10)

    assert await others("xylo") == [alice, bob]  # by username first, then by name
    assert await others("ALICE") == [alice]  # a later word, any case
    assert await others("mbe") == [alice]  # the last name
    assert await others("lice") == []  # inside a word
    assert await others("bob%_\\") == [bob]  # LIKE's own characters are literal
    assert await others("bob%") == [bob] and await others("b%b") == []
    assert await others("Xylo Al") == [alice]  # across words
    assert await others("viewer") == []  # never the viewer
    assert await others("dave") == []  # not findable (yet)
    assert await people_search.others_matching(db.pool, viewer, prefix("xylo"), 1) == [alice]

    async def mine(text: str) -> list[int]:
        return await people_search.contacts_matching(db.pool, viewer, prefix(text), 10)

    assert await mine("xylo") == [contact]  # the saved last name and the own name
    assert await mine("friend") == [contact]  # the saved name
    assert await mine("carol") == [contact]  # the contact's own name
    assert await mine("alice") == []


async def test_plans_read_the_indexes(db: Db) -> None:
    await db.pool.execute(
        """
        INSERT INTO users (phone, first_name, last_name, username)
        SELECT (15559900000 + g)::text, 'Name' || g, 'Last' || (g % 97),
               CASE WHEN g % 3 = 0 THEN 'user' || g END
          FROM generate_series(1, 5000) AS g
        """
    )
    await db.pool.execute("ANALYZE users")
    viewer = await user(db, "Viewer")
    wanted = prefix("name123")
    recorder = SqlRecorder()
    await people_search.contacts_matching(cast(Any, recorder), viewer, wanted, 10)
    await people_search.others_matching(cast(Any, recorder), viewer, wanted, 10)
    (mine_sql, mine_args), (others_sql, others_args) = recorder.calls
    async with db.pool.acquire() as conn, conn.transaction():
        mine = json.loads(await conn.fetchval("EXPLAIN (FORMAT JSON) " + mine_sql, *mine_args))
        assert len(scanned_partitions(mine[0]["Plan"], "contacts")) <= 1
        # A table this small is best read whole (or along its primary key); at scale
        # the planner weighs the trigram indexes against that. With those two ways
        # ruled out, this shows the statement, and its generic plan, can use them.
        await conn.execute("SET LOCAL enable_seqscan = off")
        await conn.execute("SET LOCAL enable_indexscan = off")
        text = await conn.fetchval("EXPLAIN (FORMAT JSON) " + others_sql, *others_args)
        others = json.loads(text)[0]["Plan"]
        [generic] = await generic_plans(conn, [others_sql])
    assert "users" not in seq_scans(others)
    assert "users_name_trigrams" in {n.get("Index Name") for n in plan_nodes(others)}
    assert "Seq Scan on users" not in generic and "users_name_trigrams" in generic
