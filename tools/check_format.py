#!/usr/bin/env python3
"""The C++ habits on what changed: clang-format (.clang-format) and clang-tidy (.clang-tidy),
judged on the lines changed since the base commit recorded in tools/format_base.

Lines written before the base are not judged (the code was never reformatted wholesale);
every line added or changed after it is, in the working tree against the base: committed,
staged or not. Untracked files are judged once added to git.

    tools/check_format.py [BUILD_DIR]    exit 0: nothing to report; 1: clang-format's diff
                                         (apply it with `git clang-format BASE`) or clang-tidy's
                                         warnings; 2: the check cannot run
    tools/check_format.py --no-tidy      clang-format only (no build needed)
    tools/check_format.py --self-test    a clean change passes and a bad one fails, in a scratch
                                         repository (ctest runs both)

clang-tidy reads BUILD_DIR/compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS, on in the
top CMakeLists.txt) and reports only warnings on changed lines. A changed .cpp file the build
does not compile (a target left out of this configuration) is not tidied, and says so.

The base must be in the history: a shallow clone (git clone --depth N) that lacks it cannot
tell old lines from new ones, and the check fails saying so (`git fetch --unshallow`) rather
than judge every line or none. A file moved (git mv) after the base is judged whole, as git
diffs it against no file there: format it, or move the base. Tools: Debian's clang-format and
clang-tidy (14), installed by tools/bootstrap.sh test; git-clang-format comes with clang-format.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BASE_FILE = os.path.join("tools", "format_base")
EXTENSIONS = ("cpp", "hpp", "h", "cc")
STALE_BASE_FILES = 30  # changed files past which the base should move (check())
HUNK = re.compile(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@")


def fail(message: str) -> int:
    print(f"check_format: {message}")
    return 2


def git(root: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True)


def recorded_base(root: str) -> str:
    """The first line of tools/format_base that is not a comment: a commit."""
    with open(os.path.join(root, BASE_FILE), encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    return lines[0] if lines else ""


def changed_lines(root: str, base: str) -> dict[str, list[list[int]]]:
    """Each C++ file changed since base (working tree): its added or changed line ranges."""
    diff = git(root, "diff", "-U0", "--no-color", "--no-ext-diff", "--src-prefix=a/", "--dst-prefix=b/", base, "--",
               *(f"*.{e}" for e in EXTENSIONS))
    ranges: dict[str, list[list[int]]] = {}
    name = None
    for line in diff.stdout.splitlines():
        if line.startswith("+++ "):
            name = line[6:] if line.startswith("+++ b/") else None
        elif name and (m := HUNK.match(line)):
            start, count = int(m.group(1)), int(m.group(2) or "1")
            if count:
                ranges.setdefault(name, []).append([start, start + count - 1])
    return ranges


def format_findings(root: str, base: str) -> str:
    """clang-format's diff on the changed lines; "" when they are formatted."""
    r = git(root, "clang-format", "--diff", "--extensions", ",".join(EXTENSIONS), base, "--")
    if r.returncode != 0 or r.stderr.strip():
        raise RuntimeError(f"git clang-format failed: {r.stderr.strip()}")
    # git-clang-format 14 exits 0 either way: a finding is the diff it prints.
    return r.stdout if re.search(r"^diff --git ", r.stdout, re.M) else ""


def tidy_one(root: str, build: str, name: str, lines: list[list[int]]) -> str:
    """clang-tidy's warnings on `lines` of file `name` (relative to the root)."""
    line_filter = json.dumps([{"name": name, "lines": lines}])
    r = subprocess.run(["clang-tidy", "--quiet", "-p", build, f"--line-filter={line_filter}", name],
                       cwd=root, capture_output=True, text=True)
    found = [line for line in r.stdout.splitlines() if re.search(r": (warning|error): ", line)]
    return r.stdout if found else ""


def tidy_key(root: str, commands: dict[str, str], name: str, lines: list[list[int]]) -> str:
    """What a file's clang-tidy result depends on here: its text, its changed lines, .clang-tidy
    and its compile command (a header's: none of its own)."""
    command = commands.get(os.path.realpath(os.path.join(root, name)), "")
    h = hashlib.sha256(json.dumps([name, lines, command]).encode())
    for path in (os.path.join(root, name), os.path.join(root, ".clang-tidy")):
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def tidy_findings(root: str, build: str, ranges: dict[str, list[list[int]]]) -> str:
    """clang-tidy on every changed file the build compiles (headers through a neighbour's flags).
    A file whose key (tidy_key) is unchanged since a clean run in this build is not run again
    (BUILD_DIR/format_check_tidy.json), so the check stays quick as the base ages."""
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        commands = {os.path.realpath(e["file"]): e.get("command", " ".join(e.get("arguments", [])))
                    for e in json.load(f)}
    cache_path = os.path.join(build, "format_check_tidy.json")
    try:
        with open(cache_path, encoding="utf-8") as f:
            clean = set(json.load(f))
    except (OSError, ValueError):
        clean = set()
    todo = {}
    for name, lines in ranges.items():
        if name.endswith((".cpp", ".cc")) and os.path.realpath(os.path.join(root, name)) not in commands:
            print(f"check_format: {name} is not compiled in {build}; clang-tidy skips it")
        elif os.path.exists(os.path.join(root, name)):
            todo[name] = (lines, tidy_key(root, commands, name, lines))
    with ThreadPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        run = sorted(n for n in todo if todo[n][1] not in clean)
        outputs = dict(zip(run, pool.map(lambda n: tidy_one(root, build, n, todo[n][0]), run), strict=True))
    with open(cache_path, "w", encoding="utf-8") as f:
        json.dump(sorted({key for n, (_, key) in todo.items() if not outputs.get(n)}), f)
    return "".join(outputs[n] for n in run)


