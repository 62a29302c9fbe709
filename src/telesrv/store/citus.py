"""telesrv on Citus: where each table lives when the database has the citus extension.

Every table keyed by a user is distributed by that user's column, all in one colocation
group (with ``dialogs``), so every row of one user is on one shard and a statement about
one user runs on one worker. Small global tables that are rarely written, and read
together with every user's rows (accounts, auth keys, media files), are reference
tables: a copy on every node. The migrator's own two tables stay on the coordinator,
where only it reads them.

telesrv's own hash partitions are off there: the shards already split each table by
user, and partitions under them multiplied the shards (16 partitions x 32 shards per
table) and cost a third of a send's time. The migrations were written for plain
PostgreSQL and create partitioned tables; ``place_tables`` replaces each by a plain
table of the same shape (``telesrv_make_plain``) before distributing it. A table
already placed is left alone, so a second start changes nothing.

On plain PostgreSQL nothing here runs.
"""

from __future__ import annotations

import logging

import asyncpg

log = logging.getLogger(__name__)

# The table every distributed table is colocated with.
ANCHOR = "dialogs"

# Per-user tables, by their user column.
DISTRIBUTED: dict[str, str] = {
    "dialogs": "user_id",
    "message_boxes": "owner_user_id",
    "message_search": "owner_user_id",
    # A message body lives with its sender (the message's owner by sender).
    "private_messages": "sender_user_id",
    "message_reactions": "sender_user_id",
    "user_update_events": "user_id",
    "user_state_events": "user_id",
    "user_state_heads": "user_id",
    "dispatch_outbox": "target_user_id",
    "contacts": "owner_user_id",
    "contact_blocks": "owner_user_id",
    "notify_settings": "user_id",
    "dialog_drafts": "user_id",
    "dialog_filters": "user_id",
    "dialog_filter_settings": "user_id",
    "reaction_defaults": "user_id",
    "reaction_recent": "user_id",
    "account_ttl": "user_id",
    "account_passwords": "user_id",
    "privacy_rules": "user_id",
    "privacy_rule_members": "user_id",
    "profile_photos": "user_id",
    "personal_photos": "owner_user_id",
}

# Global tables, copied to every node; in this order, as each one's foreign keys point
# only at tables before it.
REFERENCE: tuple[str, ...] = (
    "users",  # every projection of a user reads it, with any user's rows
    "auth_keys",  # read per request, by key, not by user
    "auth_key_clients",
    "authorizations",
    "update_states",
    "password_logins",
    "photos",  # media files, shared by every message and profile naming them
    "documents",
    "login_codes",  # keyed by phone, before there is a user
    "login_blocks",
    "unknown_methods",  # operators' counters
)

# Functions whose every row is one user's: distributed by that argument, colocated with
# ``dialogs``, so Citus runs a call on that user's shard in one statement (delegation).
# ``force_delegation``: the store calls them inside a transaction (a send's two halves),
# where Citus would otherwise run the body's statements one by one from the coordinator.
DELEGATED: dict[str, str] = {
    "telesrv_send_sender_half": "p_sender",
    "telesrv_send_sender_half_or_refusal": "p_sender",
    "telesrv_send_recipient_half": "p_recipient",
    "telesrv_send_sender_dialog": "p_sender",
}

# The migrator's own tables: only it reads them, under its lock, on the coordinator.
COORDINATOR_ONLY: tuple[str, ...] = ("schema_migrations", "schema_settings")


class PlacementError(RuntimeError):
    pass


async def has_citus(conn: asyncpg.Connection) -> bool:
    return bool(
        await conn.fetchval("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')")
    )


async def tables_placed(conn: asyncpg.Connection) -> bool:
    """Whether the tables were distributed already (on a database with citus)."""
    return bool(
        await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM pg_dist_partition p"
            " JOIN pg_class c ON c.oid = p.logicalrelid"
            " WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace)",
            ANCHOR,
        )
    )


async def schema_tables(conn: asyncpg.Connection) -> dict[str, str]:
    """Every table of the schema (not partitions, not Citus's shards): name -> relkind."""
    rows = await conn.fetch(
        "SELECT c.relname, c.relkind::text AS relkind FROM pg_class c"
        " WHERE c.relnamespace = current_schema()::regnamespace"
        " AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
    )
    return {row["relname"]: row["relkind"] for row in rows}


