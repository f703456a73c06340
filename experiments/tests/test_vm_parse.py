"""The guest backend's parsing, on synthetic raw measurements (no guest needed)."""

from __future__ import annotations

import socket
import struct
import unittest

from runner import diag, fidelity, runs, scenario, sim_backend, vm_backend
from runner.guest import link_env


def sample(t: float, acked: int, sport: int = 40000, rtt_ms: float = 120.5) -> dict:
    return {
        "t_s": t,
        "sport": sport,
        "dport": 5201,
        "rtt_ms": rtt_ms,
        "mss_bytes": 1448,
        "cwnd_packets": 50,
        "unacked_packets": 40,
        "retransmits": 2,
        "acked_bytes": acked,
    }


def diag_msg(
    sport: int, dport: int, dst: str, rtt_us: int, cwnd: int, acked: int, ssthresh: int = diag.TCP_INFINITE_SSTHRESH
) -> bytes:
    """An inet_diag_msg with an INET_DIAG_INFO attribute, as the kernel sends it."""
    sockid = (
        struct.pack("!HH", sport, dport)
        + socket.inet_aton("10.77.0.1")
        + b"\0" * 12
        + socket.inet_aton(dst)
        + b"\0" * 12
        + b"\0" * 12
    )
    msg = struct.pack("=BBBB", socket.AF_INET, 1, 0, 0) + sockid + b"\0" * 20
    info = bytearray(232)
    struct.pack_into("=I", info, diag.TI_SND_MSS, 1448)
    struct.pack_into("=I", info, diag.TI_UNACKED, 7)
    struct.pack_into("=I", info, diag.TI_RTT_US, rtt_us)
    struct.pack_into("=I", info, diag.TI_SND_CWND, cwnd)
    struct.pack_into("=I", info, diag.TI_SND_SSTHRESH, ssthresh)
    struct.pack_into("=I", info, diag.TI_TOTAL_RETRANS, 3)
    struct.pack_into("=I", info, diag.TI_LOST, 2)
    info[diag.TI_CA_STATE], info[diag.TI_BACKOFF] = 4, 3  # TCP_CA_Loss, the timer doubled three times
    struct.pack_into("=I", info, diag.TI_RTO_US, 1_600_000)
    struct.pack_into("=I", info, diag.TI_LAST_DATA_SENT_MS, 900)
    struct.pack_into("=Q", info, diag.TI_BYTES_ACKED, acked)
    struct.pack_into("=Q", info, diag.TI_PACING_RATE, 5_625_000)
    struct.pack_into("=QQQ", info, diag.TI_BUSY_TIME, 9_000_000, 1_500_000, 250)
    return msg + struct.pack("=HH", 4 + len(info), diag.INET_DIAG_INFO) + bytes(info)


def iperf(bytes_received: int, seconds: float, retrans: int, sent: int) -> dict:
    return {
        "end": {
            "sum_received": {"bytes": bytes_received, "bits_per_second": bytes_received * 8 / seconds},
            "sum_sent": {"bytes": sent, "retransmits": retrans},
        },
        "intervals": [{"sum": {"start": i * 0.5, "bits_per_second": 10e6}} for i in range(int(seconds * 2))],
    }


