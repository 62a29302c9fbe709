"""No two modules of telesrv import each other, even through other modules.

Every module under src/telesrv, generated code included, is parsed (never imported)
and each of its imports is an edge of a graph, wherever it is: at the top, inside a
function, or under ``if TYPE_CHECKING:``. A type-only import is counted because the
modules it joins still have to be read, changed and understood together; a circle
through one is usually a lower module that should have described what it needs
instead (a Protocol, a callable, a type moved down).

The edge goes to the module an import loads: ``from pkg import mod`` to ``pkg.mod``
when that is a module, else (``from pkg import name``) to ``pkg`` itself. A package's
``__init__``, which Python runs before any module below it, is an edge only where it
is named: counting that implicit step would make a circle of every package whose
``__init__`` imports its own modules.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import pytest
from test_layers import SRC, imported_modules, module_name

# module -> the modules it imports -> the first line that does
Graph = dict[str, dict[str, int]]


def _loaded_module(name: str, modules: Mapping[str, object]) -> str | None:
    """The module of ``modules`` an imported ``name`` loads: itself, or the nearest
    package or module above it (``x.y.z`` where ``z`` is a name defined in ``x.y``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(sources: Mapping[str, tuple[str, bool]]) -> Graph:
    """The imports among ``sources`` (module -> (source, is it a package's __init__))."""
    graph: Graph = {}
    for module, (source, is_package) in sources.items():
        edges = graph[module] = {}
        for line, name in imported_modules(source, module, is_package):
            target = _loaded_module(name, sources)
            if target is not None and target not in edges:
                edges[target] = line
    return graph


def _reachable(graph: Graph, start: str) -> set[str]:
    """The modules ``start`` reaches through one import or more."""
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    return seen


def import_circles(graph: Graph) -> list[list[str]]:
    """Each set of modules that reach one another (a module importing itself is one),
    sorted."""
    reach = {module: _reachable(graph, module) for module in graph}
    circles = {
        frozenset(other for other in reach[module] if module in reach[other])
        for module in graph
        if module in reach[module]
    }
    return sorted(sorted(circle) for circle in circles)


def describe(graph: Graph, circle: list[str]) -> str:
    """A circle with the imports that close it, ``module:line -> module``."""
    members = set(circle)
    edges = [
        f"    {module}:{line} -> {target}"
        for module in circle
        for target, line in sorted(graph[module].items())
        if target in members
    ]
    return " - ".join(circle) + "\n" + "\n".join(edges)


@functools.cache
def _telesrv_graph() -> Graph:
    # Parsing the generated code takes seconds: once for both tests.
    return import_graph(
        {
            module_name(path): (path.read_text(), path.name == "__init__.py")
            for path in sorted(SRC.rglob("*.py"))
        }
    )


def test_no_import_circles() -> None:
    graph = _telesrv_graph()
    circles = import_circles(graph)
    assert not circles, "import circles (TYPE_CHECKING imports count):\n" + "\n".join(
        describe(graph, circle) for circle in circles
    )


def test_the_graph_sees_every_module() -> None:
    graph = _telesrv_graph()
    # Generated code and packages are in it, and imports of either resolve to them.
    assert "telesrv.tl._generated.mt" in graph["telesrv.tl"]
    assert "telesrv.mtproto.session" in graph["telesrv.gateway.sessions"]
    assert len(graph) == len(list(SRC.rglob("*.py")))


def _graph(modules: dict[str, str]) -> Graph:
    """A graph from module sources; ``x.__init__`` is the package ``x``."""
    return import_graph(
        {
            name.removesuffix(".__init__"): (source, name.endswith(".__init__"))
            for name, source in modules.items()
        }
    )


@pytest.mark.parametrize(
    ("modules", "circle"),
    [
        pytest.param(
            {"p.a": "from p.b import f\n", "p.b": "from p.a import g\n", "p.__init__": ""},
            ["p.a", "p.b"],
            id="direct",
        ),
        pytest.param(
            {
                "p.a": "from p.b import f\n",
                "p.b": "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from p.c import C\n",
                "p.c": "def f():\n    import p.a\n",
                "p.__init__": "",
            },
            ["p.a", "p.b", "p.c"],
            id="type-checking-and-function-imports",
        ),
        pytest.param(
            {"p.a": "from . import b\n", "p.b": "from .a import f\n", "p.__init__": ""},
            ["p.a", "p.b"],
            id="relative",
        ),
        pytest.param(
            {"p.a": "from p import b\n", "p.b": "from p import a as x\n", "p.__init__": ""},
            ["p.a", "p.b"],
            id="from-package-import-module",
        ),
        pytest.param(
            {
                "p.q.a": "from ..r import b\n",
                "p.r.b": "from ..q.a import f\n",
                "p.__init__": "",
                "p.q.__init__": "",
                "p.r.__init__": "",
            },
            ["p.q.a", "p.r.b"],
            id="relative-across-packages",
        ),
        pytest.param(
            {"p.__init__": "from p.a import f\n", "p.a": "from p import VERSION\n"},
            ["p", "p.a"],
            id="package-init-named",
        ),
        pytest.param({"p.a": "import p.a\n", "p.__init__": ""}, ["p.a"], id="self-import"),
    ],
)
def test_a_circle_is_found(modules: dict[str, str], circle: list[str]) -> None:
    assert import_circles(_graph(modules)) == [circle]


@pytest.mark.parametrize(
    "modules",
    [
        pytest.param(
            {"p.a": "from p.b import f\n", "p.b": "import os\nfrom p.c import g\n", "p.c": ""},
            id="chain",
        ),
        # The package's __init__ imports its module, which imports a sibling: running
        # p/__init__ first is Python's doing, not an import of p.
        pytest.param(
            {"p.__init__": "from p.a import f\n", "p.a": "from p.b import g\n", "p.b": ""},
            id="package-init-imports-its-module",
        ),
        # ``from p import b`` where p's __init__ imports p.a: b is the module p.b.
        pytest.param(
            {"p.__init__": "from p.a import f\n", "p.a": "from p import b\n", "p.b": ""},
            id="from-package-import-sibling",
        ),
    ],
)
def test_no_circle_is_made_up(modules: dict[str, str]) -> None:
    assert import_circles(_graph(modules)) == []
