"""Online adaptation to an unseen objective with requirement replay (MOCC section 4.3).

    PYTHONPATH=onnx/python python3 -m mocc.adapt --model onnx/runs/train/model.zip \
        --weights 0.65,0.25,0.1 --iterations 60 --out onnx/runs/adapt

Starting from a trained model, every PPO iteration collects one batch on the new objective and one
equally large batch on an old objective drawn uniformly from the stored pool (the landmarks), and
updates on their union: each minibatch loss is the mean over both objectives' samples, i.e. the
mean of the two PPO losses (requirement replay). ``--no-replay`` trains on the new objective only,
for comparison.

Reported (adapt.json, adapt.csv, adapt.png): the evaluation reward on the new objective per
iteration; the iterations to 99 % of the maximum reward gain; and the reward change on old
objectives (the replay pool's evaluation before vs after). Exit status 0, 2 bad arguments, 4 no
simulator extension.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import torch
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
from tqdm import tqdm

from .config import PPOConfig
from .env import BackendMissing, MoccEnv, rust_backend, with_rtt_base
from .objectives import Weights, landmarks, validate_weights
from .policy import ActorMean
from .rollout import evaluate
from .checkpoint import load_model
from .train import EntropySchedule, ScaledReward, TrainConfig


@dataclass
class AdaptConfig:
    """One online adaptation run."""

    model: str = "onnx/runs/train/model.zip"
    """The base model (an SB3 checkpoint from mocc.train)."""
    weights: Weights = (0.65, 0.25, 0.1)
    """The unseen objective (not a landmark)."""
    iterations: int = 60
    """PPO iterations of online training."""
    replay: bool = True
    """Requirement replay: half of every batch on an old objective from the pool."""
    pool_size: int = 6
    """Old objectives stored (drawn from the landmarks) and evaluated before/after."""
    envs_per_objective: int = 1
    """Environments on the new objective (and as many on the old one) per iteration."""
    ent_coef: float = 0.0
    """Entropy coefficient during adaptation (the end of the offline schedule, config.PPOConfig.ent_coef_end)."""
    eval_links: int = 4
    """Fixed-seed evaluation links."""
    eval_every: int = 1
    """Evaluate the new objective every this many iterations."""
    seed: int = 7
    """Seeds the links, the pool draw and PPO."""
    out_dir: str = "onnx/runs/adapt"
    """Where adapt.json / adapt.csv / adapt.png go."""


def iterations_to_fraction(rewards: list[float], fraction: float = 0.99) -> tuple[int, float]:
    """First iteration whose gain over rewards[0] reaches ``fraction`` of the maximum gain (and that gain)."""
    gains = np.asarray(rewards) - rewards[0]
    best = float(gains.max())
    if best <= 0:
        return 0, 0.0
    return int(np.argmax(gains >= fraction * best)), best


def run_adaptation(cfg: AdaptConfig, backend=rust_backend, show_progress: bool = True) -> dict:
    torch.set_num_threads(1)
    rng = np.random.default_rng(cfg.seed)
    train_cfg = TrainConfig.from_dict(json.loads((Path(cfg.model).parent / "config.json").read_text())["config"]) \
        if (Path(cfg.model).parent / "config.json").exists() else TrainConfig()
    backend = with_rtt_base(backend, train_cfg.rtt_base)  # the observation the model was trained on
    pool = [landmarks()[i] for i in rng.choice(36, size=cfg.pool_size, replace=False)]
    n_new = cfg.envs_per_objective
    n_envs = 2 * n_new if cfg.replay else n_new
    fns = [partial(MoccEnv, cfg.weights, train_cfg.link, cfg.seed * 1000 + i, train_cfg.episode_steps, backend)
           for i in range(n_envs)]
    env = ScaledReward(SubprocVecEnv(fns, start_method="fork") if n_envs > 1 else DummyVecEnv(fns))
    model = load_model(cfg.model, env)
    model.set_random_seed(cfg.seed)
    model.ent_coef = cfg.ent_coef
    actor = ActorMean(model.policy)
    seeds = [cfg.seed * 1000 + 700 + i for i in range(cfg.eval_links)]

    def ev(w):
        return evaluate(actor, w, seeds, train_cfg.eval_steps, train_cfg.link, backend)

    old_before = {",".join(map(str, w)): ev(w).reward for w in pool}
    rewards = [ev(cfg.weights).reward]
    rows = [{"iteration": 0, "reward": rewards[0], "replayed": ""}]
    state = {"iteration": 0}
    sched = EntropySchedule(PPOConfig(ent_coef_start=cfg.ent_coef, ent_coef_end=cfg.ent_coef), state)
    started = time.monotonic()
    for it in tqdm(range(1, cfg.iterations + 1), desc="mocc adapt", unit="it", disable=not show_progress):
        old = pool[rng.integers(len(pool))]
        env.env_method("set_objective", cfg.weights, indices=list(range(n_new)))
        if cfg.replay:
            env.env_method("set_objective", old, indices=list(range(n_new, n_envs)))
        model._last_obs = env.reset()  # noqa: SLF001 - new weights from the first observation on
        model._last_episode_starts = np.ones((n_envs,), dtype=bool)  # noqa: SLF001
        model.learn(total_timesteps=model.n_steps * n_envs, callback=sched, reset_num_timesteps=False)
        if it % cfg.eval_every == 0 or it == cfg.iterations:
            rewards.append(ev(cfg.weights).reward)
            rows.append({"iteration": it, "reward": rewards[-1], "replayed": ",".join(map(str, old)) if cfg.replay else ""})
    env.close()
    old_after = {",".join(map(str, w)): ev(w).reward for w in pool}
    change = {k: (old_after[k] - old_before[k]) / abs(old_before[k]) for k in old_before}
    its = [r["iteration"] for r in rows]
    idx, gain = iterations_to_fraction(rewards)
    result = {
        "config": {**cfg.__dict__, "weights": list(cfg.weights)},
        "reward_before": rewards[0], "reward_after": rewards[-1], "max_gain": gain,
        "iterations_to_99pct_gain": its[idx],
        "old_objectives_reward_change": change,
        "worst_old_change": min(change.values()), "mean_old_change": float(np.mean(list(change.values()))),
        "wall_s": round(time.monotonic() - started, 1),
    }
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "adapt.json").write_text(json.dumps(result, indent=1) + "\n")
    with (out / "adapt.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["iteration", "reward", "replayed"])
        w.writeheader()
        w.writerows(rows)
    plot(its, rewards, its[idx], out / "adapt.png", cfg.weights)
    return result


def plot(its, rewards, hit, path: Path, w) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(its, rewards, marker=".")
    ax.axvline(hit, color="grey", ls="--", label=f"99 % of max gain at {hit}")
    ax.set_xlabel("online iteration")
    ax.set_ylabel("evaluation reward (eq. 2)")
    ax.set_title(f"online adaptation to w = {tuple(w)}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None, backend=rust_backend) -> int:
    d = AdaptConfig()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=d.model)
    ap.add_argument("--weights", default=",".join(map(str, d.weights)), help="w_thr,w_lat,w_loss")
    ap.add_argument("--iterations", type=int, default=d.iterations)
    ap.add_argument("--no-replay", action="store_true")
    ap.add_argument("--eval-links", type=int, default=d.eval_links)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--out", default=d.out_dir)
    a = ap.parse_args(argv)
    try:
        w = validate_weights(float(x) for x in a.weights.split(","))
    except ValueError as e:
        ap.error(f"--weights: {e}")
    if a.iterations < 1:
        ap.error("--iterations must be >= 1")
    if not Path(a.model).is_file():
        print(f"mocc.adapt: {a.model}: no such checkpoint (train one with make train)", file=sys.stderr)
        return 2
    cfg = AdaptConfig(model=a.model, weights=w, iterations=a.iterations, replay=not a.no_replay,
                      eval_links=a.eval_links, seed=a.seed, out_dir=a.out)
    try:
        r = run_adaptation(cfg, backend)
    except BackendMissing as e:
        print(f"mocc.adapt: {e}", file=sys.stderr)
        return 4
    print(f"w = {w}: reward {r['reward_before']:.4f} -> {r['reward_after']:.4f}; 99 % of the max gain "
          f"({r['max_gain']:.4f}) after {r['iterations_to_99pct_gain']} iterations (target <= 50); old objectives "
          f"changed by {100 * r['worst_old_change']:+.1f} % at worst, {100 * r['mean_old_change']:+.1f} % on average "
          f"(target >= -5 %); {r['wall_s']} s; details in {cfg.out_dir}/adapt.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
