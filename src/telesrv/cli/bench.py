"""`telesrv bench`: benchmarks found in the telesrv.bench package.

Benchmarks plug in without editing the command line: every module
`telesrv/bench/<name>.py` (names starting with `_` excluded) that defines a click
command named `command` becomes `telesrv bench <name>` (underscores read as dashes).
Modules are imported only when `telesrv bench ...` runs.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil

import click

BENCH_PACKAGE = "telesrv.bench"


class BenchGroup(click.Group):
    """`telesrv bench NAME`: commands discovered in the telesrv.bench package."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(_bench_modules()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        explicit = super().get_command(ctx, cmd_name)
        if explicit is not None:
            return explicit
        module_name = _bench_modules().get(cmd_name)
        if module_name is None:
            return None
        module = importlib.import_module(module_name)
        command = getattr(module, "command", None)
        if not isinstance(command, click.Command):
            raise click.ClickException(f"{module_name} does not define a click `command`")
        return command


def _bench_modules() -> dict[str, str]:
    """Command name -> module name for every public module of the bench package."""
    spec = importlib.util.find_spec(BENCH_PACKAGE)
    if spec is None or spec.submodule_search_locations is None:
        return {}
    found: dict[str, str] = {}
    for info in pkgutil.iter_modules(spec.submodule_search_locations):
        if info.name.startswith("_"):
            continue
        found[info.name.replace("_", "-")] = f"{BENCH_PACKAGE}.{info.name}"
    return found


@click.group(cls=BenchGroup)
def bench() -> None:
    """Benchmarks. Each prints a table and, as its last line, one JSON object."""
