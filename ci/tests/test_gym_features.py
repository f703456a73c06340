"""`make gym` reuses what `make test`'s workspace build compiled.

maturin builds polycc-gym alone, and cargo resolves dependency features over the packages it
builds: any shared dependency whose features differ from the workspace build's (cargo test
--workspace) is compiled again, with everything above it. onnx/gym/Cargo.toml pins those features;
this test fails when a new dependency anywhere in the workspace makes a pin stale."""
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What only the wheel turns on (pyproject.toml: python + pyo3/extension-module), and
# polycc-algorithms, whose `toy` feature only the workspace's tests register (a small crate).
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


def test_the_wheel_build_resolves_shared_dependencies_as_the_workspace_does():
    workspace = units("normal,build,dev", "--workspace")
    wheel = units("normal,build", "-p", "polycc-gym", "--features", "python,pyo3/extension-module")
    rebuilt = sorted(f"{name} {rest}" for name, rest in wheel - workspace if name not in WHEEL_ONLY)
    assert not rebuilt, ("make gym would compile these a second time (features differ from the workspace "
                         "build): pin their features in onnx/gym/Cargo.toml\n" + "\n".join(rebuilt))

