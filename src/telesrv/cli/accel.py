"""`telesrv accel`: build and inspect the optional compiled accelerator (telesrv/accel.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

from telesrv import accel

# The type checking mypyc does before compiling, with the project's rules but no
# project file: an installed telesrv has no pyproject.toml next to it.
MYPY_CONFIG = """\
[mypy]
strict = True
ignore_missing_imports = True
explicit_package_bases = True

[mypy-telesrv.tl._generated.*]
disallow_untyped_defs = False
disallow_incomplete_defs = False
disallow_untyped_calls = False
check_untyped_defs = False
warn_return_any = False
"""

# Runs in a child process: setuptools and mypyc print a lot and may exit on errors.
BUILD_SCRIPT = """\
import sys
from setuptools import setup
from mypyc.build import mypycify

out, temp, *paths = sys.argv[1:]
extensions = mypycify(
    paths, opt_level="3", debug_level="0", group_name={group!r}, target_dir=temp + "/c"
)
setup(
    name={group!r},
    ext_modules=extensions,
    script_args=["build_ext", "--build-lib", out, "--build-temp", temp + "/o"],
)
"""


@click.group("accel")
def accel_group() -> None:
    """The optional compiled TL/MTProto path (mypyc)."""


@accel_group.command("status")
def status_command() -> None:
    """Which path this process runs, and why."""
    click.echo(accel.status().describe())


@accel_group.command("build")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the compiled modules go [default: TELESRV_ACCEL_DIR or telesrv/_accel].",
)
def build_command(out: Path | None) -> None:
    """Compile the accelerated modules with mypyc (needs mypy, setuptools, a C compiler
    and the Python headers). Servers started afterwards use them unless TELESRV_ACCEL=off."""
    target = (out or accel.build_dir()).resolve()
    try:
        seconds = build(target)
    except BuildError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"built {len(accel.MODULES)} modules into {target} in {seconds:.0f} s")


class BuildError(Exception):
    pass


def build(target: Path) -> float:
    """Compile :data:`accel.MODULES` into ``target`` (replacing what was there); the
    seconds it took."""
    started = time.monotonic()
    digests = {m: accel.source_digest(m) for m in accel.MODULES}
    sources = [str(accel.source_path(m)) for m in accel.MODULES]
    with tempfile.TemporaryDirectory(prefix="telesrv-accel-") as tmp:
        work = Path(tmp)
        (work / "mypy.ini").write_text(MYPY_CONFIG)
        staged = work / "out"
        script = BUILD_SCRIPT.format(group=accel.GROUP)
        done = subprocess.run(
            [sys.executable, "-c", script, str(staged), str(work / "build"), *sources],
            cwd=work,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            tail = (done.stdout + done.stderr)[-4000:]
            raise BuildError(f"the mypyc build failed:\n{tail}")
        files = {name: _built_file(staged, name) for name in (*accel.MODULES, accel.GROUP_LIB)}
        manifest = {"abi": accel.abi_tag(), "sources": digests, "files": files}
        (staged / accel.MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(staged, target)
    return time.monotonic() - started


def _built_file(staged: Path, module: str) -> str:
    """The extension file of ``module`` under ``staged``, relative to it."""
    *package, name = module.split(".")
    folder = staged.joinpath(*package)
    for suffix in accel.EXTENSION_SUFFIXES:
        candidate = folder / f"{name}{suffix}"
        if candidate.is_file():
            return str(candidate.relative_to(staged))
    raise BuildError(f"the build made no extension for {module} in {folder}")
