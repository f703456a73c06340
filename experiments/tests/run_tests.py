#!/usr/bin/env python3
"""Run the experiment runner's tests (unittest) and close with `experiments runner: N passed, M failed`,
the line `make test`'s summary counts. Run from anywhere: `python3 experiments/tests/run_tests.py`."""

import io
import re
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # `runner` and `tests` as packages

suite = unittest.defaultTestLoader.discover(str(HERE), top_level_dir=str(HERE.parent))
out = io.StringIO()
result = unittest.TextTestRunner(stream=out, verbosity=2).run(suite)
# unittest's own closing lines (`Ran N tests`, `OK`) would be counted by ci/summarize.py beside
# the line below: keep every other line, so each test counts once.
summary = re.compile(r"^(Ran \d+ tests? in |OK$|OK \(|FAILED \()")
sys.stdout.write("".join(line for line in out.getvalue().splitlines(True) if not summary.match(line)))
failed = len(result.failures) + len(result.errors)
skipped = len(result.skipped)
print(f"experiments runner: {result.testsRun - failed - skipped} passed, {failed} failed")
sys.exit(1 if failed else 0)
