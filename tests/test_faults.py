"""test_faults.py - runs the fault matrix, tests/faults/test_faults.py (ctest
globs only tests/test_*.py at the top level)."""
import os
import runpy
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.argv[0] = os.path.join(here, "faults", "test_faults.py")
    runpy.run_path(sys.argv[0], run_name="__main__")
