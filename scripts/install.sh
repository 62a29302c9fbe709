#!/bin/sh
# Installs telesrv into a virtual environment: the one install procedure, run by
# .ci/run (with the test tools) and by the Dockerfile (without), so the image gets
# what CI tested.
#
#   scripts/install.sh [--test] [VENV]
#
# VENV defaults to .venv beside this repository; PYTHON (default python3) is the
# interpreter it is made from. Needs Python 3.11 or newer with venv and pip (on
# Debian and Ubuntu: apt-get install python3-venv).
set -eu

cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
extras=""
if [ "${1:-}" = "--test" ]; then
    extras="[test]"
    shift
fi
venv="${1:-.venv}"

if ! command -v "$PYTHON" >/dev/null 2>&1; then
    echo "install.sh: $PYTHON not found (set PYTHON to a Python 3.11 or newer)" >&2
    exit 1
fi
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "install.sh: telesrv needs Python 3.11 or newer; $PYTHON is $("$PYTHON" -V 2>&1)" >&2
    exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
    # Debian and Ubuntu ship the venv's pip bootstrap in a package of its own.
    if ! "$PYTHON" -c 'import ensurepip' >/dev/null 2>&1; then
        echo "install.sh: $PYTHON cannot make a venv with pip; on Debian/Ubuntu run: apt-get install python3-venv" >&2
        exit 1
    fi
    "$PYTHON" -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -e ".$extras"
echo "telesrv installed: $venv/bin/telesrv"
