"""experiments/run's help and flag errors need only the standard library (issue 20: `--help`
asked for matplotlib first)."""

import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

RUN = Path(__file__).resolve().parents[1] / "run"


class HelpWithoutPackages(unittest.TestCase):
    def run_without(self, *args):
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("matplotlib", "numpy", "tqdm"):  # shadow the packages with failing imports
                Path(tmp, f"{name}.py").write_text("raise ImportError('hidden by the test')\n")
            env = dict(os.environ, PYTHONPATH=tmp)
            return subprocess.run([sys.executable, str(RUN), *args], capture_output=True, text=True, env=env)

    def test_help_and_flag_errors_work_without_the_plotting_packages(self):
        r = self.run_without("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("usage: experiments/run", r.stdout)
        r = self.run_without("--reps", "0", "demo")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--reps must be at least 1", r.stderr)

    def test_version_is_the_workspaces(self):
        r = self.run_without("--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        cargo = (RUN.parents[1] / "Cargo.toml").read_text()
        self.assertIn(f'version = "{r.stdout.split()[-1].rstrip(")")}"', cargo)
        self.assertRegex(r.stdout, r"^experiments/run \(polycc \d+\.\d+\.\d+\)$")

    def test_a_real_run_still_says_what_to_install(self):
        r = self.run_without("demo")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("pip install -r experiments/requirements.txt", r.stderr)


if __name__ == "__main__":
    unittest.main()
