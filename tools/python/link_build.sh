#!/usr/bin/env bash
# Make the build's Python package the one .venv imports, as `pip install -e .` would:
#   tools/python/link_build.sh [BUILD]     (default build)
# .venv then has `import foldcheck` (a .pth naming BUILD/python, where the build puts the
# package: python/CMakeLists.txt) and the `foldcheck` command (.venv/bin/foldcheck, which runs
# `python -m foldcheck`, as the wheel's entry point does). A later build is seen at once.
set -euo pipefail
cd "$(dirname "$0")/../.."
build="$(cd "${1:-build}" && pwd)"
[ -d "$build/python/foldcheck" ] ||
  { echo "link_build: no Python package in $build/python (configure with -DFOLDCHECK_BUILD_PYTHON=ON)" >&2; exit 1; }
[ -x .venv/bin/python ] || { echo "link_build: no .venv (tools/python/venv.sh makes it)" >&2; exit 1; }
site="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$build/python" >"$site/foldcheck-build.pth"
cat >.venv/bin/foldcheck <<'SH'
#!/bin/sh
# foldcheck from the build tools/python/link_build.sh linked into this environment.
exec "$(dirname "$0")/python" -m foldcheck "$@"
SH
chmod +x .venv/bin/foldcheck
.venv/bin/python -c 'import foldcheck' || { echo "link_build: import foldcheck fails in .venv" >&2; exit 1; }
echo "link_build: .venv imports foldcheck from $build/python"
