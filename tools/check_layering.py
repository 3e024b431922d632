#!/usr/bin/env python3
"""The layering rule of foldcheck's code (ARCHITECTURE.md), checked on the sources.

Every folder below is one floor; a floor may include the public headers of the floors it
stands on (directly or through them) and its own internal headers, nothing else:

    reference   certified arithmetic            <- nothing
    result      verdicts, judgement, views      <- nothing
    reports     renderers of the versioned JSON <- result
    base        errors, envelope, task pool     <- nothing
    platform    processes and signals           <- nothing
    numerics                                    <- base, reference, result
    layer                                       <- numerics
    io                                          <- layer
    diagnosis   diagnose's hypotheses           <- numerics
    model                                       <- io
    quant                                       <- io
    commands                                    <- model, quant, diagnosis, platform, reports
    cli                                         <- commands, reports
    python      the Python module's C++ core    <- commands, reports

The library's floors (base .. commands) name fields, not the CLI's flags: a string literal
holding "--flag" there is refused (errors.hpp: messages name a field in backquotes; the
CLI shows its flag).

A public header of floor F is foldcheck/F/NAME.hpp (F/include/foldcheck/F/ in its folder);
an internal header is included by its bare name from a source beside it. The check fails on
an include of a floor not below, a flat "foldcheck/NAME.hpp", a relative path that leaves the
folder, and a CMake link (foldcheck::X in the floor's CMakeLists.txt) to a floor not below.

The table of floors in ARCHITECTURE.md is checked against the build and this rule: each
row's folder exists and defines a CMake target, each foldcheck::NAME library with headers
in include/foldcheck/NAME/ is a row with its folder, and each row stands on the floors
STANDS_ON gives it (read from the files as they are: a new floor needs all three).

    tools/check_layering.py [ROOT]     exit 0 when the rule holds, 1 listing each violation
    tools/check_layering.py --self-test   the checker finds planted violations (ctest runs both)
"""
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable

STANDS_ON = {
    "reference": [], "result": [], "reports": ["result"], "base": [], "platform": [],
    "numerics": ["base", "reference", "result"],
    "layer": ["numerics"],
    "io": ["layer"],
    "diagnosis": ["numerics"],
    "model": ["io"],
    "quant": ["io"],
    "commands": ["model", "quant", "diagnosis", "platform", "reports"],
    "cli": ["commands", "reports"],
    "python": ["commands", "reports"],
}
FOLDERS = {"reference": "reference", "result": "result", "reports": "reports", "cli": "harness/cli",
           "python": "python/src"}
FOLDERS.update({f: "harness/" + f for f in ["base", "platform", "numerics", "layer", "io", "diagnosis", "model",
                                              "quant", "commands"]})
