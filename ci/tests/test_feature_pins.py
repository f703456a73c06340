"""`make test`'s three builds reuse one compiled copy of each shared dependency.

Cargo resolves dependency features over the packages one invocation builds: `cargo test
--workspace`, the binaries (`cargo build -p polycc-agent -p polycc-sim -p polycc-tune`) and the
wheel (maturin builds polycc-gym alone). A shared dependency whose features differ between them is
compiled again, with everything above it. ci/feature-pins/Cargo.toml pins those features; this test
fails when a new dependency anywhere in the workspace makes a pin stale."""
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What only the wheel turns on (pyproject.toml: python + pyo3/extension-module), and
# polycc-algorithms, whose `toy` feature only the workspace's tests register (our crates above it
# compile again for the binaries, without the toy: it must not ship).
WHEEL_ONLY = {"numpy", "polycc-gym", "polycc-algorithms", "pyo3", "pyo3-build-config", "pyo3-ffi",
              "pyo3-macros", "pyo3-macros-backend", "target-lexicon"}


def units(edges: str, *args: str) -> set[tuple[str, str]]:
    """(package, features) of every dependency `cargo tree -e EDGES ARGS` resolves, host and target."""
    cargo = shutil.which("cargo")
    assert cargo, "cargo is not on PATH (make deps-test installs it)"
    out = subprocess.run([cargo, "tree", "--locked", "-e", edges, "-f", "{p} [{f}]", "--prefix", "none",
                          *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=True).stdout
    rows = set()
    for line in out.splitlines():
        name, _, rest = line.replace(" (*)", "").partition(" ")
        if name:
            rows.add((name, rest))
    return rows


def rebuilt(build: set[tuple[str, str]], workspace: set[tuple[str, str]]) -> list[str]:
    return sorted(f"{name} {rest}" for name, rest in build - workspace if name not in WHEEL_ONLY)


def test_the_wheel_and_the_binaries_resolve_shared_dependencies_as_the_workspace_does():
    workspace = units("normal,build,dev", "--workspace")
    wheel = units("normal,build", "-p", "polycc-gym", "--features", "python,pyo3/extension-module")
    binaries = units("normal,build", "-p", "polycc-agent", "-p", "polycc-sim", "-p", "polycc-tune")
    for what, build in (("make gym", wheel), ("the binaries' build", binaries)):
        again = rebuilt(build, workspace)
        assert not again, (f"{what} would compile these a second time (features differ from the workspace "
                           "build): pin their features in ci/feature-pins/Cargo.toml\n" + "\n".join(again))

