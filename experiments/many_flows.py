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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "datapath" / "tests"))
sys.path.insert(0, str(ROOT / "experiments"))
import guest_e2e as g  # noqa: E402

WHERE = ("kernel", "fallback", "agent")


def parse_schemes(text: str) -> list[tuple[str, str]]:
    out = []
    for item in text.split(","):
        where, _, alg = item.partition("-")
        if where not in WHERE or not alg:
            raise argparse.ArgumentTypeError(f"{item!r}: a scheme is WHERE-ALG with WHERE one of {', '.join(WHERE)}")
        out.append((where, alg))
    return out


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
        row, moved = g.many_flows_run(where, alg, a.flows, a.seconds)
        out["schemes"][f"{where}-{alg}"] = {**row, "nstat": moved}
        g.log(f"{where}-{alg}: {json.dumps(row)}")
        (g.RESULTS / "many_flows.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
