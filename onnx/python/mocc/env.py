"""The MOCC training environment: gymnasium over the project's Rust simulator (``polycc_gym.Env``).

Observation = ``[w_thr, w_lat, w_loss]`` + the 30 raw history values the Rust side computes (the
same observation code the agent serves with). Reward (MOCC eq. 2) =
``w_thr O_thr + w_lat O_lat + w_loss O_loss`` with ``O_thr = throughput / capacity``,
``O_lat = base RTT / RTT`` and ``O_loss = 1 - loss rate`` (algorithms.md section 8). The weight
vector is part of the environment's state: set it with ``set_objective`` (sticky, applies from the
next reset) or per episode with ``reset(options={"weights": w})``.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from .config import ACTION_CLIP, OBS_DIM, STATE_DIM
from .objectives import Weights, validate_weights


class BackendMissing(RuntimeError):
    """The polycc_gym extension is not importable."""


def rust_backend(link: str, seed: int, episode_steps: int, rtt_base: str = "lowest"):
    """The Rust simulator through pyo3 (onnx/gym, built with ``make gym``). ``rtt_base``: what the observation's
    latency ratio divides by, ``lowest`` (the lowest MI RTT so far) or ``lowest-10s`` (over the last 10 s);
    the exported model records it as ``polycc.rtt_base``."""
    try:
        import polycc_gym  # noqa: PLC0415
    except ImportError as e:
        raise BackendMissing(
            "the polycc_gym extension is not installed: build it with `make gym` "
            "(maturin develop --release -m onnx/gym/Cargo.toml)") from e
    if rtt_base == "lowest":  # the extension's default; an extension built before the setting runs it too
        return polycc_gym.Env(link=link, seed=seed, episode_steps=episode_steps)
    return polycc_gym.Env(link=link, seed=seed, episode_steps=episode_steps, rtt_base=rtt_base)


RTT_BASES = ("lowest", "lowest-10s")
"""The latency ratio's bases the simulator computes (``polycc.rtt_base``)."""


def with_rtt_base(backend: "BackendFactory", rtt_base: str) -> "BackendFactory":
    """``backend`` whose environments carry the latency ratio against ``rtt_base`` (a backend that cannot is
    refused when it is called with it)."""
    if rtt_base not in RTT_BASES:
        raise ValueError(f"rtt_base {rtt_base!r}: expected one of {', '.join(RTT_BASES)}")
    return backend if rtt_base == "lowest" else partial(backend, rtt_base=rtt_base)


BackendFactory = Callable[[str, int, int], Any]


def serve_preference(sim, weights) -> None:
    """Have ``sim``'s flow serve ``weights`` from its next reset on, as a deployed flow with that preference does
    (the queue its drain guard lets stand, ``Preference::drain_latency_ratio``); the reward stays the caller's. A
    deployed preference has no weight of 0 or 1, so those are moved just inside. A backend without the setting
    (an extension built before it), or all-zero weights (the oracle's runs, which serve none), runs the guard at a
    base RTT of queue."""
    if not hasattr(sim, "set_preference"):
        return
    w = np.asarray(weights, dtype=np.float64)
    if not w.sum() > 0:
        sim.set_preference(None)
        return
    w = np.clip(w, 1e-6, 1.0)
    sim.set_preference([float(x) for x in w / w.sum()])


class MoccEnv(gym.Env):
    """One sender on one simulated link per episode; see the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, weights: Weights = (0.6, 0.3, 0.1), link: str = "envelope", seed: int = 0,
                 episode_steps: int = 400, backend: BackendFactory = rust_backend):
        super().__init__()
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(OBS_DIM,), dtype=np.float32)
        self.action_space = gym.spaces.Box(-ACTION_CLIP, ACTION_CLIP, shape=(1,), dtype=np.float32)
        self.weights = np.asarray(validate_weights(weights), dtype=np.float32)
        self.sim = backend(link, seed, episode_steps)
        self._next_seed: int | None = seed

    def set_objective(self, weights: Weights) -> None:
        """Use ``weights`` from the next reset on."""
        self.weights = np.asarray(validate_weights(weights), dtype=np.float32)

    def _obs(self, history: np.ndarray) -> np.ndarray:
        history = np.asarray(history, dtype=np.float32)
        if history.shape != (STATE_DIM,):
            raise ValueError(f"polycc_gym returned an observation of shape {history.shape}, expected ({STATE_DIM},)")
        return np.concatenate([self.weights, history]).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if options and "weights" in options:
            self.set_objective(options["weights"])
        if seed is None:
            seed, self._next_seed = self._next_seed, None
        serve_preference(self.sim, self.weights)
        history = self.sim.reset(seed)
        return self._obs(history), {}

    def step(self, action):
        a = float(np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[0], -ACTION_CLIP, ACTION_CLIP))
        history, o_thr, o_lat, o_loss, done, info = self.sim.step(a)
        objectives = np.array([o_thr, o_lat, o_loss], dtype=np.float64)
        reward = float(np.dot(self.weights.astype(np.float64), objectives))
        info = dict(info)
        info.update(o_thr=float(o_thr), o_lat=float(o_lat), o_loss=float(o_loss), action=a)
        # The episode ends by its step limit: a truncation, so PPO bootstraps from V(s_T).
        return self._obs(history), reward, False, bool(done), info
