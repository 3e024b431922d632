#!/usr/bin/env bash
# A fake compiler for `foldcheck bisect --cmd` (see tests/fake_compiler.cpp for its passes):
#   tests/fake_compiler.sh [--enabled P,Q] [--disabled P,Q] -o OUT.npy [--write-reference R.npy]
# Runs the built helper: $FAKE_COMPILER_IMPL, else build/tests/fake_compiler_impl beside this script.
here="$(cd "$(dirname "$0")" && pwd)"
exec "${FAKE_COMPILER_IMPL:-$here/../build/tests/fake_compiler_impl}" "$@"