class VmParseTest(unittest.TestCase):
    def test_sock_diag_message_to_sample(self):
        msg = diag_msg(40000, 5201, "10.77.0.2", 120_500, 50, 123_456_789)
        self.assertEqual(
            diag.parse_msg(msg, socket.inet_aton("10.77.0.2")),
            {
                "sport": 40000,
                "dport": 5201,
                "rtt_ms": 120.5,
                "mss_bytes": 1448,
                "cwnd_packets": 50,
                "ssthresh_packets": None,  # still in its first slow start
                "unacked_packets": 7,
                "retransmits": 3,
                "lost_packets": 2,
                "ca_state": "loss",
                "rto_backoff_events": 3,
                "rto_ms": 1600.0,
                "since_data_sent_ms": 900,
                "acked_bytes": 123_456_789,
                "pacing_rate_bytes_per_sec": 5_625_000,
                "busy_us": 9_000_000,  # sending, of which held by the receiver's window and the send buffer
                "rwnd_limited_us": 1_500_000,
                "sndbuf_limited_us": 250,
            },
        )
        # HyStart or a loss set ssthresh: the window slow start ended at.
        ended = diag_msg(40000, 5201, "10.77.0.2", 120_500, 50, 123_456_789, ssthresh=42)
        self.assertEqual(diag.parse_msg(ended, None)["ssthresh_packets"], 42)
        # An in-kernel BBR flow's own estimates (INET_DIAG_BBRINFO): 2.5 MB/s, 42.5 ms, Startup's gains.
        bbr = struct.pack("=IIIII", 2_500_000, 0, 42_500, 739, 739)
        with_bbr = msg + struct.pack("=HH", 4 + len(bbr), diag.INET_DIAG_BBRINFO) + bbr
        row = diag.parse_msg(with_bbr, None)
        self.assertEqual((row["bbr_bw_bytes_per_sec"], row["bbr_min_rtt_ms"]), (2_500_000, 42.5))
        self.assertEqual((row["bbr_pacing_gain_ratio"], row["bbr_cwnd_gain_ratio"]), (2.887, 2.887))
        self.assertEqual(row["cwnd_packets"], 50)
        self.assertNotIn("bbr_min_rtt_ms", diag.parse_msg(msg, None))  # CUBIC, ccp: no such attribute
        self.assertIsNone(diag.parse_msg(msg, socket.inet_aton("10.77.0.9")))  # another destination
        self.assertIsNone(diag.parse_msg(msg[:60], None))

    def test_raw_run_to_record(self):
        # 10 s at 10 Mbit/s: 12.5 MB; ss every 100 ms, 125 kB acked per sample -> 10 Mbit/s.
        samples = [s for i in range(100) for s in (sample(0.1 * i, 125_000 * i), sample(0.1 * i, 200, 39999, 100.0))]
        raw = {
            "flows": [{"flow": 0, "start_s": 0.0, "iperf": iperf(12_500_000, 10.0, 100, 12_600_000)}],
            "ss": samples,
            "ss_t0_offset_s": -0.05,
            "tcp_counters": {"TcpExtTCPSACKReorder": 2},
            "udp_probe": {"data_path": {"packets": 10, "out_of_order": 0}},
            "cpu_ticks": {"user": 100, "system": 50, "softirq": 30, "idle": 820},
            "clk_tck": 100,
            "guest_kernel": "6.12.117+deb12-amd64",
        }
        sc = scenario.load(scenario.find("fidelity"))
        cell = sc.cells()[0]
        rec = runs.new_record(sc, "vm", cell, sc.schemes[1], 0, 1)
        rec.duration_s = 10.0
        vm_backend.parse_raw(raw, rec)
        runs.finish(rec, None, None)
        self.assertIsNone(rec.error)
        self.assertAlmostEqual(rec.goodput_mbps, 10.0)
        self.assertAlmostEqual(rec.loss_frac, 100 * 1448 / 12_600_000)
        # Only the data connection (the one with the most bytes acked) becomes flow 0's series.
        self.assertEqual(len(rec.series), 100)
        self.assertAlmostEqual(rec.series[5][0], 0.45)
        self.assertAlmostEqual(rec.series[5][2], 10.0)
        self.assertEqual(rec.series[5][3], 40 * 1448)
        self.assertAlmostEqual(rec.metrics["p95_delay_ms"], 120.5)
        self.assertAlmostEqual(rec.metrics["rtt_tput_median_mbps"], 10.0)
        self.assertAlmostEqual(rec.metrics["qdelay_p95_ms"], 80.5)  # 120.5 - 40 ms base RTT
        self.assertEqual(rec.extra["reordering"]["tcp_reorder_events"]["TcpExtTCPSACKReorder"], 2)
        self.assertAlmostEqual(rec.extra["cpu"]["total_s"], 1.8)
        self.assertEqual(rec.extra["per_second_mbps"], [10.0] * 9)  # 0 .. 9.9 s of samples
        self.assertTrue(rec.usable)  # no fidelity verdict (an older guest): counted
        self.assertEqual(rec.extra["guest_kernel"], "6.12.117+deb12-amd64")  # the report names it

    def test_the_pacing_probe_reaches_the_record_and_the_fidelity_lines(self):
        from runner import report

        sc = scenario.load(scenario.find("fidelity"))
        recs = []
        for i, (goodput, cap) in enumerate([(8.1, 10.0), (7.7, 10.0)]):
            raw = {"flows": [{"flow": 0, "start_s": 0.0, "iperf": iperf(12_500_000, 10.0, 100, 12_600_000)}],
                   "pacing_probe": {"cap_mbps": cap, "goodput_mbps": goodput,
                                    "wire_ratio": fidelity.wire_ratio(goodput, cap)}}
            rec = runs.new_record(sc, "vm", sc.cells()[i % len(sc.cells())], sc.schemes[0], i, 2)
            rec.duration_s = 10.0
            vm_backend.parse_raw(raw, rec)
            recs.append(rec)
        self.assertEqual(recs[0].extra["pacing_probe"]["goodput_mbps"], 8.1)
        line = next(x for x in report.guest_fidelity_lines(recs) if x.startswith("- pacing"))
        # 7.7 and 8.1 Mbit/s of goodput at the wire (headers), against a 10 Mbit/s cap.
        lo, hi = (100 * fidelity.wire_ratio(g, 10.0) for g in (7.7, 8.1))
        self.assertIn(f"{lo:.1f}-{hi:.1f} % of its cap over 2 links", line)

    def test_per_second_goodput_from_bytes_acked_starts_at_the_connection(self):
        # The data connection appears 1.3 s into the run (iperf3 connecting under TCG): 125 kB in its
        # first second, 1.25 MB a second after, sampled every 100 ms (once 350 ms apart: a stall, read
        # linearly between its samples, which is exact at a steady rate).
        times = [1.3 + 0.1 * i for i in range(25)] + [4.05] + [4.1 + 0.1 * i for i in range(25)]

        def acked(t: float) -> float:
            x = t - 1.3
            return 125_000 * x if x <= 1 else 125_000 + 1_250_000 * (x - 1)

        samples = [sample(round(t, 4), int(acked(t))) for t in sorted(times)]
        samples += [sample(0.1 * i, 300, 39999) for i in range(60)]  # the control connection, from t = 0
        per_s = vm_backend.per_second_mbps(samples, 30.0)
        self.assertEqual(len(per_s), 5)  # samples from 1.3 to 6.5 s: five whole seconds
        self.assertAlmostEqual(per_s[0], 1.0, places=3)
        for x in per_s[1:]:
            self.assertAlmostEqual(x, 10.0, places=3)
        self.assertEqual(vm_backend.per_second_mbps(samples, 2.0), [1.0, 10.0])  # cut at the run's length
        self.assertEqual(vm_backend.per_second_mbps([], 30.0), [])

    def test_iperf_error_is_a_failed_run(self):
        raw = {"flows": [{"flow": 0, "start_s": 0.0, "error": "unable to connect"}]}
        sc = scenario.load(scenario.find("fidelity"))
        rec = runs.new_record(sc, "vm", sc.cells()[0], sc.schemes[0], 0, 1)
        vm_backend.parse_raw(raw, rec)
        self.assertIn("unable to connect", rec.error)

    def test_link_env_splits_delay_with_jitter_on_the_ack_path(self):
        jittered = scenario.Link(bandwidth_mbps=20, rtt_ms=100, rtt_dev_ms=70, loss_frac=0.01)
        calm = scenario.Link(bandwidth_mbps=20, rtt_ms=40)
        plan = lambda link: {**vm_backend.plan_link(link), "seed": 1}
        env = link_env(plan(jittered))
        self.assertEqual((env["DELAY_MS"], env["ACK_DELAY_MS"], env["ACK_JITTER_MS"]), ("15", "85", "70"))
        self.assertEqual((env["RATE_MBIT"], env["LOSS_PCT"], env["BUFFER_BYTES"]), ("20", "1", "250000"))
        env = link_env(plan(calm))
        self.assertEqual((env["DELAY_MS"], env["ACK_DELAY_MS"], env["ACK_JITTER_MS"]), ("20", "20", "0"))
        # The router's random-loss netem (in front of tbf) exists where the link ever drops at
        # random: its base loss, or a redraw's range; tc changes then address tbf under it.
        self.assertEqual((link_env(plan(jittered))["LOSSY"], env["LOSSY"]), ("1", "0"))
        redrawn = {**plan(calm), "random_changes": {"every_s": 5, "bw_mbps": [10, 20], "rtt_ms": [10, 40], "loss_frac": [0, 0.01]}}
        self.assertEqual(link_env(redrawn)["LOSSY"], "1")
        # The simulator gets the same split.
        flags = sim_backend.link_flags(jittered, 10)
        self.assertEqual(flags[flags.index("--data-delay") + 1], "15ms")
        self.assertNotIn("--data-delay", sim_backend.link_flags(calm, 10))


if __name__ == "__main__":
    unittest.main()
