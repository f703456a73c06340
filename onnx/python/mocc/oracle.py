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

With ``--model PATH`` the exported model runs on the same links beside the oracle (as mocc.evaluate
runs it), so the two are compared set by set and landmark by landmark. Besides the target's reading
(per-landmark means over a set's links, ranked at 1e-4) every set reports the per-link Spearman
averaged and the w_loss position (``loss_position``: where w_loss sits between w_lat, 0, and w_thr, 1,
in its effect on the RTT ranks). When throughput and RTT rise together with one operating point per
objective, both Spearman reach 0.8 on the 36 landmarks only for a position of about 0.45-0.55: at 0
(w_loss lowers the RTT as w_lat does) the RTT follows w_thr alone and Spearman(w_lat, -RTT) is 0.47,
at 0.15 it is 0.61, at 0.3 0.71. ``--episode-seed-offset`` reruns the same links with other loss draws.

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
from .evaluate import (
    QUEUE_LOG_MAX,
    OnnxActor,
    constant_rate_oracle,
    envelope_links,
    landmark_spearman,
    ranks,
    run_link,
    spearman,
)
from .objectives import landmarks

TARGET = 0.8


def weight_fit(weights: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares coefficients of w_thr and w_lat for ``y`` over the objectives (with an intercept;
    w_loss is the remainder): how y moves per unit of weight taken from w_loss."""
    x = np.column_stack([np.ones(len(weights)), weights[:, 0], weights[:, 1]])
    _, b_thr, b_lat = np.linalg.lstsq(x, y, rcond=None)[0]
    return float(b_thr), float(b_lat)


def loss_position(weights: np.ndarray, rtt: np.ndarray) -> float:
    """Where w_loss sits between w_lat (0) and w_thr (1) in its effect on the RTT: the ranks of the
    per-objective mean RTT (``rtt``) fitted linearly on w_thr and w_lat (w_loss the remainder), p =
    -b_lat / (b_thr - b_lat). 0: moving weight from w_lat to w_loss leaves the RTT as it is (w_loss lowers
    the RTT as much as w_lat, so the RTT follows w_thr alone and Spearman(w_lat, -RTT) is about 0.47 on the
    landmarks); 0.5: w_loss is neutral (the RTT follows w_thr - w_lat, Spearman about 0.85); 1: w_loss
    raises the RTT like w_thr (the RTT follows -w_lat alone, Spearman 1)."""
    r = ranks(np.round(np.asarray(rtt), 4))
    if r.std() == 0:
        return float("nan")  # one RTT for every objective: nothing moves it
    b_thr, b_lat = weight_fit(weights, r)
    return float(-b_lat / (b_thr - b_lat)) if abs(b_thr - b_lat) > 1e-9 else float("nan")


def rtt_slopes(weights: np.ndarray, rtt: np.ndarray) -> dict:
    """How much the per-objective mean RTT ratio moves when 0.1 of weight moves from w_loss to w_thr
    ("rtt_per_thr") or to w_lat ("rtt_per_lat"): a linear fit over the landmarks. The RTT follows w_lat
    (both Spearman >= 0.8) only where rtt_per_lat is about -rtt_per_thr (w_loss neutral)."""
    b_thr, b_lat = weight_fit(weights, np.asarray(rtt, dtype=float))
    return {"rtt_per_thr": float(b_thr / 10), "rtt_per_lat": float(b_lat / 10)}


def measures(weights: np.ndarray, util: np.ndarray, rtt: np.ndarray) -> dict:
    """The landmark target's measures for one link set ([links, objectives] arrays), in the target's
    reading (means over links, 1e-4 ranks) and two others: unrounded means, and per-link Spearman averaged."""
    s_thr, s_lat = landmark_spearman(weights, util, rtt)
    mr = rtt.mean(axis=0)
    return {"spearman_thr": s_thr, "spearman_lat": s_lat,
            "spearman_lat_unrounded": spearman(weights[:, 1], -mr),
            "spearman_lat_per_link": float(np.mean([spearman(weights[:, 1], -np.round(r, 4)) for r in rtt])),
            "spearman_thr_per_link": float(np.mean([spearman(weights[:, 0], np.round(u, 4)) for u in util])),
            "loss_position": loss_position(weights, mr), **rtt_slopes(weights, mr),
            "utilization": util.mean(axis=0).tolist(), "rtt_ratio": mr.tolist()}


def run(ranges: list[str], link_counts: list[int], seeds: list[int], steps: int, backend=rust_backend,
        progress: bool = True, model: str | None = None, episode_seed_offset: int = 0) -> dict:
    """Per (range, links, seed) set: eq. 2's constant-rate optimum and, with ``model``, the model on the same
    links (episode seed ``seed + link index + episode_seed_offset``, as mocc.evaluate at offset 0)."""
    from tqdm import tqdm  # noqa: PLC0415

    lm = np.asarray(landmarks())
    actor = OnnxActor(model) if model else None
    rows = []
    jobs = [(r, n, s) for r in ranges for n in link_counts for s in seeds]
    for rng_name, n, seed in tqdm(jobs, desc="oracle", disable=not progress):
        links = envelope_links(n, seed, QUEUE_LOG_MAX[rng_name])
        es = seed + episode_seed_offset
        o = constant_rate_oracle(links, lm, steps, es, backend)["per_link"]
        row = {"range": rng_name, "links": n, "seed": seed, "queue_packets": [link.queue_packets for link in links],
               **measures(lm, o["utilization"], o["rtt_ratio"])}
        if actor is not None:
            runs = [run_link(actor, link, lm, steps, es + i, backend) for i, link in enumerate(links)]
            row["model"] = measures(lm, np.stack([r["utilization"] for r in runs]),
                                    np.stack([r["rtt_ratio"] for r in runs]))
        rows.append(row)
    summary = {}
    for r in ranges:
        for n in link_counts:
            sel = [x for x in rows if x["range"] == r and x["links"] == n]
            s = {"range": r, "links": n, "sets": len(sel)}
            for who, get in [("oracle", lambda x: x), ("model", lambda x: x.get("model"))]:
                if get(sel[0]) is None:
                    continue
                thr = np.array([get(x)["spearman_thr"] for x in sel])
                lat = np.array([get(x)["spearman_lat"] for x in sel])
                s[who] = {"thr_mean": float(thr.mean()), "lat_mean": float(lat.mean()), "lat_min": float(lat.min()),
                          "lat_max": float(lat.max()),
                          "lat_per_link_mean": float(np.mean([get(x)["spearman_lat_per_link"] for x in sel])),
                          "loss_position_mean": float(np.nanmean([get(x)["loss_position"] for x in sel]))
                          if any(np.isfinite(get(x)["loss_position"]) for x in sel) else float("nan"),
                          "rtt_per_thr_mean": float(np.mean([get(x)["rtt_per_thr"] for x in sel])),
                          "rtt_per_lat_mean": float(np.mean([get(x)["rtt_per_lat"] for x in sel])),
                          "sets_meeting": int(((thr >= TARGET) & (lat >= TARGET)).sum()),
                          "met": bool(thr.mean() >= TARGET and lat.mean() >= TARGET)}
            summary[f"{r}/{n}"] = s
    return {"steps": steps, "seeds": seeds, "model": model, "episode_seed_offset": episode_seed_offset,
            "rows": rows, "summary": summary}


def write_report(res: dict, out: Path, command: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "oracle.json").write_text(json.dumps(res, indent=1) + "\n")
    whos = [w for w in ("oracle", "model") if w in next(iter(res["summary"].values()))]
    lines = [f"Measured with `{command}` ({res['steps']} MIs per episode, seeds {res['seeds']}"
             + (f", model {res['model']}" if res["model"] else "") + ").", "",
             ("Spearman as issue 6's target reads it (per-landmark means over the set's links, ranked at 1e-4); "
              "per-link: the same per link, averaged; w_loss position: where w_loss sits between w_lat (0) and "
              "w_thr (1) in its effect on the RTT ranks (0.5 neutral; `loss_position`); RTT per 0.1: the change "
              "of the mean RTT ratio when 0.1 of weight moves from w_loss to w_thr or to w_lat (linear fit)."), "",
             ("| queue range | links per set | sets | who | Spearman(w_thr, thr) mean | Spearman(w_lat, -RTT) mean "
              "(min..max) | per-link Spearman lat | w_loss position | RTT per 0.1 to w_thr, to w_lat "
              "| sets with both >= 0.8 | target met (means) |"),
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in res["summary"].values():
        for w in whos:
            m = s[w]
            lines.append(f"| {s['range']} | {s['links']} | {s['sets']} | {w} | {m['thr_mean']:.3f} | {m['lat_mean']:.3f} "
                         f"({m['lat_min']:.3f}..{m['lat_max']:.3f}) | {m['lat_per_link_mean']:.3f} | "
                         f"{m['loss_position_mean']:.2f} | {m['rtt_per_thr_mean']:+.4f}, {m['rtt_per_lat_mean']:+.4f} | "
                         f"{m['sets_meeting']} | {'yes' if m['met'] else 'NO'} |")
    model = res["model"] is not None
    lines += ["", "| queue range | links | seed | oracle Spearman thr | oracle Spearman lat |"
              + (" model Spearman thr | model Spearman lat |" if model else "") + " queues (packets) |",
              "|---|---|---|---|---|" + ("---|---|" if model else "") + "---|"]
    lines += [f"| {r['range']} | {r['links']} | {r['seed']} | {r['spearman_thr']:.3f} | {r['spearman_lat']:.3f} |"
              + (f" {r['model']['spearman_thr']:.3f} | {r['model']['spearman_lat']:.3f} |" if model else "")
              + f" {' '.join(map(str, r['queue_packets'][:12]))}{' ...' if len(r['queue_packets']) > 12 else ''} |" for r in res["rows"]]
    first = res["rows"][0]
    lm = np.asarray(landmarks())
    if model:
        lines += ["", (f"Per landmark on the first set ({first['range']} queues, {first['links']} links, seed "
                       f"{first['seed']}): means over its links."), "",
                  "| w_thr | w_lat | w_loss | model utilization | oracle utilization | model RTT / base | oracle RTT / base |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {w[0]:.1f} | {w[1]:.1f} | {w[2]:.1f} | {mu:.3f} | {ou:.3f} | {mr:.4f} | {orr:.4f} |"
                  for w, mu, ou, mr, orr in zip(lm, first["model"]["utilization"], first["utilization"],
                                                first["model"]["rtt_ratio"], first["rtt_ratio"])]
    (out / "oracle.md").write_text("\n".join(lines) + "\n")
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(1, 2 if model else 1, figsize=(13 if model else 7, 3.8), squeeze=False)
    ax = axes[0, 0]
    keys = list(res["summary"])
    for i, k in enumerate(keys):
        s = res["summary"][k]
        for j, (w, c) in enumerate((("oracle", "tab:blue"), ("model", "tab:orange"))):
            if w not in s:
                continue
            get = (lambda r: r) if w == "oracle" else (lambda r: r["model"])
            lat = [get(r)["spearman_lat"] for r in res["rows"] if r["range"] == s["range"] and r["links"] == s["links"]]
            x = i + (0.15 * (2 * j - 1) if model else 0)
            ax.scatter(np.full(len(lat), x), lat, color=c, s=14, label=w if i == 0 else None)
            ax.scatter([x], [s[w]["lat_mean"]], color="tab:red", marker="_", s=300)
    ax.axhline(TARGET, color="gray", linestyle="--", label="target 0.8")
    ax.set_xticks(range(len(keys)), [k.replace("/", "\n") + " links" for k in keys])
    ax.set(ylabel="Spearman(w_lat, -RTT)", title="per link set (red: mean)")
    ax.legend(fontsize=8)
    if model:
        ax = axes[0, 1]
        for who, mk, get in (("model", "o", lambda r: r["model"]), ("oracle", "x", lambda r: r)):
            sc = ax.scatter(lm[:, 1] + (0.012 if who == "oracle" else -0.012), get(first)["rtt_ratio"], c=lm[:, 0],
                            cmap="viridis", marker=mk, label=who)
        fig.colorbar(sc, ax=ax, label="w_thr")
        ax.set(xlabel="w_lat", ylabel="mean RTT / base RTT",
               title=f"per landmark, {first['range']} {first['links']} links seed {first['seed']}")
        ax.legend(fontsize=8)
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
    ap.add_argument("--model", help="an exported ONNX model to run on the same links beside the oracle")
    ap.add_argument("--episode-seed-offset", type=int, default=0,
                    help="added to every episode seed (same links, other loss draws): evaluation noise")
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
    if a.model:
        from .export import ExportError, validate  # noqa: PLC0415

        try:
            validate(a.model)
        except ExportError as e:
            print(f"mocc.oracle: {e}", file=sys.stderr)
            return 2
    try:
        res = run(ranges, links, seeds, a.steps, backend, progress=not a.no_progress, model=a.model,
                  episode_seed_offset=a.episode_seed_offset)
    except BackendMissing as e:
        print(f"mocc.oracle: {e}", file=sys.stderr)
        return 4
    write_report(res, Path(a.out), command)
    for r in res["rows"]:
        print(f"{r['range']:6s} {r['links']:3d} links seed {r['seed']}: oracle Spearman thr {r['spearman_thr']:.3f} "
              f"lat {r['spearman_lat']:.3f}" + (f"; model thr {r['model']['spearman_thr']:.3f} lat "
                                                f"{r['model']['spearman_lat']:.3f}" if "model" in r else ""))
    for s in res["summary"].values():
        for who in ("oracle", "model"):
            if who in s:
                m = s[who]
                print(f"{'MET ' if m['met'] else 'MISS'} {who:6s} {s['range']} queues, {s['links']} links x {s['sets']} "
                      f"sets: mean Spearman thr {m['thr_mean']:.3f}, lat {m['lat_mean']:.3f} (target {TARGET} each; "
                      f"w_loss position {m['loss_position_mean']:.2f})")
    print(f"measured with: {command}; report in {a.out}/oracle.md")
    return 0 if any(s["oracle"]["met"] for s in res["summary"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
