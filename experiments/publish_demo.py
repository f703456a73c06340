#!/usr/bin/env python3
"""Put a `make demo` run into the README: its summary block, date, commit and per-second picture.

    python3 experiments/publish_demo.py [RESULT_DIR]     (also `make publish-demo`)

RESULT_DIR is a results/kernel-demo/<timestamp>-vm folder (default: the newest). The README's
"A first result" holds the run between the markers `<!-- make demo: begin -->` and
`<!-- make demo: end -->`; this replaces what is between them with the run's own report.md
summary (as `experiments/run` wrote it, not retyped), names the command, date and commit, and
copies the run's goodput-per-second-base.png to docs/figures/demo-<commit>-goodput-per-second.png.
The words around the markers (what the numbers mean) stay the author's: read them again after
publishing a new run.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- make demo: begin -->", "<!-- make demo: end -->"
PICTURE = "goodput-per-second-base.png"


class PublishError(Exception):
    pass


def newest_run(results: Path) -> Path:
    runs = sorted(p for p in (results / "kernel-demo").glob("*-vm") if (p / "report.md").is_file())
    if not runs:
        raise PublishError(f"no make demo run under {results / 'kernel-demo'}: run `make demo` first")
    return runs[-1]


def demo_block(run: Path) -> tuple[str, str, str, str]:
    """(command, date, commit, summary) of a run folder."""
    report = (run / "report.md").read_text()
    m = re.search(r"^Command: `([^`]+)`, run (\d{4}-\d\d-\d\d \d\d:\d\d)$", report, re.M)
    if not m:
        raise PublishError(f"{run / 'report.md'}: no `Command: ..., run DATE` line (not written by experiments/run?)")
    summary = re.search(r"^## Demo summary: [^\n]*\n\n```\n(.*?)\n```$", report, re.M | re.S)
    if not summary:
        raise PublishError(f"{run / 'report.md'}: no demo summary (is this a demo scenario's run?)")
    try:
        commit = json.loads((run / "config.json").read_text())["commit"][:7]
    except (OSError, KeyError, ValueError) as e:
        raise PublishError(f"{run / 'config.json'}: no commit ({e})") from e
    if not (run / PICTURE).is_file():
        raise PublishError(f"{run / PICTURE} missing")
    return m.group(1), m.group(2), commit, summary.group(1)


def render(command: str, date: str, commit: str, summary: str, figure: str) -> str:
    return "\n".join([
        BEGIN,
        f"The newest `make demo` run: {date} UTC at {commit}. Its `report.md` (command",
        f"`{command}`, which `make demo` runs):",
        "",
        "```",
        summary,
        "```",
        "",
        f"![make demo, {date}: per-second goodput, one line per repetition]({figure})",
        END,
    ])


def publish(run: Path, readme: Path, figures: Path) -> Path:
    """Rewrite `readme`'s demo block from `run`; returns the copied picture."""
    command, date, commit, summary = demo_block(run)
    text = readme.read_text()
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise PublishError(f"{readme}: needs one {BEGIN} ... {END} pair around the demo's block")
    figures.mkdir(parents=True, exist_ok=True)
    picture = figures / f"demo-{commit}-goodput-per-second.png"
    shutil.copyfile(run / PICTURE, picture)
    relative = picture.relative_to(readme.parent) if picture.is_relative_to(readme.parent) else picture
    start, end = text.index(BEGIN), text.index(END) + len(END)
    readme.write_text(text[:start] + render(command, date, commit, summary, str(relative)) + text[end:])
    return picture


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="experiments/publish_demo.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("run", nargs="?", type=Path, help="a results/kernel-demo/<timestamp>-vm folder (default: the newest)")
    ap.add_argument("--readme", type=Path, default=ROOT / "README.md")
    ap.add_argument("--figures", type=Path, default=ROOT / "docs" / "figures")
    a = ap.parse_args(argv)
    try:
        run = a.run or newest_run(ROOT / "results")
        picture = publish(run, a.readme, a.figures)
    except (PublishError, OSError) as e:
        print(f"publish_demo: {e}", file=sys.stderr)
        return 1
    print(f"{a.readme}: the demo block now shows {run}; picture {picture}. Reread the text around it.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
