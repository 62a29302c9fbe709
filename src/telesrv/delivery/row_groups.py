"""A claimed batch's outbox rows, grouped the way they are pushed: one ``updates`` per
(target user, excluded session), its rows in pts order."""

from __future__ import annotations

from collections.abc import Sequence

from telesrv.store.outbox import OutboxRow

# (target user, excluded session)
GroupKey = tuple[int, tuple[int, int] | None]


def group_rows(rows: Sequence[OutboxRow]) -> list[tuple[GroupKey, list[OutboxRow]]]:
    """Rows by (target user, excluded session), each group in pts order; the groups
    by user, then the group with no excluded session first."""
    groups: dict[GroupKey, list[OutboxRow]] = {}
    for row in rows:
        key = (row.target_user_id, row.exclude)
        group = groups.get(key)
        if group is None:
            groups[key] = [row]
        else:
            group.append(row)
    return [
        (key, group if len(group) == 1 else sorted(group, key=_row_order))
        for key, group in sorted(groups.items(), key=_group_order)
    ]


def _group_order(item: tuple[GroupKey, list[OutboxRow]]) -> tuple[int, bool, tuple[int, int]]:
    user_id, exclude = item[0]
    return (user_id, exclude is not None, exclude or (0, 0))


def _row_order(row: OutboxRow) -> tuple[int, int]:
    # pts events in pts order, then state events (no pts) in their log order
    return (row.pts if row.pts is not None else 2**31, row.state_id or 0)


def event_key(row: OutboxRow) -> tuple[str, int, int]:
    if row.pts is not None:
        return ("pts", row.target_user_id, row.pts)
    return ("state", row.target_user_id, row.state_id or 0)


def row_pts(rows: Sequence[OutboxRow]) -> set[int]:
    return {r.pts for r in rows if r.pts is not None}


def row_span(rows: Sequence[OutboxRow]) -> tuple[int | None, int | None]:
    """The lowest and highest pts of a group's rows; None for state events only. (A
    row gives the last pts of its event: enough to order it among the others.)"""
    pts = [r.pts for r in rows if r.pts is not None]
    return (min(pts), max(pts)) if pts else (None, None)
