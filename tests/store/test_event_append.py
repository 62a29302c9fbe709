"""Events and their outbox rows are written by one SQL function per log, and every call of
a telesrv_* function names its arguments."""

from __future__ import annotations

import re
from pathlib import Path

from telesrv.store import db as dbmod

SRC = Path(__file__).resolve().parents[2] / "src" / "telesrv"

_CALL = re.compile(r"\btelesrv_\w+\s*\(")
_INSERT = re.compile(r"INSERT\s+INTO\s+(\w+)", re.IGNORECASE)
LOG_TABLES = {"user_update_events", "user_state_events", "dispatch_outbox"}


def _arguments(text: str, open_paren: int) -> str:
    """The text between the parenthesis at ``open_paren`` and its match (quotes skipped)."""
    depth = 0
    quoted = False
    for i in range(open_paren, len(text)):
        ch = text[i]
        if ch == "'":
            quoted = not quoted
        elif quoted:
            continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return text[open_paren + 1 : i]
    raise AssertionError(f"unbalanced call at {text[open_paren - 40 : open_paren + 40]!r}")


def positional_calls(text: str) -> list[str]:
    """Calls of telesrv_* functions that pass arguments without naming them."""
    found = []
    for m in _CALL.finditer(text):
        args = _arguments(text, m.end() - 1)
        if args.strip() and "=>" not in args:
            found.append(m.group(0) + args[:60])
    return found


def test_the_call_checker_sees_positional_and_named_calls() -> None:
    assert positional_calls("SELECT telesrv_fill_pts($1, $2, $3)") == [
        "telesrv_fill_pts($1, $2, $3"
    ]
    assert positional_calls("SELECT telesrv_fill_pts(p_user => $1, p_pts => f(2))") == []
    assert positional_calls("see telesrv_create_hash_partitions()") == []


async def _functions(db: dbmod.Db) -> dict[str, str]:
    rows = await db.pool.fetch(
        """
        SELECT p.proname, p.prosrc FROM pg_proc p
          JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = current_schema() AND p.proname LIKE 'telesrv\\_%'
        """
    )
    return {r["proname"]: r["prosrc"] for r in rows}


async def test_each_log_table_has_one_writer_function(db: dbmod.Db) -> None:
    writers: dict[str, set[str]] = {t: set() for t in LOG_TABLES}
    for name, body in (await _functions(db)).items():
        for table in _INSERT.findall(body):
            if table in writers:
                writers[table].add(name)
    assert writers == {
        # fill_pts writes the noops, which are never pushed (no outbox row);
        # append_events is append_event for many events at once (a group of sends).
        "user_update_events": {
            "telesrv_append_event",
            "telesrv_append_events",
            "telesrv_fill_pts",
        },
        "user_state_events": {"telesrv_append_state_event"},
        "dispatch_outbox": {
            "telesrv_append_event",
            "telesrv_append_events",
            "telesrv_append_state_event",
        },
    }


def test_python_code_appends_events_only_through_the_functions() -> None:
    direct = [
        f"{path.relative_to(SRC)}: INSERT INTO {table}"
        for path in SRC.rglob("*.py")
        for table in _INSERT.findall(path.read_text())
        if table in LOG_TABLES
    ]
    assert direct == []


async def test_sql_functions_call_telesrv_functions_by_argument_name(db: dbmod.Db) -> None:
    bad = {
        name: calls
        for name, body in (await _functions(db)).items()
        if (calls := positional_calls(body))
    }
    assert bad == {}


def test_python_code_calls_telesrv_functions_by_argument_name() -> None:
    bad = {
        str(path.relative_to(SRC)): calls
        for path in SRC.rglob("*.py")
        if (calls := positional_calls(path.read_text()))
    }
    assert bad == {}


async def test_append_event_writes_the_event_and_its_outbox_row(db: dbmod.Db) -> None:
    user = 9_100_001
    async with db.pool.acquire() as conn:
        await conn.execute(
            """
            SELECT telesrv_append_event(
                   p_user_id => $1, p_pts => 7, p_pts_count => 3,
                   p_event_type => 'delete_messages', p_date => 1000, p_peer_user_id => 5,
                   p_max_id => 9, p_box_ids => ARRAY[1, 2, 3], p_payload => $2,
                   p_exclude_auth_key_id => 11, p_exclude_session_id => 12)
            """,
            user,
            {"k": 1},
        )
        event = await conn.fetchrow("SELECT * FROM user_update_events WHERE user_id = $1", user)
        push = await conn.fetchrow(
            "SELECT pts, state_id, exclude_auth_key_id, exclude_session_id, status"
            "  FROM dispatch_outbox WHERE target_user_id = $1",
            user,
        )
    assert dict(event) == {
        "user_id": user,
        "pts": 7,
        "pts_count": 3,
        "event_type": "delete_messages",
        "date": 1000,
        "peer_user_id": 5,
        "max_id": 9,
        "box_ids": [1, 2, 3],
        "payload": {"k": 1},
    }
    assert dict(push) == {
        "pts": 7,
        "state_id": None,
        "exclude_auth_key_id": 11,
        "exclude_session_id": 12,
        "status": "pending",
    }


async def test_a_noop_fill_has_no_outbox_row(db: dbmod.Db) -> None:
    user = 9_100_002
    await db.pool.execute(
        "SELECT telesrv_fill_pts(p_user => $1, p_pts => $2, p_date => 1)", user, [1, 2]
    )
    types = await db.pool.fetch(
        "SELECT event_type FROM user_update_events WHERE user_id = $1 ORDER BY pts", user
    )
    assert [r["event_type"] for r in types] == ["noop", "noop"]
    assert (
        await db.pool.fetchval(
            "SELECT count(*) FROM dispatch_outbox WHERE target_user_id = $1", user
        )
        == 0
    )


async def test_append_state_event_takes_dense_ids_with_their_outbox_rows(db: dbmod.Db) -> None:
    user = 9_100_003
    ids = [
        await db.pool.fetchval(
            "SELECT telesrv_append_state_event(p_user_id => $1, p_event_type => 'x',"
            " p_date => 1, p_exclude_session_id => 4)",
            user,
        )
        for _ in range(3)
    ]
    assert ids == [1, 2, 3]
    rows = await db.pool.fetch(
        "SELECT pts, state_id, exclude_session_id FROM dispatch_outbox"
        " WHERE target_user_id = $1 ORDER BY state_id",
        user,
    )
    assert [tuple(r) for r in rows] == [(None, 1, 4), (None, 2, 4), (None, 3, 4)]
