#!/usr/bin/env python3
"""Results tables in the README and docs/ are rebuilt from the runs that made them, not typed.

    python3 experiments/publish.py                 rebuild every results block   (make publish-docs)
    python3 experiments/publish.py --check         exit 1 naming each block that differs from its runs
    python3 experiments/publish.py keep RUN NAME   keep a results folder's runs as docs/results/NAME
    python3 experiments/publish.py keep-table FILE NAME
                                                   keep a measured table (experiments/results_table.py,
                                                   written by a benchmark) as docs/results/NAME
    python3 experiments/publish.py demo [RUN]      keep a `make demo` run (default: the newest) as
                                                   docs/results/demo with its picture (make publish-demo)

A results block is the text between `<!-- results: NAME PART -->` and `<!-- results: end -->` in
README.md or a docs/*.md page. Its body is what `experiments/run --report` makes of the runs kept in
docs/results/NAME (their JSON, series CSVs gzipped, and the scenario as run: config.json), headed by
the command, date and commit of the run. PART picks what of the report the block shows:

    table    the results table (goodput, utilization, p95 delay, loss, ... per cell and scheme)
    demo     the demo summary (fused against its members, per rep), and its per-second picture
    matrix   the guest-against-simulator tables of a matrix run, cell by cell (NAME+NAME: of a
             matrix run in pieces, each piece's cells in turn)
    summary  a matrix run in one table: per scheme and cell, the guest's median utilization and
             guest / simulator; NAME may join kept runs of one matrix with '+': runs of the same
             cells (`bpf+ccp`) side by side, their guest medians then the first one's simulator
             figure; runs of different cells (a matrix run in pieces with `--cell`) as one table,
             under the whole matrix's guest / simulator heat map (docs/figures/NAME-heatmap-*.png,
             drawn once per set of kept pieces)
    targets  the targets and whether each was met on every rep
    json     a kept table of a benchmark or script (docs/results/NAME/table.json), as it wrote it

The words around a block (what the numbers mean) stay the author's: reread them after a rebuild.
`experiments/tests/test_publish.py` runs --check over the repository, so a block edited by hand, or a
report change that alters a kept run's table, fails `make test` until `make publish-docs` is run.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
import results_table  # noqa: E402
from runner import cli  # noqa: E402
from runner.scenario import ScenarioError  # noqa: E402

KEPT = ROOT / "docs" / "results"
FIGURES = ROOT / "docs" / "figures"
BLOCK = re.compile(r"(?<!`)<!-- results: ([\w.+-]+) (table|demo|matrix|summary|targets|json) -->\n(.*?)<!-- results: end -->", re.S)
PARTS = ("table", "demo", "matrix", "summary", "targets", "json")
DEMO_PICTURE = "goodput-per-second-base.png"
STAMP = re.compile(r"^\d{8}-\d{6}-(vm|sim)$")


class PublishError(Exception):
    pass


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def keep(run: Path, name: str, kept: Path = KEPT) -> Path:
    """Copy what `experiments/run --report` needs of `run` into kept/NAME: config.json, runs/*.json,
    the series gzipped, and a matrix's sim/runs and sim-guest-paced/runs; plus where it came from
    (kept.json)."""
    if not re.fullmatch(r"[\w.-]+", name):
        raise PublishError(f"{name!r}: a kept run's name is letters, digits, '.', '_' and '-'")
    if not (run / "config.json").is_file() or not (run / "runs").is_dir():
        raise PublishError(f"{run}: not a results folder of experiments/run (no config.json and runs/)")
    if not STAMP.match(run.name):
        raise PublishError(f"{run}: its name is not experiments/run's <date>-<time>-<backend>, so its date is unknown")
    dest = kept / name
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "runs").mkdir(parents=True)
    shutil.copyfile(run / "config.json", dest / "config.json")
    for sub in ("runs", "sim/runs", "sim-guest-paced/runs"):
        if not (run / sub).is_dir():
            continue
        (dest / sub).mkdir(parents=True, exist_ok=True)
        for p in sorted((run / sub).iterdir()):
            if p.suffix == ".json":
                shutil.copyfile(p, dest / sub / p.name)
            elif p.suffix == ".csv":
                with open(p, "rb") as src, gzip.GzipFile(dest / sub / (p.name + ".gz"), "wb", mtime=0) as dst:
                    shutil.copyfileobj(src, dst)
    (dest / "kept.json").write_text(json.dumps({"from": str(run), "stamp": run.name}, indent=2) + "\n")
    return dest


@functools.lru_cache(maxsize=None)
def report_text(kept_run: Path) -> str:
    """report.md as `experiments/run --report` writes it for the kept runs (without plots)."""
    stamp = json.loads((kept_run / "kept.json").read_text())["stamp"]
    try:
        folder = cli.load_folder(kept_run)
    except (OSError, KeyError, ValueError, ScenarioError) as e:
        raise PublishError(f"{kept_run}: cannot be read back ({e})") from e
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / stamp  # the report's date comes from the folder's name
        out.mkdir()
        with contextlib.redirect_stdout(io.StringIO()):
            path, _ = cli.folder_report(folder, out, plots=False)
        return path.read_text()


def part(report: str, which: str) -> list[str]:
    """The lines of `report` that make PART `which`."""
    lines = report.split("\n")
    if which == "table":
        start = next((i for i, s in enumerate(lines) if s.startswith("| cell | scheme | runs |")), None)
        if start is None:
            return []
        end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
        return lines[start:end]
    heading = {"demo": "## Demo summary", "matrix": "## Matrix", "targets": "## Targets"}[which]
    out: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].startswith(heading):
            j = i + 1
            while j < len(lines) and not (lines[j].startswith("## ") or lines[j].startswith("![")):
                j += 1
            # One level down, so the block sits under the page's own section.
            out += ["#" + lines[i]] + lines[i + 1:j]
            i = j
        else:
            i += 1
    while out and not out[-1].strip():
        out.pop()
    return out


def origin(run: Path, report: str, doc: Path) -> str:
    """"`COMMAND`, run DATE UTC at COMMIT (runs in `PATH`)" of a kept run."""
    m = re.search(r"^Command: `([^`]+)`, run (\d{4}-\d\d-\d\d \d\d:\d\d)$", report, re.M)
    if not m:
        raise PublishError(f"{run}: its report names no command and date")
    config = json.loads((run / "config.json").read_text())
    commit = (config.get("commit") or "unknown")[:7]
    if config.get("dirty"):
        commit += " with uncommitted changes"
    return f"`{m.group(1)}`, run {m.group(2)} UTC at {commit} (runs kept in `{os.path.relpath(run, doc.parent)}`)"


def summary(runs: list[Path], split: bool) -> list[str]:
    """The one-table matrix summary of kept matrix runs (runner.matrix.summary); `split`: the runs
    are pieces of one matrix (pieces_of)."""
    from runner import matrix

    tables = matrix_tables(runs)
    if split:
        return matrix.summary([{c: rs for t in tables for c, rs in t.items()}])
    if any(set(t) != set(tables[0]) for t in tables):
        raise PublishError(f"{' + '.join(r.name for r in runs)}: the joined runs neither share their cells "
                           "(runs side by side) nor split them (pieces of one matrix)")
    return matrix.summary(tables)


def pieces_heatmap(runs: list[Path], kept: Path) -> Path:
    """The guest / simulator heat map of a matrix kept in pieces, all cells in one picture
    (runner.matrix.heatmap), as figures/<the pieces' common name>-heatmap-<their stamps' hash>.png:
    drawn when that file is missing, so a re-kept piece gets a picture of its own."""
    from runner import matrix

    stamps = "+".join(f"{r.name}@{json.loads((r / 'kept.json').read_text()).get('stamp')}" for r in runs)
    prefix = os.path.commonprefix([r.name for r in runs]).rstrip("-_.") or "matrix"
    path = kept.parent / "figures" / f"{prefix}-heatmap-{hashlib.sha1(stamps.encode()).hexdigest()[:8]}.png"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        matrix.heatmap({c: rs for t in matrix_tables(runs) for c, rs in t.items()}, path)
    return path


def matrix_tables(runs: list[Path]) -> list[dict]:
    """Each kept matrix run's rows per cell (runner.matrix.rows)."""
    from runner import matrix

    tables = []
    for run in runs:
        f = cli.load_folder(run)
        if f.sc.kind != "matrix" or f.sim is None:
            raise PublishError(f"{run}: not a matrix run on the vm backend with its simulator runs")
        ran = {r.cell for r in f.recs}  # a quick run sweeps the quick variant's cells
        cells = list(dict.fromkeys(c.key for c in [*f.sc.cells(), *f.sc.quick_variant().cells()] if c.key in ran))
        tables.append(matrix.rows(cells, [(s.name, s.label("vm")) for s in f.sc.schemes], f.recs, f.sim))
    return tables


def pieces_of(runs: list[Path]) -> bool:
    """Kept matrix runs that split the cells between them (`experiments/run --cell`): one table."""
    seen: set[str] = set()
    for run in runs:
        cells = set(json.loads((run / "config.json").read_text()).get("cells", []))
        if seen & cells:
            return False
        seen |= cells
    return len(runs) > 1


def keep_table(path: Path, name: str, kept: Path = KEPT) -> Path:
    """Keep a measured table (results_table.py's file) as kept/NAME/table.json."""
    if not re.fullmatch(r"[\w.-]+", name):
        raise PublishError(f"{name!r}: a kept table's name is letters, digits, '.', '_' and '-'")
    try:
        doc = results_table.check(json.loads(path.read_text()))
    except (OSError, ValueError) as e:
        raise PublishError(f"{path}: not a measured table ({e})") from e
    (kept / name).mkdir(parents=True, exist_ok=True)
    (kept / name / "table.json").write_text(json.dumps(doc, indent=1) + "\n")
    return kept / name


def render_table(name: str, doc: Path, kept: Path) -> str:
    """The body of a `json` block: the kept table under its command, date and commit."""
    path = kept / name / "table.json"
    try:
        t = results_table.check(json.loads(path.read_text()))
    except (OSError, ValueError) as e:
        raise PublishError(f"{doc.name}: block {name} json: no kept table {path} ({e})") from e
    return "\n".join([f"From `{t['command']}`, run {t['run_utc']} UTC at {t['commit']} (kept in "
                      f"`{os.path.relpath(path, doc.parent)}`). `make publish-docs` rebuilds this block from it:",
                      "", *results_table.markdown(t), ""])


def render(name: str, which: str, doc: Path, kept: Path = KEPT) -> str:
    """The body of the block `<!-- results: NAME WHICH -->` in `doc`."""
    if which == "json":
        return render_table(name, doc, kept)
    runs = [kept / n for n in name.split("+")]
    for run in runs:
        if not (run / "kept.json").is_file():
            raise PublishError(f"{doc.name}: block {name} {which}: no kept run {run} "
                               f"(experiments/publish.py keep RUN {run.name})")
    split = pieces_of(runs)
    if len(runs) > 1 and not (which == "summary" or (which == "matrix" and split)):
        raise PublishError(f"{doc.name}: block {name} {which}: only a summary joins several runs, "
                           "and a matrix part the pieces of one matrix (runs of different cells)")
    reports = [report_text(run) for run in runs]
    if which == "summary":
        body = summary(runs, split)
        if split:
            pic = os.path.relpath(pieces_heatmap(runs, kept), doc.parent)
            body += ["", f"![guest / simulator per scheme and cell, all {len(runs)} pieces (1 = parity)]({pic})"]
    else:
        body = part(reports[0], which)
        for text in reports[1:]:  # the next pieces' cells under the first one's heading
            body += [""] + part(text, which)[1:]
    if not body:
        raise PublishError(f"{doc.name}: block {name} {which}: the report of {runs[0]} has no {which}")
    run = runs[0]
    m = re.search(r"^Command: `[^`]+`, run (\d{4}-\d\d-\d\d \d\d:\d\d)$", reports[0], re.M)
    commit = (json.loads((run / "config.json").read_text()).get("commit") or "unknown")[:7]
    froms = [origin(r, t, doc) for r, t in zip(runs, reports)]
    joint = "; and from " if split else "; beside it "
    lines = ["From " + joint.join(froms) + ". `make publish-docs` rebuilds this block from them:",
             "", *body, ""]
    picture = kept.parent / "figures" / f"{name}-{commit}-goodput-per-second.png"
    if which == "demo" and picture.is_file():
        pic = os.path.relpath(picture, doc.parent)
        lines += [f"![{name}, {m.group(1)}: per-second goodput, one line per repetition]({pic})", ""]
    return "\n".join(lines)


def rebuild(doc: Path, kept: Path = KEPT) -> tuple[str, list[str]]:
    """`doc`'s text with every results block rebuilt, and the blocks that changed."""
    text = doc.read_text()
    changed: list[str] = []

    def one(m: re.Match) -> str:
        body = render(m.group(1), m.group(2), doc, kept)
        if body != m.group(3):
            changed.append(f"{doc.name}: results block {m.group(1)} {m.group(2)}")
        return f"<!-- results: {m.group(1)} {m.group(2)} -->\n{body}<!-- results: end -->"

    new = BLOCK.sub(one, text)
    # Markers quoted in backticks are the page talking about blocks, not a block.
    opened = len(re.findall(r"(?<!`)<!-- results: [\w.+-]+ \w+ -->", text))
    closed = len(re.findall(r"(?<!`)<!-- results: end -->", text))
    if opened != len(BLOCK.findall(text)) or closed != opened:
        raise PublishError(f"{doc}: a results block is malformed (parts: {', '.join(PARTS)}; closed by <!-- results: end -->)")
    return new, changed


def newest_demo(results: Path) -> Path:
    runs = sorted(p for p in (results / "kernel-demo").glob("*-vm") if (p / "config.json").is_file())
    if not runs:
        raise PublishError(f"no make demo run under {results / 'kernel-demo'}: run `make demo` first")
    return runs[-1]


def keep_demo(run: Path, kept: Path = KEPT) -> Path:
    """Keep a demo run as kept/demo and its per-second picture as figures/demo-<commit>-goodput-per-second.png."""
    if not (run / DEMO_PICTURE).is_file():
        raise PublishError(f"{run / DEMO_PICTURE} missing")
    dest = keep(run, "demo", kept)
    commit = (json.loads((dest / "config.json").read_text()).get("commit") or "unknown")[:7]
    figures = kept.parent / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    picture = figures / f"demo-{commit}-goodput-per-second.png"
    shutil.copyfile(run / DEMO_PICTURE, picture)
    return picture


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="experiments/publish.py", description=__doc__.split("\n\n")[0],
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 naming each stale block")
    sub = ap.add_subparsers(dest="cmd")
    k = sub.add_parser("keep", help="keep a results folder's runs as docs/results/NAME")
    k.add_argument("run", type=Path)
    k.add_argument("name")
    t = sub.add_parser("keep-table", help="keep a benchmark's measured table as docs/results/NAME")
    t.add_argument("file", type=Path)
    t.add_argument("name")
    d = sub.add_parser("demo", help="keep a make demo run as docs/results/demo, with its picture")
    d.add_argument("run", nargs="?", type=Path, help="results/kernel-demo/<timestamp>-vm (default: the newest)")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "keep":
            print(f"kept {a.run} as {keep(a.run, a.name)}")
        elif a.cmd == "keep-table":
            print(f"kept {a.file} as {keep_table(a.file, a.name)}")
        elif a.cmd == "demo":
            run = a.run or newest_demo(ROOT / "results")
            print(f"kept {run} as {KEPT / 'demo'}; picture {keep_demo(run)}")
        stale = []
        for doc in documents():
            new, changed = rebuild(doc)
            stale += changed
            if changed and not a.check:
                doc.write_text(new)
    except (PublishError, OSError) as e:
        print(f"publish: {e}", file=sys.stderr)
        return 1
    for s in stale:
        print(f"{s}: {'differs from its runs (make publish-docs)' if a.check else 'rebuilt; reread the text around it'}")
    return 1 if a.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
