"""The optional compiled accelerator: mypyc builds of the TL runtime and the MTProto
framing, used in place of their Python modules when present and current.

The Python modules stay the reference; the compiled ones are built from them, unchanged,
by ``telesrv accel build`` into a directory of their own (``telesrv/_accel/`` next to the
package by default, ``TELESRV_ACCEL_DIR`` otherwise). Nothing is compiled at install time,
so an install on a machine without a C compiler simply runs the Python path.

``TELESRV_ACCEL`` chooses: ``auto`` (the default) uses the build when it is there and was
made from the current sources, ``off`` always runs the Python path, ``on`` refuses to
start without a current build. :func:`activate` runs from ``telesrv/__init__.py``, before
any of the modules can be imported, and installs an import finder that loads the
compiled extension for exactly the modules the build's manifest names.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

ENV_MODE = "TELESRV_ACCEL"
ENV_DIR = "TELESRV_ACCEL_DIR"
MODES = ("auto", "on", "off")
MANIFEST = "manifest.json"
# The extension that holds the compiled code of every module (the per-module
# extensions are small shims that import it by this name).
GROUP = "telesrv_accel"
GROUP_LIB = f"{GROUP}__mypyc"
EXTENSION_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)

PACKAGE_DIR = Path(__file__).resolve().parent

# What is compiled, chosen by profile (docs/operations.md, "Compiled accelerator"): the
# TL runtime the generated codecs call into, and the MTProto framing, encryption and
# session code every message passes through. The generated codecs are not in it: one
# 84,000-line module whose readers and writers are unannotated.
MODULES: tuple[str, ...] = (
    "telesrv.tl.core",
    "telesrv.mtproto.crypto",
    "telesrv.mtproto.transport",
    "telesrv.mtproto.msgid",
    "telesrv.mtproto.salts",
    "telesrv.mtproto.held_messages",
    "telesrv.mtproto.service_messages",
    "telesrv.mtproto.session",
    "telesrv.mtproto.session_events",
)


class AccelError(RuntimeError):
    """``TELESRV_ACCEL=on`` without a current build, or a bad mode."""


@dataclass(frozen=True, slots=True)
class Status:
    compiled: bool
    reason: str
    modules: tuple[str, ...] = ()

    def describe(self) -> str:
        path = "compiled (mypyc)" if self.compiled else "pure Python"
        return f"TL/MTProto path: {path}: {self.reason}"


def build_dir() -> Path:
    configured = os.environ.get(ENV_DIR)
    return Path(configured) if configured else PACKAGE_DIR / "_accel"


def source_path(module: str) -> Path:
    """The Python source of one of :data:`MODULES` (its reference version)."""
    parts = module.split(".")
    assert parts[0] == "telesrv"
    return PACKAGE_DIR.joinpath(*parts[1:]).with_suffix(".py")


def source_digest(module: str) -> str:
    return hashlib.sha256(source_path(module).read_bytes()).hexdigest()


def abi_tag() -> str:
    """What an extension must have been built for to load here."""
    return f"{sys.implementation.cache_tag}{EXTENSION_SUFFIXES[0]}"


def read_manifest(directory: Path) -> dict[str, object] | None:
    try:
        data = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def check_build(directory: Path) -> tuple[dict[str, str], str]:
    """The compiled modules' files (name -> path) when ``directory`` holds a build made
    here from the current sources; else nothing, and why."""
    manifest = read_manifest(directory)
    if manifest is None:
        return {}, f"no build in {directory} (`telesrv accel build` makes one)"
    if manifest.get("abi") != abi_tag():
        return {}, f"the build in {directory} is for {manifest.get('abi')}, not {abi_tag()}"
    files = manifest.get("files")
    digests = manifest.get("sources")
    if not isinstance(files, dict) or not isinstance(digests, dict):
        return {}, f"the manifest in {directory} is incomplete"
    for module in MODULES:
        if digests.get(module) != source_digest(module):
            return {}, f"{module} changed since the build in {directory}: rebuild it"
    # A build of a longer module list is refused, not half used: its compiled code calls
    # the other modules' compiled code directly, which nothing here checks is current.
    others = sorted((set(digests) | set(files)) - {*MODULES, GROUP_LIB})
    if others:
        return {}, f"the build in {directory} also compiled {others}: rebuild it"
    found: dict[str, str] = {}
    for name, rel in files.items():
        path = directory / str(rel)
        if not path.is_file():
            return {}, f"{path} is missing: rebuild"
        found[str(name)] = str(path)
    if set(MODULES) - set(found):
        return {}, f"the build in {directory} lacks {sorted(set(MODULES) - set(found))}"
    return found, f"{len(MODULES)} modules from {directory}"


class _CompiledFinder(importlib.abc.MetaPathFinder):
    """Finds the compiled extension of each module the build holds, ahead of its .py."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def find_spec(
        self,
        fullname: str,
        path: object = None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        location = self.files.get(fullname)
        if location is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, location)
        return importlib.util.spec_from_file_location(fullname, location, loader=loader)


_status: Status | None = None


def activate() -> Status:
    """Decide the path once per process and, for the compiled one, install the finder."""
    global _status
    if _status is not None:
        return _status
    mode = os.environ.get(ENV_MODE, "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise AccelError(f"{ENV_MODE}={mode!r}: expected one of {', '.join(MODES)}")
    if mode == "off":
        _status = Status(False, f"{ENV_MODE}=off")
        return _status
    loaded = [m for m in MODULES if m in sys.modules]
    if loaded:
        # Too late to swap them: whatever imported them first decided.
        files: dict[str, str] = {}
        reason = f"{loaded[0]} was imported before the accelerator was set up"
    else:
        files, reason = check_build(build_dir())
    if not files:
        if mode == "on":
            raise AccelError(f"{ENV_MODE}=on but {reason}")
        _status = Status(False, reason)
        return _status
    sys.meta_path.insert(0, _CompiledFinder(files))
    _status = Status(True, reason, MODULES)
    return _status


def status() -> Status:
    return activate()


def is_compiled(module: ModuleType) -> bool:
    """Whether ``module`` was loaded from a compiled extension."""
    spec = module.__spec__
    return spec is not None and isinstance(spec.loader, importlib.machinery.ExtensionFileLoader)
