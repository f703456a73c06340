"""Many flows on the e2e link: the kernel's Reno or CUBIC against ccp.ko's, by the sender's nstat counters.

    experiments/vm/polycc-vm run --results DIR --need iperf3 --need ethtool \\
        -- python3 experiments/many_flows.py --seconds 30 --schemes kernel-reno,fallback-reno,agent-reno

Each scheme in turn runs `iperf3 -P FLOWS` for SECONDS over datapath/tests/guest_e2e.py's link (20 Mbit/s,
40 ms, one BDP of buffer; 64 flows hold about two packets of window each) in one boot:
  kernel-ALG    the kernel's own ALG (reno, cubic)
  fallback-ALG  ccp.ko with no agent: its in-module fallback (Reno, whatever ALG says), no IPC
  agent-ALG     ccp.ko driven by polycc-portus --alg ALG
and writes DIR/many_flows.json: per scheme the utilization, the poorest flow's share of a fair share, the
timeouts and retransmitted segments, and every nstat counter that moved (the kernel's names, kept
verbatim). It is how docs/kernel-parity.md ("Many flows: the loss window after a timeout") told where
the agent's extra timeouts come from; the guest row `many_flows` (datapath/tests/test_e2e.py) checks
the agent's CUBIC against the kernel's on every `make test`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "datapath" / "tests"))
sys.path.insert(0, str(ROOT / "experiments"))
import guest_e2e as g  # noqa: E402
from runner.guest import counters as nstat  # noqa: E402

WHERE = ("kernel", "fallback", "agent")


def parse_schemes(text: str) -> list[tuple[str, str]]:
    out = []
    for item in text.split(","):
        where, _, alg = item.partition("-")
        if where not in WHERE or not alg:
            raise argparse.ArgumentTypeError(f"{item!r}: a scheme is WHERE-ALG with WHERE one of {', '.join(WHERE)}")
        out.append((where, alg))
    return out


def run_scheme(where: str, alg: str, flows: int, seconds: int) -> dict:
    agent = g.Agent(f"{where}-{alg}", ["--alg", alg]) if where == "agent" else None
    cc = alg if where == "kernel" else "ccp"
    before = nstat(g.SND)
    r = g.sh(f"ip netns exec {g.SND} iperf3 -c {g.RCV_IP} -C {cc} -P {flows} -t {seconds} -J",
             check=False, timeout=seconds + 120)
    after = nstat(g.SND)
    if agent:
        agent.kill()
    moved = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    out: dict = {"nstat": moved}
    try:
        totals = sorted(st["sender"]["bits_per_second"] / 1e6 for st in json.loads(r.stdout)["end"]["streams"])
    except (json.JSONDecodeError, KeyError) as e:
        return {**out, "iperf_error": f"{e}: {r.stderr[-300:]}"}
    sent = moved.get("TcpOutSegs", 0)
    return {"utilization": sum(totals) / g.LINK_MBIT, "min_stream_fair_ratio": totals[0] / (g.LINK_MBIT / flows),
            "timeout_events": moved.get("TcpExtTCPTimeouts", 0),
            "retransmitted_packets": moved.get("TcpRetransSegs", 0), "sent_packets": sent,
            "retransmitted_frac": moved.get("TcpRetransSegs", 0) / max(1, sent), **out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--schemes", type=parse_schemes, default=parse_schemes("kernel-cubic,agent-cubic"))
    ap.add_argument("--flows", type=int, default=64)
    ap.add_argument("--seconds", type=int, default=30)
    a = ap.parse_args()
    if a.flows < 1 or a.seconds < 5:
        ap.error("--flows must be at least 1 and --seconds at least 5")
    g.RESULTS.mkdir(parents=True, exist_ok=True)
    g.setup_link()
    g.insmod()
    out: dict = {"flows": a.flows, "duration_s": a.seconds, "schemes": {}}
    for where, alg in a.schemes:
        out["schemes"][f"{where}-{alg}"] = run_scheme(where, alg, a.flows, a.seconds)
        g.log(f"{where}-{alg}: " + json.dumps({k: v for k, v in out["schemes"][f"{where}-{alg}"].items() if k != "nstat"}))
        (g.RESULTS / "many_flows.json").write_text(json.dumps(out, indent=1))
        time.sleep(3)  # the last flows' FINs
    return 0


if __name__ == "__main__":
    sys.exit(main())
