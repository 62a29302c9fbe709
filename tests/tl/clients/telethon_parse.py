"""Run inside a Telethon-family venv (telethon-v1-24): parse TL objects with its codecs.

The same protocol as ``pyrogram_parse.py``: stdin a JSON list of hex strings (one boxed
object each); stdout a JSON object with the library's layer and, per input, the parsed
object as plain data (``_`` is the class's qualified name, e.g. ``types.users.UserFull``;
bytes become {"hex": ...}, dates unix seconds) or {"error": "..."}.
"""

import datetime
import json
import sys
from typing import Any

from telethon.extensions import BinaryReader
from telethon.tl.alltlobjects import LAYER
from telethon.tl.tlobject import TLObject

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def plain(value: Any) -> Any:
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, TLObject):
        cls = type(value)
        # Telethon parses some types into subclasses of its own (telethon.tl.patched)
        module = cls.__module__.removeprefix("telethon.tl.").replace("patched", "types")
        out: dict[str, Any] = {"_": module + "." + cls.__name__}
        for name, field in vars(value).items():
            if not name.startswith("_"):  # the patched classes' own caches
                out[name] = plain(field)
        return out
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if isinstance(value, datetime.datetime):
        return int((value - _EPOCH).total_seconds())
    return value


def main() -> None:
    results: list[dict[str, Any]] = []
    for blob in json.load(sys.stdin):
        data = bytes.fromhex(blob)
        try:
            reader = BinaryReader(data)
            obj = reader.tgread_object()
            results.append({"ok": plain(obj), "trailing": len(data) - reader.tell_position()})
        except Exception as e:  # reported to the test, which fails on it
            results.append({"error": f"{type(e).__name__}: {e}"})
    json.dump({"layer": LAYER, "results": results}, sys.stdout)


main()
