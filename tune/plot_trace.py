"""Plot a polycc-tune trace: reward per period per group (raw and a rolling mean), safety
reverts marked. Usage: python3 tune/plot_trace.py TRACE.csv|TRACE.json OUT.png [--window N]
"""
import argparse
import csv
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Args:
    trace: Path
    """The trace polycc-tune --trace wrote (CSV, or JSON when it ends in .json)."""
    out: Path
    """The PNG to write."""
    window: int = 5
    """Periods in the rolling mean."""


def load(path: Path) -> list[dict]:
    """The trace's rows, with numbers parsed (an empty reward stays None)."""
    if path.suffix == ".json":
        rows = json.loads(path.read_text())
    else:
        with path.open() as f:
            rows = list(csv.DictReader(f))
    for r in rows:
        r["period"] = int(r["period"])
        v = r.get("reward")
        r["reward"] = None if v in (None, "") else float(v)
    return rows


def rolling(values: list[float], window: int) -> list[float]:
    """Mean of the last `window` values at each point (fewer at the start)."""
    out = []
    for i in range(len(values)):
        lo = max(0, i - window + 1)
        out.append(sum(values[lo : i + 1]) / (i + 1 - lo))
    return out


def plot(args: Args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = load(args.trace)
    groups = sorted({r["group"] for r in rows})
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for g in groups:
        mine = [r for r in rows if r["group"] == g and r["reward"] is not None]
        xs = [r["period"] for r in mine]
        ys = [r["reward"] for r in mine]
        (line,) = ax.plot(xs, ys, alpha=0.3, lw=1)
        ax.plot(xs, rolling(ys, args.window), color=line.get_color(), lw=2, label=f"{g} ({args.window}-period mean)")
        reverts = [r for r in mine if "SAFETY" in r.get("events", "")]
        if reverts:
            ax.scatter([r["period"] for r in reverts], [r["reward"] for r in reverts], marker="x", color="red", zorder=3,
                       label=f"{g}: safety revert")
    ax.set_xlabel("period")
    ax.set_ylabel("reward")
    ax.set_title(f"polycc-tune: {args.trace.name}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("trace", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--window", type=int, default=5)
    a = p.parse_args()
    plot(Args(a.trace, a.out, a.window))


if __name__ == "__main__":
    main()