LIBRARY = {"base", "platform", "numerics", "layer", "io", "diagnosis", "model", "quant", "commands"}
# A string literal (on one line) holding --word, outside comments.
FLAG_LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*?(?<![\w-])--[a-z][a-z0-9-]*(?:[^"\\\n]|\\.)*"')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
LINK = re.compile(r"foldcheck::(\w+)")


def below(floor):
    """The floors `floor` may include: what it stands on, transitively."""
    seen, todo = set(), list(STANDS_ON[floor])
    while todo:
        f = todo.pop()
        if f not in seen:
            seen.add(f)
            todo.extend(STANDS_ON[f])
    return seen


def include_problem(floor, path, inc):
    allowed = below(floor) | {floor}
    parts = inc.split("/")
    if parts[0] == "foldcheck":
        if len(parts) == 2:
            return f"includes the flat header {inc} (headers live under foldcheck/FLOOR/)"
        if parts[1] not in STANDS_ON:
            return f"includes {inc} of no known floor"
        if parts[1] not in allowed:
            return f"includes {inc}, but {floor} stands on {', '.join(sorted(below(floor))) or 'nothing'} only"
        return None
    if "/" in inc or ".." in inc:
        return f"includes {inc} by a relative path (use foldcheck/FLOOR/NAME.hpp)"
    if not os.path.exists(os.path.join(os.path.dirname(path), inc)):
        return f"includes {inc}, which is not an internal header beside it"
    return None


def without_line_comment(line):
    """The line up to a // that is not inside a string literal."""
    in_string, i = False, 0
    while i < len(line):
        c = line[i]
        if in_string and c == "\\":
            i += 2
            continue
        if c == '"':
            in_string = not in_string
        elif not in_string and line.startswith("//", i):
            return line[:i]
        i += 1
    return line


def flag_literals(text):
    """String literals naming a --flag, in code (not in comments). A line whose comment says
    "adapter's flags" spells another program's arguments (an engine adapter's), not foldcheck's."""
    found = []
    for line in text.splitlines():
        if "// adapter's flags" not in line:
            found.extend(FLAG_LITERAL.findall(without_line_comment(line)))
    return found


def check(root):
    problems = []
    for floor, folder in FOLDERS.items():
        top = os.path.join(root, folder)
        if not os.path.isdir(top):
            problems.append(f"{folder}: the folder of floor {floor} is missing")
            continue
        for dirpath, _dirnames, files in os.walk(top):
            for name in files:
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                if name.endswith((".cpp", ".hpp")):
                    text = open(path, encoding="utf-8").read()
                    if floor in LIBRARY:
                        problems.extend(f"{rel}: names the flag in {lit} (name the field: errors.hpp)"
                                        for lit in flag_literals(text))
                    for inc in INCLUDE.findall(text):
                        p = include_problem(floor, path, inc)
                        if p:
                            problems.append(f"{rel}: {p}")
                elif name == "CMakeLists.txt" and floor != "cli":
                    for dep in LINK.findall(open(path, encoding="utf-8").read()):
                        if dep in STANDS_ON and dep != floor and dep not in below(floor):
                            problems.append(f"{rel}: links foldcheck::{dep}, not below {floor}")
    return problems


# ARCHITECTURE.md's table of floors against the build: each row's folder exists and defines a
# CMake target there, each floor library (a foldcheck::NAME target whose folder holds
# include/foldcheck/NAME/) is the row NAME with that folder, and each row stands on what the
# rule above (STANDS_ON) says. Read from the files as they are, so a new floor is checked from
# the day its folder, its target or its row appears.
TARGET = re.compile(r"\b(?:add_library|add_executable|pybind11_add_module|foldcheck_concern)\(\s*([\w:]+)")
ALIAS = re.compile(r"\badd_library\(\s*foldcheck::(\w+)\s+ALIAS\b")
CONCERN = re.compile(r"\bfoldcheck_concern\(\s*(\w+)")
SKIPPED_DIRS = {".git", ".venv", "node_modules", "__pycache__"}


def floor_table(root: str) -> dict[str, tuple[str, list[str]]]:
    """ARCHITECTURE.md's floors: {floor: (folder, the floors it stands on)}."""
    rows: dict[str, tuple[str, list[str]]] = {}
    with open(os.path.join(root, "ARCHITECTURE.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    heading = next((i for i, line in enumerate(lines) if re.match(r"\|\s*floor\s*\|\s*folder\s*\|", line)), None)
    if heading is None:
        return rows
    for line in lines[heading + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        stands = [] if cells[-1] == "nothing" else [s.strip() for s in cells[-1].split(",")]
        rows[cells[0]] = (cells[1].strip("`").rstrip("/"), stands)
    return rows


def cmake_targets(root: str) -> dict[str, list[str]]:
    """{folder (relative to root): the targets its CMake files define}; foldcheck::NAME for a
    floor library (an alias, or a foldcheck_concern(NAME ...))."""
    found: dict[str, list[str]] = {}
    for dirpath, dirnames, files in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIPPED_DIRS and not d.startswith("build")]
        for name in files:
            if name == "CMakeLists.txt" or name.endswith(".cmake"):
                with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                    text = f.read()
                rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
                targets = TARGET.findall(text)
                targets += ["foldcheck::" + n for n in ALIAS.findall(text) + CONCERN.findall(text)]
                if targets:
                    found.setdefault(rel, []).extend(targets)
    return found


def floor_libraries(root: str, targets: dict[str, list[str]]) -> dict[str, str]:
    """{NAME: folder} of every foldcheck::NAME library with public headers in its folder."""
    libs = {}
    for folder, names in targets.items():
        for t in names:
            if t.startswith("foldcheck::"):
                name = t.split("::", 1)[1]
                if os.path.isdir(os.path.join(root, folder, "include", "foldcheck", name)):
                    libs[name] = folder
    return libs


def floors_problems(root: str) -> list[str]:
    """Where ARCHITECTURE.md's table of floors, the CMake targets and STANDS_ON disagree."""
    rows = floor_table(root)
    if not rows:
        return ["ARCHITECTURE.md: no table of floors (| floor | folder | holds | stands on |)"]
    targets = cmake_targets(root)
    problems = []
    for floor, (folder, stands) in rows.items():
        where = f"ARCHITECTURE.md: floor {floor}"
        if not os.path.isdir(os.path.join(root, folder)):
            problems.append(f"{where}: its folder {folder}/ does not exist")
        elif folder not in targets:
            problems.append(f"{where}: {folder}/ defines no CMake target (no add_library/add_executable there)")
        if floor not in STANDS_ON:
            problems.append(f"{where}: not a floor of tools/check_layering.py's rule (STANDS_ON)")
        elif sorted(stands) != sorted(STANDS_ON[floor]):
            problems.append(f"{where} stands on {', '.join(stands) or 'nothing'} in the table but on "
                            f"{', '.join(STANDS_ON[floor]) or 'nothing'} in tools/check_layering.py")
        elif floor in FOLDERS and not (FOLDERS[floor] + "/").startswith(folder + "/"):
            problems.append(f"{where}: folder {folder}/ in the table, {FOLDERS[floor]}/ in tools/check_layering.py")
    for name, folder in sorted(floor_libraries(root, targets).items()):
        if name not in rows:
            problems.append(f"{folder}/: the library foldcheck::{name} is no row of ARCHITECTURE.md's floors")
        elif rows[name][0] != folder:
            problems.append(f"{folder}/: the library foldcheck::{name} is in {folder}/, "
                            f"ARCHITECTURE.md's row says {rows[name][0]}/")
    problems += [f"ARCHITECTURE.md: floor {f} of tools/check_layering.py's rule has no row"
                 for f in STANDS_ON if f not in rows]
    return problems


def floors_self_test(root: str) -> int:
    """On a copy of root's table and CMake files: none found, then each planted disagreement found."""
    def planted(edit: Callable[[str], None]) -> list[str]:
        with tempfile.TemporaryDirectory() as tmp:
            for folder, _ in cmake_targets(root).items():
                for name in os.listdir(os.path.join(root, folder)):
                    if name == "CMakeLists.txt" or name.endswith(".cmake"):
                        os.makedirs(os.path.join(tmp, folder), exist_ok=True)
                        shutil.copy(os.path.join(root, folder, name), os.path.join(tmp, folder, name))
            for name, folder in floor_libraries(root, cmake_targets(root)).items():
                os.makedirs(os.path.join(tmp, folder, "include", "foldcheck", name), exist_ok=True)
            for folder, _ in floor_table(root).values():
                os.makedirs(os.path.join(tmp, folder), exist_ok=True)
            shutil.copy(os.path.join(root, "ARCHITECTURE.md"), tmp)
            edit(tmp)
            return floors_problems(tmp)

    def library_without_row(tmp: str) -> None:
        os.makedirs(os.path.join(tmp, "harness", "extra", "include", "foldcheck", "extra"))
        with open(os.path.join(tmp, "harness", "extra", "CMakeLists.txt"), "w", encoding="utf-8") as f:
            f.write("foldcheck_concern(extra SOURCES src/extra.cpp DEPENDS foldcheck::io)\n")

    def table(old: str, new: str) -> Callable[[str], None]:
        def edit(tmp: str) -> None:
            path = os.path.join(tmp, "ARCHITECTURE.md")
            with open(path, encoding="utf-8") as f:
                text = f.read()
            with open(path, "w", encoding="utf-8") as f:
                f.write(re.sub(old, new, text, count=1, flags=re.M))
        return edit

    cases: dict[str, tuple[Callable[[str], None], str | None]] = {
        "nothing planted": (lambda tmp: None, None),
        "a library with no row": (library_without_row, "foldcheck::extra is no row"),
        "a row whose folder is missing": (table(r"^(\| quant \| )`harness/quant/`", r"\1`harness/nowhere/`"),
                                          "harness/nowhere/ does not exist"),
        "a floor without a row": (table(r"^\| quant \|.*\n", ""), "floor quant of"),
        "a row standing on another floor": (table(r"^(\| layer \|.*\| )numerics \|$", r"\1io |"),
                                            "floor layer stands on io"),
    }
    failed = 0
    for what, (edit, expect) in cases.items():
        found = planted(edit)
        if (expect is None and found) or (expect is not None and not any(expect in p for p in found)):
            print(f"check_layering self-test ({what}): found {found or 'nothing'}")
            failed = 1
    return failed


def self_test():
    """Plant one violation of each kind in a copy of the rule's folders; each must be found."""
    planted = {
        "harness/layer/src/a.cpp": '#include "foldcheck/model/model.hpp"\n',
        "harness/numerics/src/b.cpp": '#include "foldcheck/dtype.hpp"\n',
        "harness/io/src/c.cpp": '#include "../../layer/src/conv_kernels.hpp"\n',
        "harness/quant/src/d.cpp": '#include "missing.hpp"\n',
        "harness/base/CMakeLists.txt": "target_link_libraries(x foldcheck::layer)\n",
        "reports/src/e.cpp": '#include "foldcheck/commands/explain.hpp"\n',
        "harness/commands/src/i.cpp": 'throw InputError("give --input");\n',
    }
    fine = {
        "harness/commands/src/f.cpp": '#include "foldcheck/layer/graph.hpp"\n#include "g.hpp"\n',
        "harness/commands/src/g.hpp": '#include "foldcheck/reports/text.hpp"\n',
        "harness/cli/h.cpp": '#include "foldcheck/commands/explain.hpp"\nthrow E("--input");\n',
        "harness/model/src/j.cpp": 'f("`input`");  // not "--input"\nx = a--b;\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for folder in FOLDERS.values():
            os.makedirs(os.path.join(root, folder), exist_ok=True)
        for rel, text in {**planted, **fine}.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            open(os.path.join(root, rel), "w").write(text)
        found = check(root)
    missed = [rel for rel in planted if not any(p.startswith(rel + ":") for p in found)]
    wrong = [p for p in found if not any(p.startswith(rel + ":") for rel in planted)]
    for m in missed:
        print(f"check_layering self-test: the violation planted in {m} was not found")
    for w in wrong:
        print(f"check_layering self-test: a false report: {w}")
    return 1 if missed or wrong else 0


def main():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if sys.argv[1:] == ["--self-test"]:
        return self_test() | floors_self_test(here)
    root = sys.argv[1] if len(sys.argv) > 1 else here
    problems = check(root) + floors_problems(root)
    for p in problems:
        print(p)
    if problems:
        print(f"check_layering: {len(problems)} problem(s): includes or links that climb the floors, or "
              "ARCHITECTURE.md's table of floors disagreeing with the CMake targets (ARCHITECTURE.md)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
