"""Every table the migrations make has a place on Citus (store/citus.py), so a new table
cannot reach a Citus database unplaced; and on plain PostgreSQL nothing of Citus runs:
the per-user tables keep their hash partitions."""

from __future__ import annotations

from telesrv.store import citus
from telesrv.store.db import Db


async def test_every_table_has_a_place_on_citus(db: Db) -> None:
    async with db.pool.acquire() as conn:
        tables = await citus.schema_tables(conn)
    assert citus.unplaced(set(tables)) == []
    assert set(tables) == set(citus.DISTRIBUTED) | set(citus.REFERENCE) | set(
        citus.COORDINATOR_ONLY
    )


async def test_plain_postgresql_keeps_its_partitions(db: Db) -> None:
    async with db.pool.acquire() as conn:
        assert not await citus.has_citus(conn)
        tables = await citus.schema_tables(conn)
    assert {t for t, kind in tables.items() if kind == "p"} == {
        "dialogs", "message_boxes", "message_search", "private_messages", "message_reactions",
        "user_update_events", "user_state_events", "user_state_heads", "dispatch_outbox",
        "contacts", "contact_blocks", "notify_settings", "dialog_drafts", "dialog_filters",
        "dialog_filter_settings", "reaction_defaults", "reaction_recent",
    }  # fmt: skip


def test_only_per_user_tables_are_distributed() -> None:
    assert not set(citus.DISTRIBUTED) & set(citus.REFERENCE)
    assert citus.ANCHOR in citus.DISTRIBUTED
