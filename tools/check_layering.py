#!/usr/bin/env python3
"""The layering rule of foldcheck's code (ARCHITECTURE.md), checked on the sources.

Every folder below is one floor; a floor may include the public headers of the floors it
stands on (directly or through them) and its own internal headers, nothing else:

    reference   certified arithmetic            <- nothing
    reports     renderers of the versioned JSON <- nothing
    base        errors, envelope, task pool     <- nothing
    platform    processes and signals           <- nothing
    numerics                                    <- base, reference
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

    tools/check_layering.py [ROOT]     exit 0 when the rule holds, 1 listing each violation
    tools/check_layering.py --self-test   the checker finds planted violations (ctest runs both)
"""
import os
import re
import sys
import tempfile

STANDS_ON = {
    "reference": [], "reports": [], "base": [], "platform": [],
    "numerics": ["base", "reference"],
    "layer": ["numerics"],
    "io": ["layer"],
    "diagnosis": ["numerics"],
    "model": ["io"],
    "quant": ["io"],
    "commands": ["model", "quant", "diagnosis", "platform", "reports"],
    "cli": ["commands", "reports"],
    "python": ["commands", "reports"],
}
FOLDERS = {"reference": "reference", "reports": "reports", "cli": "harness/cli", "python": "python/src"}
FOLDERS.update({f: "harness/" + f for f in ["base", "platform", "numerics", "layer", "io", "diagnosis", "model", "quant",
                                              "commands"]})
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
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"check_layering: {len(problems)} include(s) or link(s) climb the floors (ARCHITECTURE.md)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
