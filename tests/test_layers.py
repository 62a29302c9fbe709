"""The layers import only along the README's arrows.

Every module under src/telesrv is parsed (never imported) and each of its imports,
including those inside functions and ``if TYPE_CHECKING:`` blocks, is checked
against ``ALLOWED``: a type dependency on a lower layer is a dependency too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "telesrv"

# layer -> the other layers it may import. The README's arrows: gateway -> mtproto -> tl,
# gateway -> rpc -> services -> store, rpc -> tl, delivery -> store, delivery -> gateway.
# The gateway also reads TL itself (it decodes each request before handing it to rpc).
ALLOWED: dict[str, set[str]] = {
    "gateway": {"mtproto", "rpc", "tl"},
    "mtproto": {"tl"},
    "tl": set(),
    "rpc": {"services", "tl"},
    "services": {"store"},
    "store": set(),
    "delivery": {"store", "gateway"},
}
# Modules every layer above the sans-io core may use: the settings passed down.
SHARED = {"config"}
SANS_IO = {"mtproto", "tl"}
# The process (cli, app, wiring, bench, ...) builds the graph and may import any layer;
# no layer imports it.
ROOT_MODULES = {
    "__main__", "app", "cli", "wiring", "parts", "server_key", "bench", "workers", "logs",
    "startup",
}  # fmt: skip


def _unit(module: str) -> str | None:
    """The layer (or top-level module) a ``telesrv.x.y`` module belongs to."""
    parts = module.split(".")
    if parts[0] != "telesrv":
        return None
    return parts[1] if len(parts) > 1 else ""


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute name) for every import in ``source``, relative ones resolved.

    ``from x.y import z`` gives ``x.y.z``: the module of that name when there is one
    (``from telesrv import config``), else a name defined in ``x.y``. Which of the two
    only the file tree tells; the layer check needs no answer (both are in the same
    layer), the circle check looks it up."""
    found: list[tuple[int, str]] = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found += [
                (node.lineno, base if alias.name == "*" else f"{base}.{alias.name}")
                for alias in node.names
            ]
    return found


def violations(source: str, module: str, is_package: bool = False) -> list[str]:
    """The imports of ``module`` (its ``source`` given) that break the arrows."""
    layer = _unit(module)
    if layer is None or layer in ROOT_MODULES or layer not in ALLOWED:
        return []
    allowed = ALLOWED[layer] | {layer}
    if layer not in SANS_IO:
        allowed |= SHARED
    bad = []
    for line, target in imported_modules(source, module, is_package):
        unit = _unit(target)
        if unit is None or unit in allowed:
            continue
        bad.append(f"{module}:{line} imports {target} ({layer} -> {unit or 'telesrv'})")
    return bad


def _all_modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "_generated" not in p.parts)


def test_every_layer_imports_only_along_the_arrows() -> None:
    bad = []
    for path in _all_modules():
        bad += violations(path.read_text(), module_name(path), path.name == "__init__.py")
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_the_walk_sees_every_layer() -> None:
    layers = {_unit(module_name(p)) for p in _all_modules()}
    assert set(ALLOWED) <= layers, "a layer folder was renamed: update ALLOWED and README"


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("telesrv.rpc.x", "from telesrv.store import messages\n"),
        (
            "telesrv.rpc.x",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from telesrv.store.db import Db\n",
        ),  # fmt: skip
        ("telesrv.gateway.x", "from telesrv.services.auth_keys import AuthKey\n"),
        ("telesrv.services.x", "from telesrv.tl.errors import FloodWait\n"),
        ("telesrv.services.x", "def f():\n    import telesrv.rpc.render\n"),
        ("telesrv.mtproto.x", "from telesrv.config import Settings\n"),
        ("telesrv.store.x", "from telesrv import wiring\n"),
        ("telesrv.store.x", "from ..rpc import render\n"),
        ("telesrv.delivery.x", "from telesrv.rpc.render import UpdateRenderer\n"),
    ],
)
def test_a_forbidden_import_is_caught(module: str, source: str) -> None:
    assert violations(source, module)


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("telesrv.rpc.x", "from telesrv.services.messages import Origin\n"),
        ("telesrv.rpc.x", "from . import render\nfrom .render import message_tl\n"),
        ("telesrv.gateway.x", "from telesrv.mtproto.session import ServerSession\n"),
        ("telesrv.services.x", "from telesrv.config import Settings\nimport asyncio\n"),
        ("telesrv.delivery.x", "from telesrv.store.outbox import claim\n"),
        ("telesrv.wiring", "from telesrv.store.db import Db\n"),
    ],
)
def test_an_allowed_import_passes(module: str, source: str) -> None:
    assert violations(source, module) == []
