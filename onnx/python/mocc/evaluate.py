"""Issue 6's simulator targets for an exported model, run with onnxruntime on polycc_gym links.

    PYTHONPATH=onnx/python python3 -m mocc.evaluate --model onnx/mocc.onnx --out onnx/runs/eval

Cases (each printed with its measurement and the command above):
  1. in-envelope links, w = <0.8,0.1,0.1>: utilization >= 0.85
  2. same links, w = <0.1,0.8,0.1>: mean RTT <= 1.3 x base with utilization >= 0.5
  3. the 36 landmarks (means over the links): Spearman(w_thr, utilization) >= 0.8 and
     Spearman(w_lat, -RTT) >= 0.8
  4. links x objectives (random w), reward of eq. 2: MOCC's median above every classic algorithm's,
     the classic ones run by polycc-sim --json ($POLYCC_BIN_DIR, else target/release) on the same links and duration.
Measures are over the whole episode: utilization = mean throughput / capacity, RTT ratio = mean
RTT / base RTT, loss = mean loss rate; reward = w_thr util + w_lat (base/mean RTT) + w_loss (1 - loss).
Writes eval.json, eval.md and landmarks.png to --out. Exit status 0 all met, 1 a target missed,
2 bad arguments or model, 4 no simulator extension.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .config import ACTION_ALPHA, ACTION_CLIP
from .env import BackendMissing, rust_backend, serve_preference, with_rtt_base
from .objectives import landmarks

# The simulator the classic algorithms run on: `make` exports POLYCC_BIN_DIR for the cargo profile it
# built (release; ci under `make test`).
DEFAULT_SIM = str(Path(os.environ.get("POLYCC_BIN_DIR") or Path(__file__).resolve().parents[3] / "target" / "release")
                  / "polycc-sim")

CLASSIC = ("reno", "cubic", "vegas", "bbr", "copa", "allegro", "vivace")


@dataclass(frozen=True)
class Link:
    bandwidth_mbps: float
    one_way_delay_s: float
    queue_packets: int
    loss_frac: float
    initial_rate_mbps: float | None
    """The rate the model's episode starts at; None: as a deployed flow, from the initial window through MOCC's
    startup (polycc_gym's ``fix_link(initial_rate_mbps=None)``)."""
    change_at_s: float | None = None
    """The bandwidth becomes ``change_bandwidth_mbps`` at this time (polycc_gym's users range)."""
    change_bandwidth_mbps: float | None = None
    rtt_dev_s: float = 0.0
    """ACK-path jitter, +/- seconds (polycc_gym's users+noise range; polycc-sim --rtt-dev)."""
    pacing_efficiency: float = 1.0
    """The fraction of its rate a paced sender puts on the wire (polycc_gym's users+guest range: the
    emulated guest's late timers; polycc-sim --pacing-efficiency)."""

    def bandwidth_at(self, t_s: float) -> float:
        """The bandwidth in force at ``t_s``, Mbit/s."""
        if self.change_at_s is not None and self.change_bandwidth_mbps is not None and t_s >= self.change_at_s:
            return self.change_bandwidth_mbps
        return self.bandwidth_mbps

    def fix_kwargs(self) -> dict:
        """``polycc_gym.Env.fix_link``'s arguments for this link (the change only where there is one, so
        backends without it still take links without one)."""
        kw = dict(bandwidth_mbps=self.bandwidth_mbps, one_way_delay_s=self.one_way_delay_s,
                  queue_packets=self.queue_packets, loss=self.loss_frac, initial_rate_mbps=self.initial_rate_mbps)
        if self.change_at_s is not None:
            kw.update(change_at_s=self.change_at_s, change_bandwidth_mbps=self.change_bandwidth_mbps)
        if self.rtt_dev_s > 0:
            kw.update(rtt_dev_s=self.rtt_dev_s)
        if self.pacing_efficiency < 1:
            kw.update(pacing_efficiency=self.pacing_efficiency)
        return kw


QUEUE_LOG_MAX = {"mocc": 4.0, "aurora": 8.0}
"""Queue ranges 1 + e^U(0, x) packets: the MOCC reproduction's (the training envelope, at most 56
packets) and Aurora's own (deep buffers, up to ~2980 packets); algorithms.md section 8."""


def envelope_links(n: int, seed: int, queue_log_max: float = QUEUE_LOG_MAX["mocc"]) -> list[Link]:
    """Links from the Aurora/MOCC envelope (algorithms.md section 8; MOCC's queue and loss ranges unless
    ``queue_log_max`` says otherwise), with the training rule's initial rate U(0.3, 1.5) x bw for MOCC (the
    classic algorithms start their own way)."""
    rng = np.random.default_rng(seed)
    links = []
    for _ in range(n):
        bw = round(float(rng.uniform(1.2, 6.0)), 3)
        links.append(Link(bw, round(float(rng.uniform(0.05, 0.5)), 4),
                          int(round(1 + np.exp(rng.uniform(0, queue_log_max)))),
                          round(float(rng.uniform(0, 0.03)), 4), round(bw * float(rng.uniform(0.3, 1.5)), 3)))
    return links


class OnnxActor:
    def __init__(self, path: str):
        import onnxruntime as ort  # noqa: PLC0415

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        self.sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        # The observation the model was trained on (models before the key: the lowest MI RTT so far).
        self.rtt_base = self.sess.get_modelmeta().custom_metadata_map.get("polycc.rtt_base", "lowest")

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        a = self.sess.run(["action"], {"obs": obs.astype(np.float32)})[0][:, 0]
        return np.clip(a, -ACTION_CLIP, ACTION_CLIP)


def run_link(actor, link: Link, weights: np.ndarray, steps: int, seed: int, backend=rust_backend) -> dict:
    """One episode per weight vector on ``link`` (all in lockstep, batched inference); whole-run means, and
    the p95 of each episode's per-packet RTTs over the base RTT (NaN where the backend cannot say). An actor
    with an ``observe`` method is shown each step's infos (the oracle's rate tracker)."""
    backend = with_rtt_base(backend, getattr(actor, "rtt_base", "lowest"))
    envs = [backend("envelope", seed, steps) for _ in weights]
    hist = []
    for e, w in zip(envs, weights):
        e.fix_link(**link.fix_kwargs())
        serve_preference(e, w)
        hist.append(np.asarray(e.reset(seed), dtype=np.float32))
    sums = np.zeros((len(envs), 3))
    sim_time = 0.0
    observe = getattr(actor, "observe", None)
    infos: list[dict] = []
    for _ in range(steps):
        a = actor(np.concatenate([weights.astype(np.float32), np.stack(hist)], axis=1))
        infos = []
        for i, e in enumerate(envs):
            obs, _, _, _, _, info = e.step(float(a[i]))
            hist[i] = np.asarray(obs, dtype=np.float32)
            sums[i] += (info["throughput_bps"] / info["capacity_bps"], info["rtt_s"] / info["base_rtt_s"], info["loss"])
            sim_time = max(sim_time, info.get("sim_time_s", 0.0))
            infos.append(info)
        if observe is not None:
            observe(infos)
    m = sums / steps
    base = 2 * link.one_way_delay_s
    p95 = np.array([(e.p95_rtt_s() or np.nan) / base if hasattr(e, "p95_rtt_s") else np.nan for e in envs])
    return {"utilization": m[:, 0], "rtt_ratio": m[:, 1], "loss": m[:, 2], "p95_rtt_ratio": p95, "sim_time_s": sim_time}


class CapacityTracker:
    """The oracle's sender on a link whose bandwidth changes: ``k`` x the bandwidth in force when its packets
    reach the bottleneck (one one-way delay after the MI starts), approached at the action clip's pace (at most
    x1.25 per MI, so a 3x change takes about 5 MIs). On a link without a change it holds its initial rate,
    ``k`` x the bandwidth, as action 0 does."""

    def __init__(self, k: float, link: Link):
        self.k, self.link, self.action = k, link, 0.0

    def observe(self, infos: list[dict]) -> None:
        if self.link.change_at_s is None:
            return  # action 0 holds the initial rate exactly, as mocc.oracle always has
        info = infos[0]
        target = self.k * self.link.bandwidth_at(info["sim_time_s"] + self.link.one_way_delay_s) * 1e6
        x = info["rate_bps"]
        a = (target / x - 1) / ACTION_ALPHA if target >= x else (1 - x / target) / ACTION_ALPHA
        self.action = float(np.clip(a, -ACTION_CLIP, ACTION_CLIP))

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return np.full(len(obs), self.action)


def reward(w: np.ndarray, util, rtt_ratio, loss) -> np.ndarray:
    o = np.stack([np.clip(util, 0, 1), 1.0 / np.maximum(rtt_ratio, 1.0), 1.0 - np.asarray(loss)], axis=-1)
    return (w * o).sum(axis=-1)


def ranks(v) -> np.ndarray:
    """Ranks from 0, ties averaged."""
    v = np.asarray(v, dtype=float)
    order = v.argsort(kind="stable")
    r = np.empty(len(v))
    r[order] = np.arange(len(v))
    for val in np.unique(v):  # average ranks over ties
        idx = v == val
        r[idx] = r[idx].mean()
    return r


def spearman(x, y) -> float:
    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return 0.0  # a constant cannot rise with anything
    return float(np.corrcoef(rx, ry)[0, 1])


ORACLE_RATES = (0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.97, 0.99, 1.0, 1.01, 1.03, 1.05, 1.1, 1.2)
"""Constant sending rates (x capacity) the eq. 2 oracle chooses from."""


def landmark_spearman(weights: np.ndarray, util: np.ndarray, rtt: np.ndarray) -> tuple[float, float]:
    """The landmark target's reading: Spearman(w_thr, utilization) and Spearman(w_lat, -RTT ratio) of the
    per-objective means over the links (``util``, ``rtt``: [links, objectives]), ranked at 1e-4 resolution:
    differences below that are float noise, not a trend (they tie)."""
    mu, mr = np.asarray(util).mean(axis=0), np.asarray(rtt).mean(axis=0)
    return spearman(weights[:, 0], np.round(mu, 4)), spearman(weights[:, 1], -np.round(mr, 4))


def constant_rate_oracle(links: list[Link], weights: np.ndarray, steps: int, seed: int, backend=rust_backend) -> dict:
    """What eq. 2 itself asks for: per link and objective, the best constant rate (an oracle that knows the
    capacity; action 0 holds the initial rate; after a bandwidth change a ``CapacityTracker`` follows it),
    measured like the model. Returns the per-objective means of
    utilization and RTT ratio at the chosen rates, their Spearman correlations with w_thr and w_lat, and the
    per-link values ("per_link": [links, objectives] utilization, rtt_ratio, loss, p95_rtt_ratio)."""
    util, rtt = np.zeros((len(links), len(weights))), np.zeros((len(links), len(weights)))
    loss, p95 = np.zeros((len(links), len(weights))), np.zeros((len(links), len(weights)))
    for i, link in enumerate(links):
        runs = [run_link(CapacityTracker(k, link), dataclasses.replace(link, initial_rate_mbps=link.bandwidth_mbps * k),
                         np.zeros((1, 3)), steps, seed + i, backend)
                for k in ORACLE_RATES]
        u = np.array([r["utilization"][0] for r in runs])
        r_ = np.array([r["rtt_ratio"][0] for r in runs])
        x = np.array([r["loss"][0] for r in runs])
        q = np.array([r["p95_rtt_ratio"][0] for r in runs])
        best = reward(weights[:, None, :], u[None, :], r_[None, :], x[None, :]).argmax(axis=1)  # [objectives]
        util[i], rtt[i], loss[i], p95[i] = u[best], r_[best], x[best], q[best]
    s_thr, s_lat = landmark_spearman(weights, util, rtt)
    return {"utilization": util.mean(axis=0).tolist(), "rtt_ratio": rtt.mean(axis=0).tolist(),
            "spearman_thr": s_thr, "spearman_lat": s_lat,
            "per_link": {"utilization": util, "rtt_ratio": rtt, "loss": loss, "p95_rtt_ratio": p95}}


def classic_run(sim: str, alg: str, link: Link, duration_s: float, seed: int) -> dict:
    """One run of a classic algorithm by ``polycc-sim --json`` on ``link``: whole-run utilization (against
    the capacity over time), mean and p95 RTT over the base RTT, loss."""
    cmd = [sim, "--alg", alg, "--bw", f"{link.bandwidth_mbps}mbit", "--rtt", f"{2000 * link.one_way_delay_s:.1f}ms",
           "--buffer", f"{link.queue_packets}pkt", "--loss", str(link.loss_frac), "--duration", f"{duration_s:.1f}s",
           "--seed", str(seed), "--json"]
    if link.change_at_s is not None:
        cmd += ["--bw-change", f"{link.change_at_s}s:{link.change_bandwidth_mbps}mbit"]
    if link.rtt_dev_s > 0:
        cmd += ["--rtt-dev", f"{1000 * link.rtt_dev_s:.1f}ms"]
    if link.pacing_efficiency < 1:
        cmd += ["--pacing-efficiency", f"{link.pacing_efficiency:.4f}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    j = json.loads(out.stdout)
    return {"utilization": j["utilization"], "rtt_ratio": j["mean_rtt_ms"] / j["base_rtt_ms"], "loss": j["loss_frac"],
            "p95_rtt_ratio": (j["p95_rtt_ms"] or float("nan")) / j["base_rtt_ms"]}


def evaluate_model(model: str, links: int = 10, objectives: int = 100, steps: int = 400, seed: int = 11,
                   sim: str | None = DEFAULT_SIM, backend=rust_backend) -> dict:
    actor = OnnxActor(model)
    L = envelope_links(links, seed)
    rng = np.random.default_rng(seed + 1)
    lm = np.asarray(landmarks())
    rand_w = rng.dirichlet(np.ones(3), size=objectives)
    fixed = np.asarray([(0.8, 0.1, 0.1), (0.1, 0.8, 0.1)])
    all_w = np.concatenate([fixed, lm, rand_w])
    per_link = [run_link(actor, link, all_w, steps, seed + i, backend) for i, link in enumerate(L)]
    util = np.stack([r["utilization"] for r in per_link])   # [links, objectives]
    rtt = np.stack([r["rtt_ratio"] for r in per_link])
    loss = np.stack([r["loss"] for r in per_link])
    res: dict = {"model": model, "links": [link.__dict__ for link in L], "steps": steps, "seed": seed, "cases": []}

    def case(name, target, value, ok):
        res["cases"].append({"case": name, "target": target, "measured": value, "met": bool(ok)})

    u0 = util[:, 0].mean()
    case("in-envelope links, w=<0.8,0.1,0.1>", "utilization >= 0.85", f"utilization {u0:.3f}", u0 >= 0.85)
    r1, u1 = rtt[:, 1].mean(), util[:, 1].mean()
    case("same links, w=<0.1,0.8,0.1>", "mean RTT <= 1.3x base, utilization >= 0.5",
         f"RTT {r1:.3f}x base, utilization {u1:.3f}", r1 <= 1.3 and u1 >= 0.5)
    sl = slice(2, 2 + len(lm))
    lm_util, lm_rtt = util[:, sl].mean(axis=0), rtt[:, sl].mean(axis=0)
    s_thr, s_lat = landmark_spearman(lm, util[:, sl], rtt[:, sl])
    case("36 landmarks", "Spearman(w_thr, thr) >= 0.8 and Spearman(w_lat, -RTT) >= 0.8",
         f"{s_thr:.3f} and {s_lat:.3f}", s_thr >= 0.8 and s_lat >= 0.8)
    res["landmarks"] = [{"w": list(map(float, w)), "utilization": float(u), "rtt_ratio": float(r),
                         "loss_frac": float(x)} for w, u, r, x in zip(lm, lm_util, lm_rtt, loss[:, sl].mean(axis=0))]
    res["oracle"] = {k: v for k, v in constant_rate_oracle(L, lm, steps, seed, backend).items() if k != "per_link"}
    rs = slice(2 + len(lm), None)
    mocc_r = reward(rand_w[None, :, :], util[:, rs], rtt[:, rs], loss[:, rs])  # [links, objectives]
    medians = {"mocc": float(np.median(mocc_r))}
    if sim and Path(sim).is_file():
        for alg in CLASSIC:
            rows = [classic_run(sim, alg, link, max(per_link[i]["sim_time_s"], 10.0), seed + i) for i, link in enumerate(L)]
            cu = np.array([r["utilization"] for r in rows])[:, None]
            cr = np.array([r["rtt_ratio"] for r in rows])[:, None]
            cl = np.array([r["loss"] for r in rows])[:, None]
            medians[alg] = float(np.median(reward(rand_w[None, :, :], cu, cr, cl)))
        best = max((v, k) for k, v in medians.items() if k != "mocc")
        case(f"{links} links x {objectives} objectives, reward of eq. 2", "MOCC median above every classic one",
             f"MOCC {medians['mocc']:.3f}, best classic {best[1]} {best[0]:.3f}", medians["mocc"] > best[0])
    else:
        case(f"{links} links x {objectives} objectives, reward of eq. 2", "MOCC median above every classic one",
             f"MOCC {medians['mocc']:.3f}; classic not run ({sim} missing: cargo build --release -p polycc-sim)", False)
    res["median_reward"] = medians
    return res


def write_report(res: dict, out: Path, command: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval.json").write_text(json.dumps(res, indent=1) + "\n")
    lines = [f"Measured with `{command}`", "", "| case | target | measured | met |", "|---|---|---|---|"]
    lines += [f"| {c['case']} | {c['target']} | {c['measured']} | {'yes' if c['met'] else 'NO'} |" for c in res["cases"]]
    lines += ["", "| w_thr | w_lat | w_loss | utilization | RTT / base | loss |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['w'][0]:.1f} | {r['w'][1]:.1f} | {r['w'][2]:.1f} | {r['utilization']:.3f} | {r['rtt_ratio']:.3f} "
              f"| {r['loss_frac']:.4f} |" for r in res["landmarks"]]
    lines += ["", "Median reward (eq. 2) over links x objectives: " +
              ", ".join(f"{k} {v:.3f}" for k, v in res["median_reward"].items())]
    o = res["oracle"]
    lines += ["", "For reference, what eq. 2 itself asks for on these links: choosing per link and landmark the constant "
              "rate (x capacity, from " + ", ".join(map(str, ORACLE_RATES)) + ") with the highest reward gives "
              f"Spearman(w_thr, thr) {o['spearman_thr']:.3f} and Spearman(w_lat, -RTT) {o['spearman_lat']:.3f} "
              "(an oracle that knows the capacity; loss and latency both penalise sending above capacity, so w_loss "
              "lowers the RTT as w_lat does)."]
    (out / "eval.md").write_text("\n".join(lines) + "\n")
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    w = np.asarray([r["w"] for r in res["landmarks"]])
    fig, ax = plt.subplots(1, 3, figsize=(12, 3.5))
    ax[0].scatter(w[:, 0], [r["utilization"] for r in res["landmarks"]])
    ax[0].set(xlabel="w_thr", ylabel="utilization", title="throughput vs w_thr (36 landmarks)")
    ax[1].scatter(w[:, 1], [r["rtt_ratio"] for r in res["landmarks"]])
    ax[1].set(xlabel="w_lat", ylabel="mean RTT / base RTT", title="RTT vs w_lat")
    med = res["median_reward"]
    ax[2].bar(list(med), list(med.values()))
    ax[2].set(ylabel="median reward (eq. 2)", title="links x random objectives")
    ax[2].tick_params(axis="x", rotation=45)
    fig.tight_layout()
    fig.savefig(out / "landmarks.png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None, backend=rust_backend) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="onnx/mocc.onnx")
    ap.add_argument("--links", type=int, default=10)
    ap.add_argument("--objectives", type=int, default=100)
    ap.add_argument("--steps", type=int, default=400, help="monitor intervals per episode")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--sim", default=DEFAULT_SIM, help="polycc-sim for the classic algorithms")
    ap.add_argument("--out", default="onnx/runs/eval")
    a = ap.parse_args(argv)
    if a.links < 2 or a.objectives < 1 or a.steps < 1:
        ap.error("--links >= 2, --objectives >= 1 and --steps >= 1")
    from .export import ExportError, validate  # noqa: PLC0415

    try:
        validate(a.model)
    except ExportError as e:
        print(f"mocc.evaluate: {e}", file=sys.stderr)
        return 2
    command = "PYTHONPATH=onnx/python python3 -m mocc.evaluate " + shlex.join(sys.argv[1:] if argv is None else argv)
    try:
        res = evaluate_model(a.model, a.links, a.objectives, a.steps, a.seed, a.sim, backend)
    except BackendMissing as e:
        print(f"mocc.evaluate: {e}", file=sys.stderr)
        return 4
    write_report(res, Path(a.out), command)
    for c in res["cases"]:
        print(f"{'MET ' if c['met'] else 'MISS'} {c['case']}: {c['measured']} (target {c['target']})")
    print(f"measured with: {command}; report in {a.out}/eval.md")
    return 0 if all(c["met"] for c in res["cases"]) else 1


if __name__ == "__main__":
    sys.exit(main())
