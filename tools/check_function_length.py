#!/usr/bin/env python3
"""No function over 80 lines in harness/, reports/ and python/src/ (ARCHITECTURE.md).

A function that does not fit on a screen mixes jobs; split it into named steps. The
kernels in reference/ may keep longer functions (their comments say why: a vectorised
loop nest read as one unit), so reference/ is not checked.

Each function's first and last line come from Universal Ctags (Debian `universal-ctags`,
installed by tools/bootstrap.sh test); a machine without it fails this check rather than
passing it unchecked.

    tools/check_function_length.py [ROOT]       exit 0 when every function fits, 1 listing the others
    tools/check_function_length.py --self-test  a planted 81-line function is found, an 80-line one is not
"""
import os
import shutil
import subprocess
import sys
import tempfile

LIMIT = 80
CHECKED = ["harness", "reports", "python/src"]


def long_functions(root):
    ctags = shutil.which("ctags")
    if not ctags:
        raise SystemExit("check_function_length: ctags not found (Debian package universal-ctags; "
                         "tools/bootstrap.sh test installs it)")
    dirs = [d for d in CHECKED if os.path.isdir(os.path.join(root, d))]
    out = subprocess.run([ctags, "-R", "--languages=C++", "--kinds-C++=f", "--fields=+ne", "-x",
                          "--_xformat=%{end} %{line} %F %N"] + dirs,
                         cwd=root, check=True, capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        end, start, path, name = line.split(" ", 3)
        if end.isdigit() and int(end) - int(start) + 1 > LIMIT:
            found.append((int(end) - int(start) + 1, f"{path}:{start}", name))
    return sorted(found, reverse=True)


def self_test():
    def body(n):
        lines = "  int x = 0;\n" * (n - 3)
        return f"int f{n}() {{\n{lines}  return 0;\n}}\n"

    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "harness"))
        with open(os.path.join(root, "harness", "a.cpp"), "w") as f:
            f.write(body(81) + body(80))
        found = long_functions(root)
    if [(n, name) for n, _, name in found] != [(81, "f81")]:
        print(f"check_function_length self-test: expected only the 81-line f81, found {found}")
        return 1
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    found = long_functions(root)
    for n, where, name in found:
        print(f"{where}: {name} is {n} lines (at most {LIMIT}: split it into named steps)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
