#!/usr/bin/env python3
"""Sum the test counts of every log `make test` wrote and print one closing line.

Counts cargo's `test result: ok. N passed; M failed` lines and the project's own
`<name>: N passed, M failed` lines (datapath validator, module builds, vm harness, e2e).
Exits non-zero if anything failed or if no test ran at all.
"""
import re
import sys

CARGO = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed")
OURS = re.compile(r"^[\w -]+: (\d+) passed, (\d+) failed$")


def main(paths: list[str]) -> int:
    passed = failed = 0
    for path in paths:
        with open(path, errors="replace") as f:
            for line in f:
                m = CARGO.match(line) or OURS.match(line.strip())
                if m:
                    passed += int(m.group(1))
                    failed += int(m.group(2))
    print(f"tests: {passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
