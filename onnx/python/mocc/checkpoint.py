"""Building and loading MOCC's PPO model: a fresh policy, PPO over an environment, a saved
checkpoint. What training (``mocc.train``), export (``mocc.export``) and adaptation share, so
that export does not import the trainer and the trainer imports export only to finish a run."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.vec_env import VecEnv

from .config import ACTION_CLIP, OBS_DIM, ModelConfig, TrainConfig
from .policy import policy_kwargs


def build_policy(seed: int, model: ModelConfig | None = None, log_std_init: float = 0.0) -> ActorCriticPolicy:
    """A freshly initialised MOCC policy without an environment (export tests, untrained models)."""
    import gymnasium as gym  # noqa: PLC0415

    torch.manual_seed(seed)
    obs = gym.spaces.Box(-np.inf, np.inf, shape=(OBS_DIM,), dtype=np.float32)
    act = gym.spaces.Box(-ACTION_CLIP, ACTION_CLIP, shape=(1,), dtype=np.float32)
    return ActorCriticPolicy(obs, act, lambda _: 1e-3, **policy_kwargs(model or ModelConfig(), log_std_init))


class _PolicyHolder:
    def __init__(self, policy):
        self.policy = policy


def build_model(env: VecEnv | None, seed: int, cfg: TrainConfig | None = None):
    """PPO over ``env`` with the MOCC policy; without an env, an object with a fresh ``.policy``."""
    cfg = cfg or TrainConfig()
    if env is None:
        return _PolicyHolder(build_policy(seed, cfg.model, cfg.ppo.log_std_init))
    p = cfg.ppo
    return PPO(ActorCriticPolicy, env, learning_rate=p.learning_rate, n_steps=p.n_steps, batch_size=p.batch_size,
               n_epochs=p.n_epochs, gamma=p.gamma, gae_lambda=p.gae_lambda, clip_range=p.clip_range,
               ent_coef=p.ent_coef(0), vf_coef=p.vf_coef, max_grad_norm=p.max_grad_norm,
               policy_kwargs=policy_kwargs(cfg.model, p.log_std_init), seed=seed, device="cpu", verbose=0)


def load_model(path: str | os.PathLike, env: VecEnv | None = None, learning_rate: float | None = None) -> PPO:
    """A saved checkpoint; ``learning_rate`` replaces the step size it was saved with (SB3 builds the
    schedule from it on load), as a run started from another run's weights trains with its own."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: no such checkpoint")
    overrides = {} if learning_rate is None else {"learning_rate": learning_rate}
    return PPO.load(str(path), env=env, device="cpu", **overrides)
