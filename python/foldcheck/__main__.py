"""The `foldcheck` command of an installed package: runs the C++ program shipped in it
(foldcheck/bin/foldcheck) with the same arguments, its built-in Python engines run by this
interpreter (FOLDCHECK_PYTHON) unless the environment says otherwise."""
import os
import sys

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def main():
    program = os.path.join(_PACKAGE, "bin", "foldcheck")
    if not os.access(program, os.X_OK):
        sys.exit(f"foldcheck: the program {program} is missing from this installation")
    os.environ.setdefault("FOLDCHECK_PYTHON", sys.executable)
    os.execv(program, [program, *sys.argv[1:]])


if __name__ == "__main__":
    main()
