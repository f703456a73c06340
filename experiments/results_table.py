"""A measured table as a file, so a page can show it rebuilt rather than typed (experiments/publish.py,
PART `json`). Benchmarks and scripts that print a results table write it here too:

    {"command": "...", "run_utc": "2026-11-26 13:15", "commit": "a210a3d",
     "columns": ["flows", "CUBIC Gbit/s", ...], "rows": [[1, "35.9", ...], ...], "notes": ["..."]}

Cells are written as the table shows them (strings, already rounded), so the page and the file
cannot disagree about a figure.

A test or benchmark that measures a table's rows prints each as one line of its standard output,

    results-table NAME ORDER<TAB>cell<TAB>cell...

and experiments/tables.py, which knows each table's command and columns, collects them (`rows`):
rows in ORDER, so tests run in any order make the same table.
"""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class TableError(ValueError):
    pass


def commit() -> str:
    r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def write(path: Path, columns: list[str], rows: list[list[Any]], notes: list[str] | None = None,
          command: str | None = None) -> Path:
    """Write the table of this run (the command defaults to this process's own argv)."""
    doc = {"command": command or shlex.join(["python3", *sys.argv]), "run_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
           "commit": commit(), "columns": columns, "rows": [[str(c) for c in r] for r in rows], "notes": notes or []}
    check(doc)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def check(doc: Any) -> dict:
    """The table document, or TableError saying what is wrong with it."""
    if not isinstance(doc, dict):
        raise TableError("not a JSON object")
    for k, t in (("command", str), ("run_utc", str), ("commit", str), ("columns", list), ("rows", list)):
        if not isinstance(doc.get(k), t):
            raise TableError(f"`{k}` missing or not a {t.__name__}")
    if any(not isinstance(r, list) or len(r) != len(doc["columns"]) for r in doc["rows"]):
        raise TableError(f"every row needs {len(doc['columns'])} cells, one per column")
    return doc


ROW = "results-table "


def rows(lines: list[str], name: str, columns: int) -> list[list[str]]:
    """The rows of table NAME printed in `lines` (see above), in their ORDER; ValueError if a row
    has the wrong number of cells, two share an ORDER, or there is none."""
    found: dict[float, list[str]] = {}
    for line in lines:
        i = line.find(ROW + name + " ")
        if i < 0:
            continue
        order, *cells = line[i + len(ROW + name) + 1:].rstrip("\n").split("\t")
        try:
            key = float(order)
        except ValueError:
            raise ValueError(f"table {name}: row order {order!r} is not a number") from None
        if len(cells) != columns:
            raise ValueError(f"table {name}: row {order} has {len(cells)} cells, the table {columns} columns")
        if key in found:
            raise ValueError(f"table {name}: two rows numbered {order}")
        found[key] = cells
    if not found:
        raise ValueError(f"table {name}: no row printed (lines starting `{ROW}{name} `)")
    return [found[k] for k in sorted(found)]


def markdown(doc: dict) -> list[str]:
    """The table as markdown lines, then its notes."""
    cols = doc["columns"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in doc["rows"]]
    return lines + ([""] + list(doc.get("notes", [])) if doc.get("notes") else [])


def convert(doc: str, rows_of, columns: list[str], command: str, argv: list[str] | None = None) -> int:
    """A bench converter's command line: read the bench's standard output, write its table."""
    import argparse

    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("output", type=Path, help="the bench's standard output")
    ap.add_argument("--table", type=Path, required=True)
    a = ap.parse_args(argv)
    try:
        table = rows_of(a.output.read_text().splitlines())
    except (OSError, KeyError, ValueError) as e:
        print(f"{Path(sys.argv[0]).name}: {a.output}: not the bench's output ({e})", file=sys.stderr)
        return 1
    write(a.table, columns, table, command=command)
    return 0
