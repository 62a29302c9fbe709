"""A chat's history in one owner's boxes: pages, ids and counts."""

from __future__ import annotations

from telesrv.store.db import Executor
from telesrv.store.messages import (
    _BOX_COLUMNS,
    BOX_SIZE,
    Page,
    body_of_box,
    page_of,
    within_budget,
)

# Optional upper bounds are written "box_id < COALESCE($n, past the top)", never
# "$n IS NULL OR box_id < $n": a generic plan, which PostgreSQL may choose for a
# prepared statement, keeps only the former as an index bound
# (tests/store/test_generic_plans.py).


async def history_page(
    db: Executor,
    owner_user_id: int,
    peer_user_id: int,
    *,
    above: int,
    below: int | None,
    limit: int,
    budget: int,
    skip: int = 0,
    ascending: bool = False,
    distributed: bool = False,
) -> Page:
    """The chat's messages with above < box_id < below (None: no upper bound), newest
    first (or oldest first), after skipping ``skip``; at most ``limit`` of them and as
    many as fit in ``budget`` bytes."""
    order = "ASC" if ascending else "DESC"
    inner = f"""
        SELECT {_BOX_COLUMNS}, {BOX_SIZE} AS size
          FROM (SELECT * FROM message_boxes
                 WHERE owner_user_id = $1 AND peer_user_id = $2 AND NOT deleted
                   AND box_id > $3 AND box_id < COALESCE($4::bigint, 2147483648)
                 ORDER BY box_id {order}
                 OFFSET $5 LIMIT $6) b
         CROSS JOIN LATERAL ({body_of_box(distributed)}) m
    """
    rows = await db.fetch(
        within_budget(inner, f"box_id {order}", "$7"),
        owner_user_id,
        peer_user_id,
        above,
        below,
        skip,
        limit,
        budget,
    )
    return page_of(rows)


async def history_ids(
    db: Executor,
    owner_user_id: int,
    peer_user_id: int,
    *,
    above: int,
    below: int | None,
    limit: int,
    ascending: bool,
) -> list[int]:
    """Only the ids of :func:`history_page` (no bodies, no budget)."""
    order = "ASC" if ascending else "DESC"
    rows = await db.fetch(
        f"""
        SELECT box_id FROM message_boxes
         WHERE owner_user_id = $1 AND peer_user_id = $2 AND NOT deleted
           AND box_id > $3 AND box_id < COALESCE($4::bigint, 2147483648)
         ORDER BY box_id {order}
         LIMIT $5
        """,
        owner_user_id,
        peer_user_id,
        above,
        below,
        limit,
    )
    return [r["box_id"] for r in rows]


async def newest_id_before(
    db: Executor, owner_user_id: int, peer_user_id: int, date: int
) -> int | None:
    """The chat's newest message sent before ``date``: where an offset_date points."""
    value = await db.fetchval(
        """
        SELECT box_id FROM message_boxes
         WHERE owner_user_id = $1 AND peer_user_id = $2 AND NOT deleted AND date < $3
         ORDER BY box_id DESC
         LIMIT 1
        """,
        owner_user_id,
        peer_user_id,
        date,
    )
    return int(value) if value is not None else None


async def count_history(db: Executor, owner_user_id: int, peer_user_id: int) -> int:
    return int(
        await db.fetchval(
            """
            SELECT count(*) FROM message_boxes
             WHERE owner_user_id = $1 AND peer_user_id = $2 AND NOT deleted
            """,
            owner_user_id,
            peer_user_id,
        )
    )
