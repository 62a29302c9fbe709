"""The compiled accelerator (telesrv/accel.py): the compiled and the pure path give the
same bytes, and a process says which path it runs and why.

The tests that need a build skip without one on a developer's machine (it needs a C
compiler), and fail without one where the build is required: CI builds it
(``.ci/run``) and sets ``TELESRV_TEST_ACCEL=required``; ``CI`` set does the same.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import telesrv
from telesrv import accel

TESTS = Path(__file__).resolve().parent
VECTORS_SCRIPT = TESTS / "accel_vectors.py"
# The tests with exact byte vectors of the compiled modules: the TL runtime against
# Telethon's bytes, the transports, the encryption and the session.
BYTE_VECTOR_TESTS = (
    "tl/test_telethon_exact.py",
    "tl/test_roundtrip.py",
    "tl/test_service.py",
    "mtproto",
)


def _build_required() -> bool:
    if os.environ.get("TELESRV_TEST_ACCEL") == "required":
        return True
    # As tests/citus/conftest.py reads it: CI services set CI.
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture
def compiled_build() -> Path:
    """The current build, or a skip (a fail where it is required) saying why not."""
    directory = accel.build_dir()
    files, reason = accel.check_build(directory)
    if not files:
        message = f"no compiled accelerator: {reason}"
        if _build_required():
            pytest.fail(message)
        pytest.skip(f"{message} (`telesrv accel build` needs mypy and a C compiler)")
    return directory


def _run(mode: str, *args: str, extra_env: dict[str, str] | None = None) -> Any:
    env = {**os.environ, accel.ENV_MODE: mode, **(extra_env or {})}
    return subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _vectors(mode: str) -> dict[str, Any]:
    done = _run(mode, str(VECTORS_SCRIPT))
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_the_modules_loaded_are_the_path_the_status_names() -> None:
    for name in accel.MODULES:
        module = importlib.import_module(name)
        assert accel.is_compiled(module) == telesrv.ACCEL.compiled, name


def test_off_runs_the_pure_path_and_says_so() -> None:
    done = _run("off", "-m", "telesrv", "accel", "status")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "TL/MTProto path: pure Python: TELESRV_ACCEL=off"


def test_auto_without_a_build_runs_the_pure_path(tmp_path: Path) -> None:
    done = _run(
        "auto", "-m", "telesrv", "accel", "status", extra_env={accel.ENV_DIR: str(tmp_path)}
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"TL/MTProto path: pure Python: no build in {tmp_path} (`telesrv accel build` makes one)"
    )


def test_on_without_a_build_refuses_to_start(tmp_path: Path) -> None:
    done = _run("on", "-m", "telesrv", "accel", "status", extra_env={accel.ENV_DIR: str(tmp_path)})
    assert done.returncode != 0
    assert f"TELESRV_ACCEL=on but no build in {tmp_path}" in done.stderr


def test_an_unknown_mode_is_refused() -> None:
    done = _run("fast", "-c", "import telesrv")
    assert done.returncode != 0
    assert "TELESRV_ACCEL='fast': expected one of auto, on, off" in done.stderr


def _manifest(directory: Path, **changes: Any) -> None:
    manifest: dict[str, Any] = {
        "abi": accel.abi_tag(),
        "sources": {m: accel.source_digest(m) for m in accel.MODULES},
        "files": {m: f"{m}.so" for m in accel.MODULES},
    }
    manifest.update(changes)
    (directory / accel.MANIFEST).write_text(json.dumps(manifest))


def test_a_build_of_other_sources_is_not_used(tmp_path: Path) -> None:
    digests = {m: accel.source_digest(m) for m in accel.MODULES}
    digests["telesrv.tl.core"] = "0" * 64
    _manifest(tmp_path, sources=digests)
    files, reason = accel.check_build(tmp_path)
    assert files == {}
    assert reason == f"telesrv.tl.core changed since the build in {tmp_path}: rebuild it"


def test_a_build_for_another_python_is_not_used(tmp_path: Path) -> None:
    _manifest(tmp_path, abi="cpython-399.so")
    files, reason = accel.check_build(tmp_path)
    assert files == {}
    assert reason == f"the build in {tmp_path} is for cpython-399.so, not {accel.abi_tag()}"


def test_a_build_of_more_modules_is_not_used(tmp_path: Path) -> None:
    # Its compiled code would call the extra module's compiled code, which no digest here
    # vouches for; the same build without the extra module is used.
    extra = "telesrv.services.sends"
    assert extra not in accel.MODULES
    digests = {m: accel.source_digest(m) for m in accel.MODULES}
    files = {m: f"{m}.so" for m in (*accel.MODULES, accel.GROUP_LIB)}
    for name in files.values():
        (tmp_path / name).write_bytes(b"")
    _manifest(tmp_path, sources=digests, files=files)
    found = {name: str(tmp_path / rel) for name, rel in files.items()}
    assert accel.check_build(tmp_path) == (found, f"{len(accel.MODULES)} modules from {tmp_path}")

    _manifest(tmp_path, sources={**digests, extra: "0" * 64}, files=files)
    assert accel.check_build(tmp_path) == (
        {},
        f"the build in {tmp_path} also compiled {[extra]}: rebuild it",
    )
    _manifest(tmp_path, sources=digests, files={**files, extra: f"{extra}.so"})
    assert accel.check_build(tmp_path)[0] == {}


def test_a_build_missing_a_file_is_not_used(tmp_path: Path) -> None:
    _manifest(tmp_path)
    files, reason = accel.check_build(tmp_path)
    assert files == {}
    assert reason.endswith("is missing: rebuild")


def test_the_compiled_and_the_pure_path_give_the_same_bytes(compiled_build: Path) -> None:
    pure = _vectors("off")
    compiled = _vectors("on")
    assert pure["compiled"] == []
    assert compiled["compiled"] == list(accel.MODULES)
    assert compiled["status"].startswith("TL/MTProto path: compiled (mypyc)")
    assert len(pure["vectors"]) > 50
    assert compiled["vectors"] == pure["vectors"]


def test_the_byte_vector_tests_pass_on_the_compiled_path(
    compiled_build: Path, tmp_path: Path
) -> None:
    done = _run(
        "on",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--basetemp={tmp_path / 'pt'}",
        *(str(TESTS / t) for t in BYTE_VECTOR_TESTS),
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout
