"""The deployment files parse, and the container image installs the way CI does.

The image cannot be built here (no registry), so what is checked is that the
Dockerfile runs the same install script `.ci/run` runs (and CI runs it on every
build), with the files that script needs copied in. compose.yaml is parsed when a
YAML parser is installed; otherwise its structure is checked line by line.
"""

from __future__ import annotations

import configparser
import importlib
import re
import shlex
import subprocess
from pathlib import Path

import click

from telesrv.cli.options import config_defaults
from telesrv.cli.serve import serve

ROOT = Path(__file__).resolve().parents[1]
INSTALL = "scripts/install.sh"


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined, comments dropped."""
    text = (ROOT / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def install_calls(lines: list[str]) -> list[list[str]]:
    """The install script's invocations (program and arguments) among shell lines."""
    calls = []
    for line in lines:
        if INSTALL not in line or line.lstrip().startswith("#"):
            continue
        for command in re.split(r"&&|;|\|\|", line):
            words = shlex.split(command, comments=True)
            if words and words[0].removeprefix("./") == INSTALL:
                calls.append(words)
    return calls


def test_install_script_is_a_valid_executable_shell_script() -> None:
    script = ROOT / INSTALL
    assert script.stat().st_mode & 0o111
    assert script.read_text().startswith("#!/bin/sh\n")
    subprocess.run(["sh", "-n", str(script)], check=True)


def test_ci_and_dockerfile_run_the_same_install_script() -> None:
    ci = install_calls((ROOT / ".ci" / "run").read_text().splitlines())
    assert [call[:2] for call in ci] == [[INSTALL, "--test"]]
    instructions = dockerfile_instructions()
    docker = install_calls([args for word, args in instructions if word == "RUN"])
    assert len(docker) == 1 and docker[0][0] == INSTALL
    # Nobody installs another way beside it.
    runs = " ".join(args for word, args in instructions if word == "RUN")
    assert "pip install" not in runs and "pip install" not in (ROOT / ".ci" / "run").read_text()
    # What the script reads is in the image before it runs.
    first_run = next(i for i, (word, _) in enumerate(instructions) if word == "RUN")
    copied: set[str] = set()
    for word, args in instructions[:first_run]:
        if word == "COPY":
            copied.update(Path(source).name for source in args.split()[:-1])
    assert {"pyproject.toml", "README.md", "src", "scripts"} <= copied


def test_dockerfile_runs_telesrv_as_a_user() -> None:
    instructions = dockerfile_instructions()
    assert instructions[0][0] == "FROM"
    users = [args for word, args in instructions if word == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert ("ENTRYPOINT", '["telesrv"]') in instructions
    assert ("CMD", '["serve"]') in instructions


def test_compose_file_has_telesrv_postgres_and_redis() -> None:
    text = (ROOT / "compose.yaml").read_text()
    assert "\t" not in text
    try:
        yaml = importlib.import_module("yaml")
    except ImportError:
        yaml = None
    if yaml is not None:
        document = yaml.safe_load(text)
        services = document["services"]
        assert set(services) == {"telesrv", "postgres", "redis"}
        environment = services["telesrv"]["environment"]
    else:
        # No YAML parser installed: the top-level keys and the services by indentation.
        top = [line.split(":")[0] for line in text.splitlines() if re.match(r"^[a-z]", line)]
        assert top == ["services", "volumes"]
        services_block = text.split("\nservices:\n", 1)[1].split("\nvolumes:\n", 1)[0]
        names = re.findall(r"^  ([a-z]+):$", services_block, flags=re.MULTILINE)
        assert names == ["postgres", "redis", "telesrv"]
        environment = dict(
            re.findall(r"^      (TELESRV_[A-Z_]+): (.+)$", services_block, flags=re.MULTILINE)
        )
    assert "@postgres:5432/" in environment["TELESRV_DATABASE_URL"]
    assert environment["TELESRV_REDIS_URL"].startswith("redis://redis:6379")


def test_systemd_unit_parses_with_a_user_restarts_and_hardening() -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment, method-assign]
    unit.read_string((ROOT / "deploy" / "telesrv.service").read_text())
    assert set(unit.sections()) == {"Unit", "Service", "Install"}
    service = unit["Service"]
    assert service["User"] == "telesrv"
    assert service["Restart"] == "on-failure"
    assert service["ExecStart"].endswith("/telesrv serve")
    for hardening in ("NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp"):
        assert service[hardening] in ("yes", "strict"), hardening
    assert unit["Install"]["WantedBy"] == "multi-user.target"


def test_example_config_file_is_valid() -> None:
    with click.Context(serve) as ctx:
        loaded = config_defaults(serve, ROOT / "deploy" / "telesrv.toml", ctx)
    assert loaded["listen"] == "0.0.0.0:8443"
