"""ci/summarize.py: make test's closing count takes every runner's own summary line."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from summarize import count  # noqa: E402


def test_pytest_quiet_and_banner_lines_both_count():
    # make test runs pytest -q: the closing line has no "=" banners (until 2026-12-03 it went uncounted).
    assert count(["17 passed in 5.66s\n"]) == (17, 0)
    assert count(["==== 3 failed, 61 passed, 2 skipped in 27.39s (0:00:27) ====\n"]) == (61, 3)
    assert count(["1 passed, 1 error in 0.10s\n"]) == (1, 1)


def test_other_runners_lines_are_not_read_as_pytest():
    lines = ["test result: ok. 51 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 2.23s\n",
             "Ran 12 tests in 0.300s\n", "OK\n", "e2e: 54 passed, 0 failed\n",
             "    Finished `ci` profile [optimized + debuginfo] target(s) in 0.55s\n"]
    assert count(lines) == (51 + 12 + 54, 0)
