"""The box a send or a forward answers with is the one the store reads back.

Both build the sender's copy in memory (one helper, ``sent_box``) instead of reading
it: any field it gets wrong would differ between the answer and later reads.
"""

from __future__ import annotations

import itertools
from typing import Any

from telesrv.parts import Parts
from telesrv.services.forwards import ForwardRequest
from telesrv.services.messages import Origin, OutgoingText
from telesrv.store import messages as messages_store

ORIGIN = Origin(auth_key_id=41, session_id=42)
_ids = itertools.count(9_000_000)


async def test_send_and_forward_answer_with_the_stored_box(db: Any, parts: Parts) -> None:
    messages, forwards = parts.messages, parts.forwards
    a, b, c = next(_ids), next(_ids), next(_ids)
    first = await messages.send_text(OutgoingText(a, b, 1, "first"), ORIGIN, now=1000)
    reply = await messages.send_text(
        OutgoingText(
            a, b, 2, "second", entities=b"\x01", silent=True, noforwards=False,
            reply_to=first.message.box_id, quote_text="fir", quote_entities=b"\x02",
            quote_offset=0,
        ),
        ORIGIN,
        now=1001,
    )  # fmt: skip
    [stored] = await messages_store.get_boxes(db.pool, a, [reply.message.box_id])
    assert reply.message == stored

    [(_, copy)] = await forwards.forward(
        ForwardRequest(a, b, c, [first.message.box_id], [3], silent=True, noforwards=True),
        lambda author, date: b"header",
        ORIGIN,
        now=1002,
    )
    [stored] = await messages_store.get_boxes(db.pool, a, [copy.message.box_id])
    assert copy.message == stored
