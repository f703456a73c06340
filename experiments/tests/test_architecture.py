"""ARCHITECTURE.md stays true: its crate graph is the workspace's, and the rules it states hold in
the sources (the binaries' flags crate imported by binaries only; no I/O or clock in the
algorithms outside the model file's boundary)."""

import json
import re
import shutil
import subprocess
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "ARCHITECTURE.md"


def documented_graph():
    """The ```text block of ARCHITECTURE.md: `crate: dep dep ...` per line."""
    block = re.search(r"```text\n(.*?)```", DOC.read_text(), re.S).group(1)
    graph = {}
    for line in block.strip().splitlines():
        name, _, deps = line.partition(":")
        graph[name.strip()] = set(deps.split())
    return graph


def strip_tests(source):
    """A Rust file without its test module (by convention the last item, after `#[cfg(test)]`)."""
    return source.split("#[cfg(test)]")[0]


@unittest.skipUnless(shutil.which("cargo"), "needs cargo")
class CrateGraph(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        out = subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
        cls.packages = json.loads(out)["packages"]

    def test_the_documented_graph_is_the_workspaces(self):
        actual = {p["name"]: {d["name"] for d in p["dependencies"]
                              if d["name"].startswith("polycc-") and d["kind"] is None}
                  for p in self.packages}
        self.assertEqual(documented_graph(), actual)

    def test_the_algorithms_depend_on_no_other_polycc_crate_and_the_graph_has_no_cycle(self):
        graph = documented_graph()
        self.assertEqual(graph["polycc-algorithms"], set())
        done, path = set(), []

        def visit(node):
            self.assertNotIn(node, path, f"cycle: {path + [node]}")
            if node in done:
                return
            path.append(node)
            for dep in graph[node]:
                visit(dep)
            path.pop()
            done.add(node)

        for node in graph:
            visit(node)

    def test_every_crate_sits_where_the_layout_table_says(self):
        table = DOC.read_text()
        for p in self.packages:
            where = str(Path(p["manifest_path"]).parent.relative_to(ROOT))
            row = f"| `{where}/` | `{p['name']}` |"
            self.assertTrue(row in table, f"ARCHITECTURE.md's layout table has no row {row}")


class SourceRules(unittest.TestCase):
    def test_the_flags_and_man_page_crates_are_imported_by_binaries_only(self):
        binary = re.compile(r"(src/main\.rs|src/bin/|benches/|tests/|agent/args/|agent/clidoc/)")
        offenders = []
        for f in ROOT.glob("**/*.rs"):
            rel = f.relative_to(ROOT).as_posix()
            if rel.startswith("target/") or "/target/" in rel or binary.search(rel):
                continue
            if re.search(r"polycc_args|polycc_clidoc", f.read_text()):
                offenders.append(rel)
        self.assertEqual(offenders, [], "library code importing polycc_args or polycc_clidoc (binaries only)")

    def test_no_io_or_clock_in_the_algorithms_but_the_model_file(self):
        forbidden = re.compile(r"std::fs|std::net|SystemTime|Instant::now|std::thread")
        offenders = []
        for f in (ROOT / "algorithms" / "src").rglob("*.rs"):
            if f.name == "tests.rs" or f.name == "model_file.rs":
                continue
            if forbidden.search(strip_tests(f.read_text())):
                offenders.append(f.relative_to(ROOT).as_posix())
        self.assertEqual(offenders, [])


if __name__ == "__main__":
    unittest.main()
