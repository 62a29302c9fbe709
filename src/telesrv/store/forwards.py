"""Forwards: the messages a forward copies (its copies are written as sends)."""

from __future__ import annotations

from collections.abc import Sequence

from telesrv.store.db import Executor
from telesrv.store.messages import _BOX_COLUMNS, BoxMessage, _box, body_of_box


async def get_chat_boxes(
    db: Executor,
    owner_user_id: int,
    peer_user_id: int,
    box_ids: Sequence[int],
    *,
    distributed: bool = False,
) -> list[BoxMessage]:
    """The owner's visible messages among ``box_ids`` in the chat with ``peer_user_id``."""
    rows = await db.fetch(
        f"""
        SELECT {_BOX_COLUMNS}
          FROM (SELECT * FROM message_boxes
                 WHERE owner_user_id = $1 AND box_id = ANY($2::integer[])
                   AND peer_user_id = $3 AND NOT deleted
                {"OFFSET 0" if distributed else ""}) b
         CROSS JOIN LATERAL ({body_of_box(distributed)}) m
        """,
        owner_user_id,
        list(box_ids),
        peer_user_id,
    )
    return [_box(r) for r in rows]


async def boxes_with_links(db: Executor, owner_user_id: int, box_ids: Sequence[int]) -> set[int]:
    """Those of the owner's ``box_ids`` whose text holds a link (found by the link filter)."""
    rows = await db.fetch(
        """
        SELECT box_id FROM message_search
         WHERE owner_user_id = $1 AND box_id = ANY($2::integer[]) AND media_kind = 'url'
        """,
        owner_user_id,
        list(box_ids),
    )
    return {r["box_id"] for r in rows}
