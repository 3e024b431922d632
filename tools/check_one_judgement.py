#!/usr/bin/env python3
"""Verdicts are decided in one place (ARCHITECTURE.md, "Verdicts are decided in one place").

result/judgement.hpp holds every rule that turns facts into a verdict or combines verdicts;
the commands call it, the renderers read the verdicts it produced through typed views
(result/views/), and the Python package asks foldcheck._core. This check finds the ways that
rule erodes, each a place where a verdict would be derived a second time:

  verdict-string   a verdict compared as text (== / != "UNEXPECTED", `in ("EXPECTED", ...)`)
                   in C++ outside result/ or in python/foldcheck/: a ranking or a rule written
                   again over strings instead of over the typed Verdict;
  verdict-named    verdict_named( outside result/ and the two places that read a verdict a
                   person writes (a suite's `expect`, a Verdict given to the Python module);
  lookups          more string-key lookups (j["key"], .at("key"), .value("key", ...),
                   .contains("key"), .find("key"), .count("key")) in reports/ than BUDGET:
                   the renderers read typed views, restored once from JSON in result/views/.

    tools/check_one_judgement.py [ROOT]       exit 0 when clean, 1 listing each finding
    tools/check_one_judgement.py --self-test  a planted finding of each kind is found, clean code is not
"""
import os
import re
import sys
import tempfile

# The string-key lookups reports/ may still make (issue 39: from 1,382 to below 200). Lower it
# when a renderer moves to a view; never raise it to let one back.
BUDGET = 0

VERDICTS = r"(?:EXPECTED|SUSPICIOUS|UNEXPECTED|MISTRUSTED)"
VERDICT_LITERAL = rf"""["']{VERDICTS}["']"""
VERDICT_STRING = re.compile(
    rf"(?:==|!=)\s*{VERDICT_LITERAL}|{VERDICT_LITERAL}\s*(?:==|!=)"
    rf"|\bin\s*[\(\[\{{]\s*(?:None\s*,\s*)?{VERDICT_LITERAL}")
VERDICT_NAMED = re.compile(r"\bverdict_named\s*\(")
LOOKUP = re.compile(r"""\[\s*"[A-Za-z_0-9]+"\s*\]|\.(?:at|value|contains|find|count)\(\s*"[A-Za-z_0-9]+\"""")

CPP = (".cpp", ".hpp", ".h", ".cc")
# Where a verdict is spelled by a person, not computed: verdict_named may read it there.
NAMED_ALLOWED = {"harness/io/src/suite_file.cpp", "python/src/bind_judgement.cpp"}
CPP_DIRS = ["harness", "reports", "python/src", "adapters"]
PY_DIRS = ["python/foldcheck"]


def files(root, dirs, exts):
    for d in dirs:
        for base, _, names in os.walk(os.path.join(root, d)):
            for n in sorted(names):
                if n.endswith(exts):
                    path = os.path.join(base, n)
                    yield os.path.relpath(path, root), path


def code_lines(path):
    """(number, line) with // and # comments dropped (a comment may quote a verdict)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for k, line in enumerate(f, 1):
            cut = line.split("//", 1)[0] if path.endswith(CPP) else line.split(" #", 1)[0]
            yield k, cut


def findings(root, budget=BUDGET):
    out = []
    for rel, path in list(files(root, CPP_DIRS, CPP)) + list(files(root, PY_DIRS, (".py",))):
        for k, line in code_lines(path):
            if VERDICT_STRING.search(line):
                out.append(f"{rel}:{k}: verdict-string: a verdict compared as text (use the typed Verdict "
                           f"and result/judgement.hpp): {line.strip()}")
            if path.endswith(CPP) and VERDICT_NAMED.search(line) and rel not in NAMED_ALLOWED:
                out.append(f"{rel}:{k}: verdict-named: a verdict read back from text outside result/ "
                           f"(restore it in a view, result/views/): {line.strip()}")
    lookups = 0
    for _, path in files(root, ["reports"], CPP):
        for _, line in code_lines(path):
            lookups += len(LOOKUP.findall(line))
    if lookups > budget:
        out.append(f"reports/: lookups: {lookups} string-key lookups, the budget is {budget} "
                   "(read a typed view from result/views/ instead)")
    return out, lookups


def self_test():
    planted = {
        "reports/src/a.cpp": 'bool bad(const json& j) { return j["verdict"] == "UNEXPECTED"; }\n',
        "harness/x/src/b.cpp": 'auto v = verdict_named(j.at("verdict").get<std::string>());\n',
        "python/foldcheck/c.py": 'if row["verdict"] not in ("EXPECTED", "MISTRUSTED"):\n    pass\n',
    }
    clean = {
        "reports/src/a.cpp": ("// a comment may say == \"UNEXPECTED\"\n"
                              "bool ok(Verdict v) { return v == Verdict::Unexpected; }\n"),
        "harness/io/src/suite_file.cpp": 'auto v = verdict_named(text);\n',
        "python/foldcheck/c.py": "if r.verdict == Verdict.EXPECTED:  # not \"EXPECTED\" == text\n    pass\n",
    }
    for tree, want in ((planted, 4), (clean, 0)):
        with tempfile.TemporaryDirectory() as root:
            for rel, text in tree.items():
                os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
                with open(os.path.join(root, rel), "w") as f:
                    f.write(text)
            got, _ = findings(root, budget=0)
            if len(got) != want:
                print(f"check_one_judgement --self-test: expected {want} finding(s), got {len(got)}:", *got, sep="\n  ")
                return 1
    print("check_one_judgement --self-test: planted findings of each kind found, clean code passes")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    out, lookups = findings(root)
    for line in out:
        print(line)
    if out:
        print(f"check_one_judgement: {len(out)} finding(s): verdicts are decided in result/judgement.hpp "
              "and read through typed views (ARCHITECTURE.md)")
        return 1
    print(f"check_one_judgement: clean ({lookups} string-key lookups in reports/, budget {BUDGET})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
