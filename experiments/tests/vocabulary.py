"""docs/metrics.md's vocabulary, checked: every number polycc writes for a program ends in its unit
or is one of a few named quantities, counts and identifiers, and none is a percentage. The vocabulary
is the page's `text` block (read by `polycc_control::vocabulary` too), so the page and the checkers
cannot drift apart."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

METRICS_MD = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
FIELD_LIKE = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass
class Vocabulary:
    suffixes: list[str] = field(default_factory=list)
    """Unit suffixes, e.g. `_ms`, `_bytes_per_sec`."""
    names: list[str] = field(default_factory=list)
    """Whole names allowed without a unit: named quantities, counts, identifiers."""
    forbidden: list[str] = field(default_factory=list)
    """Suffixes never allowed (percentages, `_mbit`)."""

    @staticmethod
    def parse(markdown: str) -> "Vocabulary":
        """The lines `suffixes:`, `named:`, `counts:`, `identifiers:`, `forbidden:` of the first ```text block."""
        parts = markdown.split("```text\n", 1)
        block = parts[1].split("```", 1)[0] if len(parts) > 1 else ""
        v = Vocabulary()
        for line in block.splitlines():
            kind, sep, words = line.partition(":")
            if not sep:
                continue
            kind = kind.strip()
            if kind == "suffixes":
                v.suffixes += words.split()
            elif kind in ("named", "counts", "identifiers"):
                v.names += words.split()
            elif kind == "forbidden":
                v.forbidden += words.split()
        return v

    def check(self, key: str, value: Any) -> str | None:
        """Why `key`, holding `value`, breaks the vocabulary; None when it does not. Only numbers (and
        lists of numbers) are quantities; keys that are data (a flow count, a path) are not names."""

        def numeric(x: Any) -> bool:
            return isinstance(x, (int, float)) and not isinstance(x, bool)

        quantity = numeric(value) or (isinstance(value, list) and bool(value) and all(numeric(x) for x in value))
        if not quantity or not FIELD_LIKE.match(key):
            return None
        for f in self.forbidden:
            if key.endswith(f):
                return f"`{key}` ends in `{f}`, which JSON never uses (docs/metrics.md)"
        if key.endswith("_frac"):
            xs = value if isinstance(value, list) else [value]
            if any(not 0 <= x <= 1 for x in xs):
                return f"`{key}` = {value} is not a fraction in [0, 1] (a percentage?)"
        if key in self.names or any(key.endswith(s) for s in self.suffixes):
            return None
        return f"`{key}` has no unit suffix and is not a named quantity, count or identifier (docs/metrics.md)"


def documented() -> Vocabulary:
    return Vocabulary.parse(METRICS_MD.read_text())


def per_key_map(vocab: Vocabulary, key: str, value: Any) -> bool:
    """A map of numbers keyed by data under a key that names their unit (`fusion_win_frac: {"bbr": 0.75}`)."""
    return (
        isinstance(value, dict) and bool(value)
        and (any(key.endswith(s) for s in vocab.suffixes) or key in vocab.names)
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value.values())
    )


def violations(value: Any, vocab: Vocabulary | None = None, path: str = "") -> list[str]:
    """Every key of `value`, at any depth, that breaks the vocabulary, as "path: why"."""
    vocab = vocab or documented()
    out: list[str] = []
    if isinstance(value, dict):
        for k, x in value.items():
            here = f"{path}.{k}"
            why = vocab.check(k, x)
            if why:
                out.append(f"{here}: {why}")
            if per_key_map(vocab, k, x):
                # A map keyed by data (a member's name): each entry is a `k` (docs/metrics.md, rule 7).
                out += [f"{here}.{name}: {w}" for name, e in x.items() if (w := vocab.check(k, e))]
            else:
                out += violations(x, vocab, here)
    elif isinstance(value, list):
        for x in value:
            out += violations(x, vocab, f"{path}[]")
    return out


def header_violations(columns: list[str], vocab: Vocabulary | None = None) -> list[str]:
    """A CSV header whose columns are all numbers (the simulator's and the runner's series), checked as keys."""
    vocab = vocab or documented()
    return [f"column {c}: {why}" for c in columns if (why := vocab.check(c, 0.0))]
