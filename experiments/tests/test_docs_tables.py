"""Every results table in the README and docs/ names the command and the date that made it
(issue 20: "every result table there names the command and date that made it")."""
import re
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
# A command in backticks: one of the project's entry points.
COMMAND = re.compile(r"`[^`]*\b(make|experiments/run|cargo|python3|polycc[\w-]*)\b[^`]*`")
# A results table: at least this many measured figures (decimals or percentages) in its body.
FIGURES = 3
ABOVE, BELOW = 8, 4


def tables(text: str):
    """(first line number, header row, body rows) of each markdown table."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].startswith("|"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            yield i, lines, j
            i = j
        else:
            i += 1


def unnamed_result_tables(path: Path) -> list[str]:
    out = []
    for start, lines, end in tables(path.read_text()):
        header, body = lines[start], " ".join(lines[start + 2:end])
        # Tables of what tests assert describe checks, not results.
        if "asserts" in header or len(re.findall(r"\d+\.\d+|\d+ ?%", body)) < FIGURES:
            continue
        around = "\n".join(lines[max(0, start - ABOVE):start] + lines[end:end + BELOW])
        missing = [what for what, rx in (("a date", DATE), ("a command", COMMAND)) if not rx.search(around)]
        if missing:
            shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            out.append(f"{shown}:{start + 1}: no {' or '.join(missing)} within "
                       f"{ABOVE} lines above or {BELOW} below")
    return out


class DocsTablesTest(unittest.TestCase):
    def test_every_results_table_names_its_command_and_date(self):
        docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
        problems = [p for d in docs for p in unnamed_result_tables(d)]
        self.assertEqual(problems, [])

    def test_the_check_finds_an_unnamed_table_and_passes_a_named_one(self):
        import tempfile
        table = "| scheme | goodput |\n|---|---|\n| a | 1.25 |\n| b | 2.50 |\n| c | 3.75 |\n"
        with tempfile.NamedTemporaryFile("w", suffix=".md") as f:
            f.write("Results:\n\n" + table)
            f.flush()
            self.assertEqual(len(unnamed_result_tables(Path(f.name))), 1)
            f.seek(0)
            f.write("From `experiments/run matrix`, 2026-11-26:\n\n" + table)
            f.truncate()
            f.flush()
            self.assertEqual(unnamed_result_tables(Path(f.name)), [])


if __name__ == "__main__":
    unittest.main()
