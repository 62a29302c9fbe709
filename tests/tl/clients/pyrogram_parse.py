"""Run inside a Pyrogram-family or hydrogram venv: parse TL objects with its own codecs.

stdin: a JSON list of hex strings (one boxed object each). stdout: a JSON object with the
library's layer and, per input, the parsed object as plain data (``_`` is the library's
class name, bytes become {"hex": ...}) or {"error": "..."}.
"""

import json
import sys
from io import BytesIO
from typing import Any

try:
    from pyrogram.raw.all import layer
    from pyrogram.raw.core import TLObject
except ImportError:  # hydrogram: the same code under another name
    from hydrogram.raw.all import layer  # type: ignore[no-redef]
    from hydrogram.raw.core import TLObject  # type: ignore[no-redef]


def plain(value: Any) -> Any:
    if isinstance(value, list):  # pyrogram's vectors are lists and TLObjects at once
        return [plain(v) for v in value]
    if isinstance(value, TLObject):
        out: dict[str, Any] = {"_": value.QUALNAME}
        for name in value.__slots__:
            out[name] = plain(getattr(value, name))
        return out
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    return value


def main() -> None:
    results: list[dict[str, Any]] = []
    for blob in json.load(sys.stdin):
        data = bytes.fromhex(blob)
        try:
            stream = BytesIO(data)
            obj = TLObject.read(stream)
            rest = stream.read()
            results.append({"ok": plain(obj), "trailing": len(rest)})
        except Exception as e:  # reported to the test, which fails on it
            results.append({"error": f"{type(e).__name__}: {e}"})
    json.dump({"layer": layer, "results": results}, sys.stdout)


main()
