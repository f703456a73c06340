#!/usr/bin/env python3
"""Run the experiment runner's tests (unittest) and close with `experiments runner: N passed, M failed`,
the line `make test`'s summary counts. Run from anywhere: `python3 experiments/tests/run_tests.py`."""

import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # `runner` and `tests` as packages

suite = unittest.defaultTestLoader.discover(str(HERE), top_level_dir=str(HERE.parent))
result = unittest.TextTestRunner(verbosity=2).run(suite)
failed = len(result.failures) + len(result.errors)
skipped = len(result.skipped)
print(f"experiments runner: {result.testsRun - failed - skipped} passed, {failed} failed")
sys.exit(1 if failed else 0)
