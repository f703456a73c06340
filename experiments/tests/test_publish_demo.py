"""experiments/publish_demo.py: the README's demo block comes from a run's own report, not typed."""
import json
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import publish_demo  # noqa: E402

REPORT = """# kernel-demo (vm backend)

Command: `experiments/run --backend vm demo`, run 2026-11-27 09:30

## Demo summary: base

```
scheme             rep 1   rep 2   rep 3   median
fused              18.61   18.40   17.90    18.40
```
"""


def fake_run(root: Path, report: str = REPORT) -> Path:
    run = root / "results" / "kernel-demo" / "20261127-093000-vm"
    run.mkdir(parents=True)
    (run / "report.md").write_text(report)
    (run / "config.json").write_text(json.dumps({"commit": "0123456789abcdef"}))
    (run / publish_demo.PICTURE).write_bytes(b"\x89PNG fake")
    return run


class PublishDemoTest(unittest.TestCase):
    def test_the_block_between_the_markers_is_the_runs_summary(self):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            run = fake_run(root)
            readme = root / "README.md"
            readme.write_text(f"# x\n\nbefore\n\n{publish_demo.BEGIN}\nold table\n{publish_demo.END}\n\nafter\n")
            picture = publish_demo.publish(publish_demo.newest_run(root / "results"), readme, root / "docs" / "figures")
            text = readme.read_text()
            self.assertEqual(picture.name, "demo-0123456-goodput-per-second.png")
            self.assertEqual(picture.read_bytes(), b"\x89PNG fake")
            self.assertNotIn("old table", text)
            self.assertIn("The newest `make demo` run: 2026-11-27 09:30 UTC at 0123456.", text)
            self.assertIn("`experiments/run --backend vm demo`", text)
            self.assertIn("fused              18.61   18.40   17.90    18.40\n```", text)
            self.assertIn("](docs/figures/demo-0123456-goodput-per-second.png)\n" + publish_demo.END, text)
            self.assertTrue(text.startswith("# x\n\nbefore\n\n") and text.endswith("\n\nafter\n"), text)
            # Again: the same text (the markers stay, nothing doubles).
            publish_demo.publish(run, readme, root / "docs" / "figures")
            self.assertEqual(readme.read_text(), text)

    def test_what_it_cannot_publish_is_refused_with_the_reason(self):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            readme = root / "README.md"
            readme.write_text("no markers\n")
            with self.assertRaisesRegex(publish_demo.PublishError, "no make demo run"):
                publish_demo.newest_run(root / "results")
            run = fake_run(root)
            with self.assertRaisesRegex(publish_demo.PublishError, "needs one <!-- make demo: begin -->"):
                publish_demo.publish(run, readme, root / "figures")
            (run / "report.md").write_text(REPORT.replace("## Demo summary", "## Other"))
            with self.assertRaisesRegex(publish_demo.PublishError, "no demo summary"):
                publish_demo.publish(run, readme, root / "figures")

    def test_the_readme_holds_one_published_block(self):
        text = (publish_demo.ROOT / "README.md").read_text()
        self.assertEqual((text.count(publish_demo.BEGIN), text.count(publish_demo.END)), (1, 1))
        block = text[text.index(publish_demo.BEGIN):text.index(publish_demo.END)]
        self.assertRegex(block, r"The newest `make demo` run: \d{4}-\d\d-\d\d \d\d:\d\d UTC at [0-9a-f]{7}\.")
        figure = block.split("](")[-1].split(")")[0]
        self.assertTrue((publish_demo.ROOT / figure).is_file(), figure)


if __name__ == "__main__":
    unittest.main()
