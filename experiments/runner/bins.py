"""Where polycc's binaries are: POLYCC_BIN_DIR, else target/release.

`make` exports POLYCC_BIN_DIR for the profile it builds (release; ci under `make test`, which builds
everything once: Cargo.toml's [profile.ci]), and polycc-vm passes it into the guest. Every script
that runs polycc-portus, polycc-sim or polycc-ipc-baseline finds them here. Standard library only:
the guest imports it.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def bin_dir() -> Path:
    return Path(os.environ.get("POLYCC_BIN_DIR") or ROOT / "target" / "release")


def bin_path(name: str) -> Path:
    """A polycc binary by name, e.g. bin_path("polycc-portus")."""
    return bin_dir() / name
