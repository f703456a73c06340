"""experiments/run's progress on stderr: one tqdm bar per scenario (its runs done, elapsed<remaining:
the scenario's ETA), left on screen when the scenario ends, whose postfix carries the whole run's
count and ETA. The whole run's ETA weighs each run by its planned seconds, so that a scenario of
60 s runs counts four times one of 15 s runs (issue 20: long runs gave no idea when they would end).
"""

from __future__ import annotations

import sys
import time

from tqdm import tqdm


class Progress:
    def __init__(self, planned: dict[str, list[float]], disable: bool = False, clock=time.monotonic):
        """planned: each scenario's runs' planned seconds (duration), in the order they run."""
        self.clock = clock
        self.planned = {name: list(secs) for name, secs in planned.items()}
        self.disable = disable
        self.total_runs = sum(len(s) for s in self.planned.values())
        self.total_s = sum(sum(s) for s in self.planned.values())
        self.done_runs, self.done_s = 0, 0.0
        self.started = clock()
        self.current: str | None = None
        self.bar: tqdm | None = None

    def add(self, name: str, seconds: float) -> None:
        """One more item to run under its own name (the guest's IPC benchmark)."""
        self.planned.setdefault(name, []).append(seconds)
        self.total_runs += 1
        self.total_s += seconds

    def start(self, name: str) -> None:
        """Show the bar of the scenario that runs now (closing the one before)."""
        if name == self.current:
            return
        self._close_bar()
        self.current = name
        self.bar = tqdm(
            total=len(self.planned.get(name, [])) or 1,
            desc=name,
            unit="run",
            disable=self.disable,
            dynamic_ncols=True,
            mininterval=0.1 if sys.stderr.isatty() else 10.0,
            postfix=self.overall(),
        )

    def step(self, name: str, what: str = "") -> None:
        """One run of scenario `name` ended; `what` says which (its cell and scheme)."""
        self.start(name)
        secs = self.planned.get(name, [])
        i = self.bar.n
        self.done_runs += 1
        self.done_s += secs[i] if i < len(secs) else 0.0
        self.bar.set_postfix_str(f"{what}, {self.overall()}" if what else self.overall(), refresh=False)
        self.bar.update(1)

    def overall(self) -> str:
        """The whole run: runs done of all, and the time left at the pace so far per planned second."""
        eta = "?"
        if self.done_s > 0:
            left = (self.clock() - self.started) * (self.total_s - self.done_s) / self.done_s
            eta = tqdm.format_interval(max(left, 0.0))
        return f"all: {self.done_runs}/{self.total_runs} runs, ETA {eta}"

    def _close_bar(self) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(self.overall(), refresh=False)
            self.bar.close()
            self.bar = None

    def close(self) -> None:
        self._close_bar()
