#!/usr/bin/env python3
"""Print the requirements (one per line, as written) that the installed Python distributions do not
meet: not installed, or older than the `>=` minimum. ci/install-deps.sh calls pip only when this
prints something, so a machine with everything installed needs no network.

Only what the project's requirements files use is understood: `name`, `name>=version`, comments.
Anything else is an error, so a new form of requirement cannot be silently taken as met.
"""
import re
import sys
from importlib import metadata

REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:>=\s*([0-9][0-9A-Za-z.]*))?$")


def version_key(version: str) -> tuple[int, ...]:
    """`2.4.1+cpu` -> (2, 4, 1); `1.26rc1` -> (1, 26): the numeric release part only."""
    key = []
    for part in version.split("+")[0].split("."):
        digits = re.match(r"\d+", part)
        if not digits:
            break
        key.append(int(digits.group()))
        if digits.group() != part:
            break
    return tuple(key)


def unmet(lines: list[str], origin: str) -> list[str]:
    out = []
    for number, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = REQUIREMENT.match(line)
        if not m:
            raise ValueError(f"{origin}:{number}: unsupported requirement {line!r} (use name or name>=version)")
        name, minimum = m.groups()
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            out.append(line)
            continue
        if minimum and version_key(have) < version_key(minimum):
            out.append(line)
    return out


def main(paths: list[str]) -> int:
    if not paths:
        print("usage: unmet_requirements.py REQUIREMENTS.txt...", file=sys.stderr)
        return 2
    try:
        for path in paths:
            with open(path) as f:
                for line in unmet(f.read().splitlines(), path):
                    print(line)
    except (OSError, ValueError) as e:
        print(f"unmet_requirements.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
