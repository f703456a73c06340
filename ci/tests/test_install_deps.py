"""ci/install-deps.sh, the set-up shared by .ci/run and the Makefile's deps targets, and its
requirements check (python3 -m pytest ci/tests)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "ci" / "install-deps.sh"
sys.path.insert(0, str(ROOT / "ci"))
import unmet_requirements  # noqa: E402

# What the script itself runs, linked into a bare PATH that lacks every dependency it checks.
TOOLS = ["bash", "env", "dirname", "id", "awk", "sort", "head", "cut", "dpkg", "python3", "echo", "printf"]


def dry_run(profile: str, path: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), "--dry-run", profile], capture_output=True, text=True, timeout=60,
                          env={"PATH": path, "HOME": str(home)})


def bare_path(tmp_path: Path) -> Path:
    """A PATH folder holding only the basic TOOLS the script's checks run: no cargo, clang or make."""
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        if found:
            (bare / tool).symlink_to(found)
    return bare


def test_version_key_takes_the_numeric_release():
    assert unmet_requirements.version_key("2.4.1+cpu") == (2, 4, 1)
    assert unmet_requirements.version_key("1.26rc1") == (1, 26)
    assert unmet_requirements.version_key("1.10") > unmet_requirements.version_key("1.9")


def test_unmet_lists_missing_and_too_old_only():
    lines = ["# a comment", "", "pytest>=1.0", "pytest>=999", "no-such-distribution-polycc", "pytest  # why"]
    assert unmet_requirements.unmet(lines, "t") == ["pytest>=999", "no-such-distribution-polycc"]


def test_unmet_refuses_what_it_cannot_judge():
    with pytest.raises(ValueError, match=r"t:1: unsupported requirement 'torch==2\.4'"):
        unmet_requirements.unmet(["torch==2.4"], "t")


def test_the_projects_requirements_are_all_understood():
    for name in ["experiments/requirements.txt", "onnx/requirements.txt"]:
        unmet_requirements.unmet((ROOT / name).read_text().splitlines(), name)


def test_dry_run_on_a_bare_machine_lists_apt_rust_and_pip(tmp_path):
    bare = bare_path(tmp_path)
    run = dry_run("demo", str(bare), tmp_path)
    assert run.returncode == 1, run.stderr
    apt = next(line for line in run.stdout.splitlines() if line.startswith("demo: missing apt: "))
    for package in ["make", "gcc", "clang", "pkg-config", "curl"]:
        assert package in apt.split(), apt
    assert "demo: missing rust >= 1.85 (rustup, into ~/.cargo)" in run.stdout
    # pip, numpy and friends are judged by the python3 linked in; an apt line names pip if absent.
    assert "installing" not in run.stdout


def test_dry_run_build_asks_no_python_packages(tmp_path):
    run = dry_run("build", os.environ["PATH"], Path.home())
    assert "pip:" not in run.stdout


def test_only_the_fuzz_profile_asks_nightly_and_cargo_fuzz(tmp_path):
    # make test replays the agent's fuzz checks on stable (agent/tests/fuzz_replay.rs); only make fuzz
    # runs cargo-fuzz, whose nightly toolchain and build cost a cold CI run 7-8 minutes.
    bare = bare_path(tmp_path)
    test, fuzz = dry_run("test", str(bare), tmp_path), dry_run("fuzz", str(bare), tmp_path)
    assert "nightly" not in test.stdout and "cargo-fuzz" not in test.stdout, test.stdout
    assert "fuzz: missing rust nightly (rustup)" in fuzz.stdout, fuzz.stdout
    assert "fuzz: missing cargo-fuzz (cargo install)" in fuzz.stdout, fuzz.stdout


def test_after_set_up_nothing_is_missing():
    # make test ran ci/install-deps.sh test first: its dry run must now find nothing to do.
    run = dry_run("test", os.environ["PATH"], Path.home())
    assert (run.returncode, run.stdout.strip()) == (0, "test: nothing missing"), run.stdout + run.stderr


@pytest.mark.parametrize("args", [["tests"], [], ["build", "demo"]])
def test_bad_arguments_are_refused_with_usage(args):
    run = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "ci/install-deps.sh" in run.stderr
