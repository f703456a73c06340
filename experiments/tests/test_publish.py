"""experiments/publish.py: results blocks in the README and docs/ are the reports of the runs kept in
docs/results, rebuilt by command, not typed; a block edited by hand or gone stale is found."""
import contextlib
import io
import json
import re
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import publish  # noqa: E402

DEMO = publish.KEPT / "demo"


def fake_demo_run(root: Path) -> Path:
    """A make demo run folder made from the kept demo's runs (as experiments/run leaves one)."""
    run = root / "results" / "kernel-demo" / json.loads((DEMO / "kept.json").read_text())["stamp"]
    (run / "runs").mkdir(parents=True)
    shutil.copyfile(DEMO / "config.json", run / "config.json")
    for p in (DEMO / "runs").iterdir():
        if p.name.endswith(".csv.gz"):
            import gzip

            (run / "runs" / p.name[:-3]).write_bytes(gzip.decompress(p.read_bytes()))
        else:
            shutil.copyfile(p, run / "runs" / p.name)
    (run / publish.DEMO_PICTURE).write_bytes(b"\x89PNG fake")
    return run


class PublishTest(unittest.TestCase):
    def test_every_results_block_in_the_repository_is_its_runs_report(self):
        with contextlib.redirect_stdout(io.StringIO()) as out:
            rc = publish.main(["--check"])
        self.assertEqual(rc, 0, out.getvalue())
        readme = (publish.ROOT / "README.md").read_text()
        self.assertIn("<!-- results: demo demo -->", readme)

    def test_a_kept_demo_run_becomes_the_block_and_a_hand_edit_is_found(self):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            kept, docs = root / "docs" / "results", root / "docs"
            docs.mkdir()
            picture = publish.keep_demo(publish.newest_demo(fake_demo_run(root).parents[1]), kept)
            commit = json.loads((DEMO / "config.json").read_text())["commit"][:7]
            self.assertEqual(picture, docs / "figures" / f"demo-{commit}-goodput-per-second.png")
            self.assertTrue((kept / "demo" / "runs").is_dir())
            self.assertFalse(list((kept / "demo" / "runs").glob("*.csv")), "series are kept gzipped")
            readme = root / "README.md"
            readme.write_text("# x\n\nbefore\n\n<!-- results: demo demo -->\nold\n<!-- results: end -->\n\nafter\n")
            text, changed = publish.rebuild(readme, kept)
            self.assertEqual(changed, ["README.md: results block demo demo"])
            self.assertNotIn("\nold\n", text)
            # The figures are the runs' own: the fused row of the report's demo summary.
            self.assertRegex(text, r"From `experiments/run [^`]*demo`, run \d{4}-\d\d-\d\d \d\d:\d\d UTC at " + commit)
            self.assertRegex(text, r"\nfused +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d")
            self.assertIn(f"](docs/figures/demo-{commit}-goodput-per-second.png)\n<!-- results: end -->", text)
            self.assertTrue(text.startswith("# x\n\nbefore\n\n") and text.endswith("\n\nafter\n"), text)
            readme.write_text(text)
            self.assertEqual(publish.rebuild(readme, kept), (text, []))  # rebuilt again: unchanged
            # A figure typed over is found.
            row = next(line for line in text.split("\n") if line.startswith("fused "))
            readme.write_text(text.replace(row, row.replace(row.split()[1], "99.99", 1)))
            self.assertEqual(publish.rebuild(readme, kept)[1], ["README.md: results block demo demo"])
            # A table block in a docs page: the results table, paths relative to the page.
            page = docs / "page.md"
            page.write_text("<!-- results: demo table -->\n<!-- results: end -->\n")
            table, _ = publish.rebuild(page, kept)
            self.assertIn("kept in `results/demo`", table)
            self.assertIn("| cell | scheme | runs | goodput (Mbit/s) |", table)
            self.assertIn("| base | fused | 3/3 |", table)

    def test_a_run_from_a_tree_with_uncommitted_changes_says_so(self):
        with tempfile.TemporaryDirectory() as d:
            run = Path(d) / "run"
            run.mkdir()
            report = "Command: `experiments/run x.toml`, run 2026-11-27 07:34\n"
            for dirty, said in ((False, "at 032adb9 (runs"), (True, "at 032adb9 with uncommitted changes (runs")):
                (run / "config.json").write_text(json.dumps({"commit": "032adb9" + "0" * 33, "dirty": dirty}))
                self.assertIn(said, publish.origin(run, report, Path(d) / "page.md"))

    def test_a_benchmarks_table_is_kept_and_shown_as_it_wrote_it(self):
        import results_table

        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            kept, docs = root / "docs" / "results", root / "docs"
            docs.mkdir()
            written = results_table.write(root / "t.json", ["flows", "CPU ratio"], [[1, "0.71"], [8, "1.11"]],
                                          ["load 0.8-2.1"], command="python3 bench.py --table t.json")
            publish.keep_table(written, "bench", kept)
            page = docs / "page.md"
            page.write_text("<!-- results: bench json -->\n<!-- results: end -->\n")
            text, changed = publish.rebuild(page, kept)
            self.assertEqual(changed, ["page.md: results block bench json"])
            self.assertIn("From `python3 bench.py --table t.json`, run ", text)
            self.assertIn("(kept in `results/bench/table.json`)", text)
            self.assertIn("| flows | CPU ratio |\n|---|---|\n| 1 | 0.71 |\n| 8 | 1.11 |\n\nload 0.8-2.1\n", text)
            page.write_text(text.replace("| 8 | 1.11 |", "| 8 | 0.99 |"))
            self.assertEqual(publish.rebuild(page, kept)[1], ["page.md: results block bench json"])
            (root / "bad.json").write_text('{"command": "x", "run_utc": "y", "commit": "z", "columns": ["a"], "rows": [[1, 2]]}')
            with self.assertRaisesRegex(publish.PublishError, "every row needs 1 cells"):
                publish.keep_table(root / "bad.json", "bad", kept)

    def test_a_matrix_kept_in_pieces_publishes_as_the_one_table_of_the_whole(self):
        whole = publish.KEPT / "matrix-quick-fc6652b"
        config = json.loads((whole / "config.json").read_text())
        with tempfile.TemporaryDirectory() as d:
            kept = Path(d) / "docs" / "results"
            halves = (config["cells"][:1], config["cells"][1:])
            for i, cells in enumerate(halves):
                piece = kept / f"piece{i}"
                for sub in ("runs", "sim/runs"):
                    (piece / sub).mkdir(parents=True)
                    for f in (whole / sub).iterdir():
                        if f.name.split("__")[0] in cells:
                            shutil.copyfile(f, piece / sub / f.name)
                shutil.copyfile(whole / "kept.json", piece / "kept.json")
                (piece / "config.json").write_text(json.dumps({**config, "cells": cells}))
                self.assertEqual([c.key for c in publish.cli.load_folder(piece).sc.cells()], cells)
            pieces = [kept / "piece0", kept / "piece1"]
            self.assertTrue(publish.pieces_of(pieces))
            self.assertEqual(publish.summary(pieces, True), publish.summary([whole], False))
            page = Path(d) / "docs" / "page.md"
            page.write_text("<!-- results: piece0+piece1 matrix -->\n<!-- results: end -->\n")
            text, _ = publish.rebuild(page, kept)
            self.assertIn("; and from `experiments/run", text)
            self.assertEqual(text.count("### Matrix"), 1)
            for cell in config["cells"]:
                self.assertEqual(text.count(f"### {cell}:"), 1, cell)
            # A summary of the pieces sits under one heat map of the whole, drawn once per set of pieces.
            page.write_text("<!-- results: piece0+piece1 summary -->\n<!-- results: end -->\n")
            joined, _ = publish.rebuild(page, kept)
            pics = re.findall(r"!\[guest / simulator per scheme and cell, all 2 pieces \(1 = parity\)\]\((\S+)\)", joined)
            self.assertEqual(len(pics), 1, joined)
            picture = page.parent / pics[0]
            self.assertTrue(picture.is_file() and picture.read_bytes().startswith(b"\x89PNG"), picture)
            self.assertEqual(picture.parent, kept.parent / "figures")
            self.assertEqual(publish.rebuild(page, kept)[0], joined, "the same pieces: the same picture")
            # Two runs that share some cells but not all are neither pieces nor runs side by side.
            (kept / "piece1" / "config.json").write_text(json.dumps({**config, "cells": config["cells"]}))
            with self.assertRaisesRegex(publish.PublishError, "neither share their cells"):
                publish.summary(pieces, publish.pieces_of(pieces))

    def test_what_it_cannot_publish_is_refused_with_the_reason(self):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            with self.assertRaisesRegex(publish.PublishError, "no make demo run"):
                publish.newest_demo(root / "results")
            with self.assertRaisesRegex(publish.PublishError, "not a results folder"):
                publish.keep(root, "x", root / "kept")
            page = root / "page.md"
            page.write_text("<!-- results: nothing table -->\n<!-- results: end -->\n")
            with self.assertRaisesRegex(publish.PublishError, "no kept run"):
                publish.rebuild(page, root / "kept")
            page.write_text("a page may quote `<!-- results: NAME PART -->` and `<!-- results: end -->`\n")
            self.assertEqual(publish.rebuild(page, root / "kept")[1], [])
            page.write_text("<!-- results: demo plots -->\n<!-- results: end -->\n")
            with self.assertRaisesRegex(publish.PublishError, "malformed"):
                publish.rebuild(page, publish.KEPT)


if __name__ == "__main__":
    unittest.main()
