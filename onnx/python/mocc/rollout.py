"""Deterministic evaluation: the actor mean on fixed-seed links, batched across links."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .env import MoccEnv, rust_backend
from .objectives import Weights


@dataclass
class EvalResult:
    """Means over all links and all monitor intervals of one objective's evaluation."""

    weights: Weights
    reward: float
    """Mean per-step reward of eq. 2 under ``weights``."""
    utilization: float
    """Mean throughput / capacity."""
    rtt_ratio: float
    """Mean measured RTT / base RTT."""
    loss_frac: float
    """Mean loss rate (lost over sent packets)."""
    o_thr: float
    o_lat: float
    o_loss: float

    def row(self) -> dict:
        return {"w_thr": self.weights[0], "w_lat": self.weights[1], "w_loss": self.weights[2],
                "reward": self.reward, "utilization": self.utilization, "rtt_ratio": self.rtt_ratio,
                "loss_frac": self.loss_frac}


def evaluate(actor: torch.nn.Module, weights: Weights, link_seeds: list[int], steps: int = 400,
             link: str = "envelope", backend=rust_backend, skip: int = 0) -> EvalResult:
    """Run ``actor`` (obs -> mean action) deterministically on one link per seed for ``steps`` MIs.

    ``skip`` leading monitor intervals (the ramp from the random initial rate) are left out of the means.
    """
    envs = [MoccEnv(weights, link=link, seed=s, episode_steps=steps, backend=backend) for s in link_seeds]
    obs = np.stack([e.reset(seed=s)[0] for e, s in zip(envs, link_seeds)])
    sums = np.zeros(7)
    n = 0
    actor = actor.eval()
    for t in range(steps):
        with torch.no_grad():
            actions = actor(torch.from_numpy(obs)).numpy()
        rows = []
        for i, env in enumerate(envs):
            o, r, _, _, info = env.step(actions[i])
            rows.append(o)
            if t >= skip:
                sums += (r, info["throughput_bps"] / max(info["capacity_bps"], 1.0),
                         info["rtt_s"] / max(info["base_rtt_s"], 1e-9), info["loss"],
                         info["o_thr"], info["o_lat"], info["o_loss"])
                n += 1
        obs = np.stack(rows)
    m = sums / max(n, 1)
    return EvalResult(tuple(weights), *map(float, m))  # type: ignore[arg-type]
