"""runner.guest.Sampler: the sock_diag sampler the runner and the e2e tests start beside a flow."""

from __future__ import annotations

import tempfile
import time
import unittest
from pathlib import Path
from unittest import mock

from runner import guest


class SamplerTest(unittest.TestCase):
    def test_a_samples_file_left_by_an_earlier_run_does_not_pass_for_the_new_sampler(self):
        # The e2e tests write their samples into the results folder, which outlives the guest: on
        # 2026-12-02 a second `make e2e-test` read the first boot's files (a sampler that had not yet
        # started looked ready), and the startup row's times to 80 % came out at -75 s.
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "startup-fused-0.diag.jsonl"
            path.write_text('{"t0_monotonic_s": 321.4}\n{"t_s": 0.1, "acked_bytes": 1}\n')
            slow_start = ["sh", "-c", f"sleep 0.5; echo '{{\"t0_monotonic_s\": 7.5}}' > {path}; exec sleep 30"]
            with mock.patch.object(guest, "ns", lambda name, *cmd: slow_start):
                t = time.monotonic()
                sampler = guest.Sampler(0.1, path)
                waited = time.monotonic() - t
                rows, t0 = sampler.stop()
        self.assertGreaterEqual(waited, 0.4, "the sampler must wait for its own first line")
        self.assertEqual((rows, t0), ([], 7.5))


if __name__ == "__main__":
    unittest.main()