def unplaced(tables: set[str]) -> list[str]:
    """Tables this module does not place: a new table needs a line here."""
    known = set(DISTRIBUTED) | set(REFERENCE) | set(COORDINATOR_ONLY)
    return sorted(tables - known)


async def place_tables(conn: asyncpg.Connection) -> list[str]:
    """Makes every table plain and then distributed or a reference table, and puts every
    telesrv function on every node, in one transaction; returns the tables and
    functions placed now (none on a second start)."""
    async with conn.transaction():
        # Citus places tables created in a transaction one after another.
        await conn.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
        tables = await schema_tables(conn)
        shards = await conn.fetch(
            "SELECT c.relname, p.partmethod::text AS method, p.colocationid"
            " FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid"
            " WHERE c.relnamespace = current_schema()::regnamespace"
        )
        placed = {row["relname"]: row["method"] for row in shards}
        # The shards Citus made on this node (a coordinator holding some) show up as
        # tables too: they carry a placed table's name and a shard number.
        shard_names = {
            name
            for name in tables
            if name.rsplit("_", 1)[0] in placed and name.rsplit("_", 1)[-1].isdigit()
        }
        missing = unplaced(set(tables) - shard_names)
        if missing:
            raise PlacementError(
                "tables with no place on Citus (store/citus.py): " + ", ".join(missing)
            )
        done: list[str] = []
        for table in REFERENCE:
            if table in placed:
                continue
            await conn.execute("SELECT create_reference_table($1::regclass)", table)
            done.append(table)
        ordered = [ANCHOR] + [t for t in DISTRIBUTED if t != ANCHOR]
        for table in ordered:
            if table in placed:
                continue
            if tables.get(table) == "p":
                await conn.execute("SELECT telesrv_make_plain(parent => $1::regclass)", table)
            await conn.execute(
                "SELECT create_distributed_table($1::regclass, $2, colocate_with => $3)",
                table,
                DISTRIBUTED[table],
                "default" if table == ANCHOR else ANCHOR,
            )
            done.append(table)
        # Every telesrv function exists on every node too: a statement Citus sends to a
        # worker may call one (a router query carries its function calls along).
        functions = await conn.fetch(
            "SELECT p.oid::regprocedure::text AS signature FROM pg_proc p"
            " WHERE p.pronamespace = current_schema()::regnamespace"
            " AND p.proname LIKE 'telesrv\\_%'"
            " AND NOT EXISTS (SELECT 1 FROM pg_dist_object d"
            "  WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid)"
        )
        for row in functions:
            await conn.execute(
                "SELECT create_distributed_function($1::regprocedure)", row["signature"]
            )
            done.append(row["signature"])
        delegated = await conn.fetch(
            "SELECT p.proname::text AS name, p.oid::regprocedure::text AS signature"
            " FROM pg_proc p JOIN pg_dist_object d"
            "  ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid"
            " WHERE p.pronamespace = current_schema()::regnamespace"
            " AND p.proname = ANY($1::text[]) AND d.distribution_argument_index IS NULL",
            list(DELEGATED),
        )
        for row in delegated:
            await conn.execute(
                "SELECT create_distributed_function($1::regprocedure, $2,"
                " colocate_with => $3, force_delegation => true)",
                row["signature"],
                DELEGATED[row["name"]],
                ANCHOR,
            )
            done.append(f"{row['signature']} by {DELEGATED[row['name']]}")
    if done:
        log.info("placed on Citus: %s", ", ".join(done))
    return done


async def probe_joins_txn(conn: asyncpg.Connection) -> None:
    """For the rest of the caller's transaction, on the coordinator and every worker it
    reaches: joins by index probes, not hash or merge joins. An outbox batch joins its
    keys with a log on every shard at once (``update_log.events_at``), and a shard's
    planner would hash the shard's whole log while it is small enough, then read more of
    it with every event it holds; probes cost what the batch holds. Citus passes SET
    LOCAL on to the workers only when told to (``citus.propagate_set_commands``)."""
    await conn.execute(
        "SET LOCAL citus.propagate_set_commands = 'local';"
        " SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off"
    )
