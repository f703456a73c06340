#!/usr/bin/env python3
"""Sum the test counts of every log `make test` wrote and print one closing line.

Counts cargo's `test result: ok. N passed; M failed` lines, pytest's closing line
(`=== N passed, M failed, K skipped in 3.2s ===`), unittest's (`Ran N tests` then `OK` or
`FAILED (failures=F, errors=E)`) and the project's own `<name>: N passed, M failed` lines
(datapath validator, module builds, vm harness, e2e).
Exits non-zero if anything failed or if no test ran at all.
"""
import re
import sys

CARGO = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed")
OURS = re.compile(r"^[\w -]+: (\d+) passed, (\d+) failed$")
# pytest's closing line: between "=" banners, or bare under -q (`17 passed in 5.66s`), as make test runs it.
PYTEST = re.compile(r"^(?:=+ )?((?:\d+ \w+)(?:, \d+ \w+)*) in [\d.]+s(?: \([\d:]+\))?(?: =+)?$")
UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in ")
UNITTEST_FAILED = re.compile(r"^FAILED \((.*)\)$")


def pytest_counts(summary: str) -> tuple[int, int]:
    """`5 passed, 1 failed, 2 skipped` -> (5, 1); errors count as failures."""
    counts = dict((word, int(n)) for n, word in re.findall(r"(\d+) (\w+)", summary))
    return counts.get("passed", 0), counts.get("failed", 0) + counts.get("errors", 0) + counts.get("error", 0)


def count(lines) -> tuple[int, int]:
    passed = failed = 0
    ran = None  # a unittest run waiting for its OK / FAILED line
    for raw in lines:
        line = raw.strip()
        if m := CARGO.match(line) or OURS.match(line):
            passed += int(m.group(1))
            failed += int(m.group(2))
        elif m := PYTEST.match(line):
            p, f = pytest_counts(m.group(1))
            passed += p
            failed += f
        elif m := UNITTEST_RAN.match(line):
            ran = int(m.group(1))
        elif ran is not None and line.startswith("OK"):
            passed += ran
            ran = None
        elif ran is not None and (m := UNITTEST_FAILED.match(line)):
            bad = sum(int(n) for n in re.findall(r"(?:failures|errors)=(\d+)", m.group(1)))
            passed += ran - bad
            failed += bad
            ran = None
    return passed, failed


def main(paths: list[str]) -> int:
    passed = failed = 0
    for path in paths:
        with open(path, errors="replace") as f:
            p, fl = count(f)
        passed += p
        failed += fl
    print(f"tests: {passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
