"""The client snippets of the README and docs/clients.md: they take the server's key
from its public key file and import nothing of the server; the kurigram one runs."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from telesrv.server_key import load_or_create_server_key

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "docs" / "clients.md"]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.MULTILINE | re.DOTALL)


def imported(source: str) -> Iterator[str]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.module or ""


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_snippets_import_nothing_of_the_server(path: Path) -> None:
    blocks = python_blocks(path)
    assert blocks
    for block in blocks:
        modules = list(imported(block))
        assert not [m for m in modules if m.split(".")[0] == "telesrv"], block
        if "rsa" in block and ("telethon" in modules or "pyrogram" in modules):
            assert "server_key.pub.pem" in block


def kurigram_snippet() -> str:
    [block] = [b for b in python_blocks(ROOT / "docs" / "clients.md") if "storage_engine" in b]
    return block


def test_kurigram_snippet_trusts_the_key_of_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rsa = pytest.importorskip("pyrogram.crypto.rsa")
    key = load_or_create_server_key(tmp_path / "telesrv-data")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(rsa, "server_public_keys", dict(rsa.server_public_keys))
    before = set(os.listdir(tmp_path))
    exec(compile(kurigram_snippet(), "clients.md", "exec"), {"__name__": "snippet"})
    assert rsa.server_public_keys[key.fingerprint] == rsa.PublicKey(key.n, key.e)
    # Nothing written beside the data directory, nothing new inside it.
    assert set(os.listdir(tmp_path)) == before
    assert sorted(os.listdir(tmp_path / "telesrv-data")) == [
        "server_key.pem",
        "server_key.pub.pem",
    ]


def js_blocks(path: Path) -> list[str]:
    return re.findall(r"^```js\n(.*?)^```", path.read_text(), flags=re.MULTILINE | re.DOTALL)


def test_node_key_module_reads_the_key_of_the_file(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node")
    [module] = [b for b in js_blocks(ROOT / "docs" / "clients.md") if "server-key.mjs:" in b]
    key = load_or_create_server_key(tmp_path / "telesrv-data")
    (tmp_path / "server-key.mjs").write_text(module)
    (tmp_path / "show.mjs").write_text(
        "import { e, fingerprint, n } from './server-key.mjs'\n"
        "console.log(JSON.stringify({ n: n.toString('hex'), e: e.toString('hex'),"
        " fingerprint: fingerprint.toString() }))\n"
    )
    shown = subprocess.run(
        [node, "show.mjs"], cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60
    )
    values = json.loads(shown.stdout)
    assert int(values["n"], 16) == key.n and int(values["e"], 16) == key.e
    assert int(values["fingerprint"]) == key.fingerprint
    # The Node snippets take the key from that module, not from numbers pasted in.
    for block in js_blocks(ROOT / "docs" / "clients.md"):
        if "__publicKeyIndex[" in block or "_serverKeys.set(" in block:
            assert "server-key.mjs" in block
