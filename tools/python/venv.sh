#!/usr/bin/env bash
# The project's Python environment: .venv at the repository root with exactly the packages
# pinned in tools/python/requirements.txt, from PyPI, never the system's site-packages.
# Made again when requirements.txt or the base interpreter changed (a hash of both is kept in
# .venv), or when .venv is broken.
#   tools/python/venv.sh          (PYTHON: the interpreter to base it on; default python3 >= 3.11)
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.venv
req=tools/python/requirements.txt
python="${PYTHON:-python3}"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null ||
  { echo "venv: $python is missing or older than 3.11" >&2; exit 1; }
want="$( { cat "$req"; "$python" -c 'import sys; print(sys.executable, sys.version)'; } | sha256sum | cut -d' ' -f1)"
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" = "$want" ] &&
   "$venv/bin/python" -c "import numpy, onnx, pytest, onnxruntime" 2>/dev/null; then
  echo "venv: $venv is up to date with $req"
  exit 0
fi
"$python" -m venv --clear "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --require-virtualenv -r "$req"
"$venv/bin/python" -m pip check
echo "$want" >"$venv/.requirements.sha256"
echo "venv: $venv made from $req ($("$venv/bin/python" --version))"
