"""A throw-away stand-in for polycc_gym.Env, for unit tests of the Python side only.

Nothing shipped trains on it: mocc.train and mocc.evaluate use the Rust simulator. It honours the
interface (30 raw history values, the alpha = 0.025 rate update, O_thr/O_lat/O_loss, the info keys)
with a crude fluid bottleneck so that tests can check learning moves rewards the right way.
"""

from __future__ import annotations

import numpy as np

ALPHA = 0.025


class FakeEnv:
    def __init__(self, link: str = "envelope", seed: int = 0, episode_steps: int = 400):
        if link not in ("envelope", "wide", "users", "users+cubic"):
            raise ValueError(f"unknown link range {link!r}")
        self.link, self.episode_steps = link, episode_steps
        self.rng = np.random.default_rng(seed)

    fixed = None

    def fix_link(self, bandwidth_mbps=None, one_way_delay_s=0.05, queue_packets=20, loss=0.0, initial_rate_mbps=None,
                 change_at_s=None, change_bandwidth_mbps=None):
        self.fixed = None if bandwidth_mbps is None else (bandwidth_mbps * 1e6, one_way_delay_s, queue_packets, loss)
        self.change = None if change_at_s is None else (change_at_s, change_bandwidth_mbps * 1e6)

    def reset(self, seed: int | None = None) -> np.ndarray:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        r = self.rng
        self.bw = r.uniform(1.2e6, 6e6)                  # bit/s
        self.base_rtt = 2 * r.uniform(0.05, 0.5)        # s
        self.buffer_s = (1 + np.exp(r.uniform(0, 4))) * 12000 / self.bw
        self.loss_p = r.uniform(0, 0.03)
        if self.fixed:
            self.bw, owd, q, self.loss_p = self.fixed
            self.base_rtt, self.buffer_s = 2 * owd, q * 12000 / self.bw
        self.rate = r.uniform(0.3, 1.5) * self.bw
        self.queue_s, self.t, self.min_rtt, self.rtts = 0.0, 0, None, []
        self.hist = [np.array([1.0, 1.0, 0.0])] * 10
        return np.concatenate(self.hist).astype(np.float32)

    change = None

    def p95_rtt_s(self) -> float | None:
        """The p95 of the per-step RTTs (the real one reads per-packet RTTs)."""
        return float(np.percentile(self.rtts, 95)) if self.rtts else None

    def step(self, a: float):
        if self.change and self.t > 0 and self.sim_time >= self.change[0]:
            self.bw = self.change[1]
        self.rate = self.rate * (1 + ALPHA * a) if a >= 0 else self.rate / (1 - ALPHA * a)
        self.rate = float(np.clip(self.rate, 0.01 * self.bw, 10 * self.bw))
        mi = max(0.5 * (self.base_rtt + self.queue_s), 0.01)
        q0 = self.queue_s
        self.queue_s = max(0.0, self.queue_s + (self.rate - self.bw) / self.bw * mi)
        overflow = max(0.0, self.queue_s - self.buffer_s)
        self.queue_s = min(self.queue_s, self.buffer_s)
        drop = overflow * self.bw / mi / self.rate
        loss = min(1.0, self.loss_p + drop)
        thr = min(self.rate * (1 - loss), self.bw)
        rtt = self.base_rtt + 0.5 * (q0 + self.queue_s)
        self.min_rtt = rtt if self.min_rtt is None else min(self.min_rtt, rtt)
        self.rtts.append(rtt)
        send_ratio = self.rate / max(thr, 1.0)
        self.hist = self.hist[1:] + [np.array([send_ratio, rtt / self.min_rtt, (self.queue_s - q0) / mi])]
        self.t += 1
        self.sim_time = getattr(self, "sim_time", 0.0) + mi if self.t > 1 else mi
        info = {"throughput_bps": thr, "rtt_s": rtt, "loss": loss, "capacity_bps": self.bw,
                "base_rtt_s": self.base_rtt, "rate_bps": self.rate, "sim_time_s": self.sim_time}
        obs = np.concatenate(self.hist).astype(np.float32)
        return obs, thr / self.bw, self.base_rtt / rtt, 1 - loss, self.t >= self.episode_steps, info


def fake_backend(link: str, seed: int, episode_steps: int, rtt_base: str = "lowest") -> FakeEnv:
    """A fake environment; ``rtt_base`` is taken (as polycc_gym.Env takes it) and has no effect here."""
    return FakeEnv(link, seed, episode_steps)


def fake_sample_link(link: str, seed: int, episode_steps: int) -> dict:
    """polycc_gym.sample_link's keys, drawn crudely (every other seed with a bandwidth change)."""
    r = np.random.default_rng(seed)
    bw, owd = r.uniform(2e6, 20e6), r.uniform(0.01, 0.05)
    change = seed % 2 == 0
    return {"bandwidth_bps": bw, "one_way_delay_s": owd, "queue_packets": int(r.integers(5, 40)),
            "loss": r.uniform(0, 0.02), "initial_rate_bps": bw * r.uniform(0.3, 1.5),
            "change_at_s": owd * episode_steps / 2 if change else None,
            "change_bandwidth_bps": bw / 2 if change else None, "competitor_start_s": None}