def check(root: str, build: str, tidy: bool) -> int:
    """Exit status of the check of `root`'s changes since its base (see the module's text)."""
    if git(root, "rev-parse", "--is-inside-work-tree").stdout.strip() != "true":
        return fail(f"{root} is not a git checkout: the check judges the lines changed since a commit")
    base = recorded_base(root)
    if git(root, "cat-file", "-e", f"{base}^{{commit}}").returncode != 0:
        shallow = git(root, "rev-parse", "--is-shallow-repository").stdout.strip() == "true"
        return fail(f"the base commit {base or '(none)'} (tools/format_base) is not in this clone's history"
                    + ("; this is a shallow clone: `git fetch --unshallow`, or clone in full" if shallow else ""))
    if tidy and not os.path.exists(os.path.join(build, "compile_commands.json")):
        return fail(f"no {build}/compile_commands.json (configure with CMake; --no-tidy checks the format only)")
    findings = format_findings(root, base)
    if findings:
        print(f"clang-format: lines changed since {base[:12]} are not formatted (.clang-format); "
              f"`git clang-format {base[:12]}` applies this:\n{findings}")
    if tidy:
        ranges = changed_lines(root, base)
        if len(ranges) > STALE_BASE_FILES:
            # Uncached (a fresh clone: CI), clang-tidy takes ~10 s a file on 2 cores: past ~50
            # files the check outgrows ctest's limit (it did at 77, issue 41).
            print(f"check_format: {len(ranges)} files changed since the base {base[:12]}: once this check "
                  f"passes, move tools/format_base to the newest commit (its comment says when)")
        tidy_out = tidy_findings(root, build, ranges)
        if tidy_out:
            print(f"clang-tidy: warnings on lines changed since {base[:12]} (.clang-tidy):\n{tidy_out}")
        findings += tidy_out
    return 1 if findings else 0


SELF_TEST_BEFORE = """#include <vector>

int total(const std::vector<int>& v) {
  int t = 0;
  for (int x : v) t += x;
  return t;
}
"""
# A change after the base: one line clang-format would lay out otherwise, one clang-tidy
# warns on (performance-inefficient-vector-operation); the old lines stay as they were.
SELF_TEST_BAD = SELF_TEST_BEFORE + """
std::vector<int>  squares(int n) {
  std::vector<int> r;
  for (int i = 0; i < n; ++i) r.push_back(i * i);
  return r;
}
"""
SELF_TEST_GOOD = SELF_TEST_BEFORE + """
int twice(int n) { return 2 * n; }
"""


def self_test() -> int:
    """The check on a scratch repository: a clean change passes, a bad one fails on both tools."""
    problems = []
    with tempfile.TemporaryDirectory() as root:
        for name in [".clang-format", ".clang-tidy"]:
            shutil.copy(os.path.join(ROOT, name), root)
        with open(os.path.join(root, "compile_commands.json"), "w", encoding="utf-8") as f:
            json.dump([{"directory": root, "file": os.path.join(root, "a.cpp"),
                        "command": "c++ -std=c++20 -c a.cpp"}], f)
        for args in (["init", "-q"], ["config", "user.email", "t@t"], ["config", "user.name", "t"]):
            git(root, *args)
        with open(os.path.join(root, "a.cpp"), "w", encoding="utf-8") as f:
            f.write(SELF_TEST_BEFORE)
        git(root, "add", "a.cpp")
        git(root, "commit", "-q", "-m", "base")
        os.makedirs(os.path.join(root, "tools"))
        with open(os.path.join(root, BASE_FILE), "w", encoding="utf-8") as f:
            f.write("# the base\n" + git(root, "rev-parse", "HEAD").stdout)
        base = recorded_base(root)
        with open(os.path.join(root, "a.cpp"), "w", encoding="utf-8") as f:
            f.write(SELF_TEST_GOOD)
        if (got := check(root, root, True)) != 0:
            problems.append(f"a clean change: exit {got}, not 0")
        with open(os.path.join(root, "a.cpp"), "w", encoding="utf-8") as f:
            f.write(SELF_TEST_BAD)
        if "-std::vector<int>  squares" not in format_findings(root, base):
            problems.append("clang-format did not flag the badly laid out line")
        if "performance-inefficient-vector-operation" not in tidy_findings(root, root, changed_lines(root, base)):
            problems.append("clang-tidy did not flag the push_back loop")
        if (got := check(root, root, True)) != 1:
            problems.append(f"a bad change: exit {got}, not 1")
    for p in problems:
        print(f"check_format self-test: {p}")
    return 1 if problems else 0


def main() -> int:
    args = sys.argv[1:]
    tidy = "--no-tidy" not in args
    args = [a for a in args if a != "--no-tidy"]
    for tool in ["git", "clang-format", "git-clang-format"] + (["clang-tidy"] if tidy else []):
        if not shutil.which(tool):
            return fail(f"{tool} not found (Debian packages clang-format, clang-tidy: tools/bootstrap.sh test)")
    if args == ["--self-test"]:
        return self_test()
    return check(ROOT, os.path.abspath(args[0]) if args else os.path.join(ROOT, "build"), tidy)


if __name__ == "__main__":
    sys.exit(main())
