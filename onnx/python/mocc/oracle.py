"""Can eq. 2 order the 36 landmarks' RTTs by w_lat at all? Its own optimum on two queue ranges.

    PYTHONPATH=onnx/python python3 -m mocc.oracle --out onnx/runs/oracle

Issue 6's landmark target asks Spearman(w_thr, throughput) >= 0.8 and Spearman(w_lat, -RTT) >= 0.8.
Before training for it, this asks what eq. 2 itself wants: per link and landmark, the constant sending
rate (x capacity, ``mocc.evaluate.ORACLE_RATES``) with the highest reward, an oracle that knows the
capacity (``mocc.evaluate.constant_rate_oracle``, the figure ``mocc.evaluate`` prints beside the
model's). It runs on link sets of the evaluation's kind (``--links`` links per set, one set per
``--seeds`` seed; seed 11 with 10 links is exactly ``mocc.evaluate``'s set) for each queue range:

  mocc    1 + e^U(0,4) packets (at most 56): the MOCC reproduction's, the shipped model's training range
  aurora  1 + e^U(0,8) packets (up to ~2980): Aurora's own, deep buffers where over-sending costs latency

Writes oracle.json, oracle.md and oracle.png to --out; prints one line per set. Exit status 0 when the
oracle reaches the target (both Spearman >= 0.8, mean over the sets) on some range, 1 when it reaches
it on none (then no model trained on eq. 2 with these ranges can be expected to), 2 bad arguments,
4 no simulator extension.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import numpy as np

from .env import BackendMissing, rust_backend
from .evaluate import QUEUE_LOG_MAX, constant_rate_oracle, envelope_links
from .objectives import landmarks

TARGET = 0.8


def run(ranges: list[str], link_counts: list[int], seeds: list[int], steps: int, backend=rust_backend,
        progress: bool = True) -> dict:
    from tqdm import tqdm  # noqa: PLC0415

    lm = np.asarray(landmarks())
    rows = []
    jobs = [(r, n, s) for r in ranges for n in link_counts for s in seeds]
    for rng_name, n, seed in tqdm(jobs, desc="oracle", disable=not progress):
        links = envelope_links(n, seed, QUEUE_LOG_MAX[rng_name])
        o = constant_rate_oracle(links, lm, steps, seed, backend)
        rows.append({"range": rng_name, "links": n, "seed": seed, "queues": [link.queue_packets for link in links],
                     "spearman_thr": o["spearman_thr"], "spearman_lat": o["spearman_lat"]})
    summary = {}
    for r in ranges:
        for n in link_counts:
            sel = [x for x in rows if x["range"] == r and x["links"] == n]
            thr, lat = np.array([x["spearman_thr"] for x in sel]), np.array([x["spearman_lat"] for x in sel])
            summary[f"{r}/{n}"] = {"range": r, "links": n, "sets": len(sel), "thr_mean": float(thr.mean()),
                                   "lat_mean": float(lat.mean()), "lat_min": float(lat.min()),
                                   "lat_max": float(lat.max()), "sets_meeting": int(((thr >= TARGET) & (lat >= TARGET)).sum()),
                                   "met": bool(thr.mean() >= TARGET and lat.mean() >= TARGET)}
    return {"steps": steps, "seeds": seeds, "rows": rows, "summary": summary}


def write_report(res: dict, out: Path, command: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "oracle.json").write_text(json.dumps(res, indent=1) + "\n")
    lines = [f"Measured with `{command}` ({res['steps']} MIs per episode, seeds {res['seeds']}).", "",
             "| queue range | links per set | sets | Spearman(w_thr, thr) mean | Spearman(w_lat, -RTT) mean "
             "(min..max) | sets with both >= 0.8 | target met (means) |", "|---|---|---|---|---|---|---|"]
    for s in res["summary"].values():
        lines.append(f"| {s['range']} | {s['links']} | {s['sets']} | {s['thr_mean']:.3f} | {s['lat_mean']:.3f} "
                     f"({s['lat_min']:.3f}..{s['lat_max']:.3f}) | {s['sets_meeting']} | {'yes' if s['met'] else 'NO'} |")
    lines += ["", "| queue range | links | seed | Spearman thr | Spearman lat | queues (packets) |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['range']} | {r['links']} | {r['seed']} | {r['spearman_thr']:.3f} | {r['spearman_lat']:.3f} "
              f"| {' '.join(map(str, r['queues'][:12]))}{' ...' if len(r['queues']) > 12 else ''} |" for r in res["rows"]]
    (out / "oracle.md").write_text("\n".join(lines) + "\n")
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(7, 3.5))
    keys = list(res["summary"])
    for i, k in enumerate(keys):
        s = res["summary"][k]
        lat = [r["spearman_lat"] for r in res["rows"] if r["range"] == s["range"] and r["links"] == s["links"]]
        ax.scatter(np.full(len(lat), i), lat, color="tab:blue", s=14)
        ax.scatter([i], [s["lat_mean"]], color="tab:red", marker="_", s=400)
    ax.axhline(TARGET, color="gray", linestyle="--", label="target 0.8")
    ax.set_xticks(range(len(keys)), [k.replace("/", "\n") + " links" for k in keys])
    ax.set(ylabel="Spearman(w_lat, -RTT)", title="eq. 2's constant-rate optimum, per link set (red: mean)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "oracle.png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None, backend=rust_backend) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranges", default="mocc,aurora", help=f"comma-separated, of {sorted(QUEUE_LOG_MAX)}")
    ap.add_argument("--links", default="10,30", help="links per set, comma-separated (mocc.evaluate uses 10)")
    ap.add_argument("--seeds", default="11,12,13,14,15", help="one link set per seed (mocc.evaluate uses 11)")
    ap.add_argument("--steps", type=int, default=400, help="monitor intervals per episode")
    ap.add_argument("--out", default="onnx/runs/oracle")
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    ranges = [r.strip() for r in a.ranges.split(",") if r.strip()]
    bad = [r for r in ranges if r not in QUEUE_LOG_MAX]
    if not ranges or bad:
        ap.error(f"--ranges: unknown {bad or 'none given'}; choose from {sorted(QUEUE_LOG_MAX)}")
    try:
        links = [int(x) for x in a.links.split(",")]
        seeds = [int(x) for x in a.seeds.split(",")]
    except ValueError:
        ap.error("--links and --seeds are comma-separated integers, e.g. --links 10,30 --seeds 11,12")
    if min(links) < 2 or a.steps < 1:
        ap.error("--links >= 2 each and --steps >= 1")
    command = "PYTHONPATH=onnx/python python3 -m mocc.oracle " + shlex.join(sys.argv[1:] if argv is None else argv)
    try:
        res = run(ranges, links, seeds, a.steps, backend, progress=not a.no_progress)
    except BackendMissing as e:
        print(f"mocc.oracle: {e}", file=sys.stderr)
        return 4
    write_report(res, Path(a.out), command)
    for r in res["rows"]:
        print(f"{r['range']:6s} {r['links']:3d} links seed {r['seed']}: Spearman thr {r['spearman_thr']:.3f} "
              f"lat {r['spearman_lat']:.3f}")
    for s in res["summary"].values():
        print(f"{'MET ' if s['met'] else 'MISS'} {s['range']} queues, {s['links']} links x {s['sets']} sets: mean "
              f"Spearman thr {s['thr_mean']:.3f}, lat {s['lat_mean']:.3f} (target {TARGET} each)")
    print(f"measured with: {command}; report in {a.out}/oracle.md")
    return 0 if any(s["met"] for s in res["summary"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
