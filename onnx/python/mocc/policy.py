"""The MOCC network: fixed observation normaliser, preference sub-network + network-state branch.

Both the actor and the critic own one ``MoccExtractor`` (SB3 ``share_features_extractor=False``),
each followed by the MLP 64 -> 32 tanh; the actor ends in the mean of a Gaussian (state-independent
log std, SB3's DiagGaussian). The exported model is ``ActorMean`` = normaliser + extractor + actor
MLP + mean head, nothing else.
"""

from __future__ import annotations

import json

import torch
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from .config import ACTION_CLIP, HISTORY, OBS_DIM, PREF_DIM, STATE_DIM, ModelConfig

SEND_RATIO_RANGE = (1e-3, 1e3)
"""send_ratio is clipped to this range before its natural log (1 = sending what is received)."""
LATENCY_RATIO_RANGE = (1.0, 1e3)
"""latency_ratio (>= 1 by definition) is clipped to this range before its natural log."""
LATENCY_GRADIENT_CLIP = 5.0
"""latency_gradient is clipped to +-this (it is dimensionless, |x| << 1 on most links)."""


def normalization_spec() -> dict:
    """The in-graph normalisation in words and numbers (the ``polycc.normalization`` metadata)."""
    return {
        "weights": "identity",
        "send_ratio": {"op": "ln(clip(x, lo, hi))", "lo": SEND_RATIO_RANGE[0], "hi": SEND_RATIO_RANGE[1]},
        "latency_ratio": {"op": "ln(clip(x, lo, hi))", "lo": LATENCY_RATIO_RANGE[0], "hi": LATENCY_RATIO_RANGE[1]},
        "latency_gradient": {"op": "clip(x, -c, c)", "c": LATENCY_GRADIENT_CLIP},
        "inside_graph": True,
    }


class ObsNormalizer(nn.Module):
    """Fixed (not learned) transform of the raw history; exported inside the ONNX graph.

    Only Reshape, Slice, Clip, Log and Concat, so every ONNX runtime (tract included) runs it.
    Non-finite inputs are the caller's to sanitise (the Rust side clamps its reports).
    """

    def forward(self, history: torch.Tensor) -> torch.Tensor:
        x = history.reshape(-1, HISTORY, 3)
        send = torch.log(torch.clamp(x[:, :, 0:1], SEND_RATIO_RANGE[0], SEND_RATIO_RANGE[1]))
        lat = torch.log(torch.clamp(x[:, :, 1:2], LATENCY_RATIO_RANGE[0], LATENCY_RATIO_RANGE[1]))
        grad = torch.clamp(x[:, :, 2:3], -LATENCY_GRADIENT_CLIP, LATENCY_GRADIENT_CLIP)
        return torch.cat([send, lat, grad], dim=2).reshape(-1, STATE_DIM)


class MoccExtractor(BaseFeaturesExtractor):
    """[w | history] -> concat(tanh(Linear(w)), tanh(Linear(normalised history)))."""

    def __init__(self, observation_space, pref_hidden: int = 16, state_hidden: int = 64):
        if observation_space.shape != (OBS_DIM,):
            raise ValueError(f"MOCC observations have shape ({OBS_DIM},), got {observation_space.shape}")
        super().__init__(observation_space, features_dim=pref_hidden + state_hidden)
        self.normalizer = ObsNormalizer()
        self.preference = nn.Sequential(nn.Linear(PREF_DIM, pref_hidden), nn.Tanh())
        self.state = nn.Sequential(nn.Linear(STATE_DIM, state_hidden), nn.Tanh())

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        w, history = obs[:, :PREF_DIM], obs[:, PREF_DIM:]
        return torch.cat([self.preference(w), self.state(self.normalizer(history))], dim=1)


def policy_kwargs(model: ModelConfig, log_std_init: float = 0.0) -> dict:
    arch = list(model.net_arch)
    return dict(
        features_extractor_class=MoccExtractor,
        features_extractor_kwargs=dict(pref_hidden=model.pref_hidden, state_hidden=model.state_hidden),
        share_features_extractor=False,
        net_arch=dict(pi=arch, vf=arch),
        activation_fn=nn.Tanh,
        log_std_init=log_std_init,
    )


class ActorMean(nn.Module):
    """The deterministic action: extractor + actor MLP + Gaussian mean, clipped. What gets exported.

    The clip to [-ACTION_CLIP, ACTION_CLIP] is what the training env applied to every action (the
    action space's bounds) and what the serving side applies anyway; inside the graph it also keeps
    outputs small enough that float32 rounding stays far below the 1e-5 golden tolerance (a mean of
    70 is 2 ULP = 1.5e-5 away from itself across runtimes).
    """

    def __init__(self, policy: ActorCriticPolicy):
        super().__init__()
        self.extractor = policy.pi_features_extractor
        self.mlp = policy.mlp_extractor.policy_net
        self.mean = policy.action_net

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.clamp(self.mean(self.mlp(self.extractor(obs))), -ACTION_CLIP, ACTION_CLIP)


class DeployedActor(nn.Module):
    """``ActorMean`` rewritten for serving with the same function and fewer graph operations.

    The per-decision cost of a runtime like tract is mostly per operation (about 44 after tract's
    optimisation for ``ActorMean``: two input slices, three feature slices, three clips, a concat and
    reshapes, the first layers split in pieces), not arithmetic. Here the normaliser is elementwise
    over the whole 33-vector (max, min, ln and a select: ln where the layout has a ratio, the clipped
    value elsewhere; the weights pass through the +-float32-max bounds unchanged) and the preference
    and state layers are one block-diagonal linear layer (33 -> pref_hidden + state_hidden; the zero
    blocks add exact zeros, so for finite inputs each output is the same sum as before). The layers
    after it are the trained ones. ``export`` checks it against ``ActorMean`` before writing.
    """

    def __init__(self, actor: ActorMean):
        super().__init__()
        ext = actor.extractor
        pref, state = ext.preference[0], ext.state[0]
        big = float(torch.finfo(torch.float32).max)
        lo, hi, ratio = torch.full((OBS_DIM,), -big), torch.full((OBS_DIM,), big), torch.zeros(OBS_DIM, dtype=torch.bool)
        for k, (a, b) in enumerate((SEND_RATIO_RANGE, LATENCY_RATIO_RANGE,
                                    (-LATENCY_GRADIENT_CLIP, LATENCY_GRADIENT_CLIP))):
            idx = slice(PREF_DIM + k, OBS_DIM, 3)
            lo[idx], hi[idx] = a, b
            ratio[idx] = k < 2
        self.register_buffer("lo", lo[None])
        self.register_buffer("hi", hi[None])
        self.register_buffer("ratio", ratio[None])
        first = nn.Linear(OBS_DIM, pref.out_features + state.out_features)
        with torch.no_grad():
            first.weight.zero_()
            first.weight[:pref.out_features, :PREF_DIM] = pref.weight
            first.weight[pref.out_features:, PREF_DIM:] = state.weight
            first.bias.copy_(torch.cat([pref.bias, state.bias]))
        self.first = first
        self.mlp = actor.mlp
        self.mean = actor.mean

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = torch.minimum(torch.maximum(obs, self.lo), self.hi)
        x = torch.where(self.ratio, torch.log(x), x)
        return torch.clamp(self.mean(self.mlp(torch.tanh(self.first(x)))), -ACTION_CLIP, ACTION_CLIP)


def describe(model: ModelConfig) -> str:
    return json.dumps({"pref_hidden": model.pref_hidden, "state_hidden": model.state_hidden,
                       "net_arch": list(model.net_arch), "activation": "tanh"})
