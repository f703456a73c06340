"""A TCP socket sampler over sock_diag netlink (what `ss -ti` reads), without a process per sample.

    python3 experiments/runner/diag.py --dst 10.77.0.2 --interval 0.1 --out samples.jsonl

Under the guest's software emulation one `ss` takes 0.6-0.9 s to start, so polling it every RTT is
impossible and its CPU would swamp the flows; this process stays up and dumps the established TCP
sockets towards --dst every --interval through one NETLINK_SOCK_DIAG socket, writing one JSON line
per socket per sample (names as docs/metrics.md): t_s (seconds since start, CLOCK_MONOTONIC), sport,
dport, rtt_ms, mss_bytes, cwnd_packets, ssthresh_packets (null until slow start first ended),
unacked_packets, lost_packets, acked_bytes, retransmits, ca_state (open, disorder, cwr, recovery,
loss), rto_ms, rto_backoff_events (how often the retransmission timer has doubled),
since_data_sent_ms, and where the kernel has them (4.10 on) the sender's
time so far sending (busy_us) and held back by the receiver's window (rwnd_limited_us) or its own
send buffer (sndbuf_limited_us), and its pacing_rate_bytes_per_sec. Runs in the sender's namespace (`ip netns exec`), until SIGTERM.
Needs the inet_diag and tcp_diag modules (the guest runner loads them).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import signal
import socket
import struct
import sys
import time

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_DONE, NLMSG_ERROR = 3, 2
INET_DIAG_INFO = 2
INET_DIAG_VEGASINFO = 3  # the ext bit that asks the congestion control for its own info (tcp_diag)
INET_DIAG_BBRINFO = 16  # struct tcp_bbr_info: bw (u64 bytes/s, lo and hi), min_rtt (us), gains (<< 8)
TCP_ESTABLISHED = 1
NLMSG_HDR = struct.Struct("=IHHII")
DIAG_MSG_LEN = 72  # struct inet_diag_msg
# struct tcp_info offsets (include/uapi/linux/tcp.h)
TI_CA_STATE, TI_BACKOFF, TI_RTO_US, TI_LAST_DATA_SENT_MS = 1, 4, 8, 44
TI_SND_MSS, TI_UNACKED, TI_LOST, TI_RTT_US, TI_SND_SSTHRESH, TI_SND_CWND = 16, 24, 32, 68, 76, 80
TI_TOTAL_RETRANS, TI_PACING_RATE, TI_BYTES_ACKED = 100, 104, 120
TI_BUSY_TIME, TI_RWND_LIMITED, TI_SNDBUF_LIMITED = 168, 176, 184  # u64 microseconds (tcp_info chrono stats)
TCP_INFINITE_SSTHRESH = 0x7FFFFFFF
CA_STATES = ("open", "disorder", "cwr", "recovery", "loss")  # enum tcp_ca_state


def request(seq: int) -> bytes:
    # struct inet_diag_req_v2: family, protocol, ext (tcp_info, and the congestion control's own info:
    # in-kernel BBR's bandwidth and min-RTT estimates), pad, states, sockid (48 bytes)
    ext = 1 << (INET_DIAG_INFO - 1) | 1 << (INET_DIAG_VEGASINFO - 1)
    body = (
        struct.pack("=BBBBI", socket.AF_INET, socket.IPPROTO_TCP, ext, 0, 1 << TCP_ESTABLISHED)
        + b"\0" * 48
    )
    return NLMSG_HDR.pack(NLMSG_HDR.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body


def parse_msg(payload: bytes, dst: bytes | None) -> dict | None:
    """One inet_diag_msg with its attributes -> a sample (None when not towards dst or without tcp_info)."""
    if len(payload) < DIAG_MSG_LEN:
        return None
    sport, dport = struct.unpack_from("!HH", payload, 4)
    if dst is not None and payload[24:28] != dst:
        return None
    off, info, bbr = DIAG_MSG_LEN, None, None
    while off + 4 <= len(payload):
        alen, atype = struct.unpack_from("=HH", payload, off)
        if alen < 4:
            break
        if atype == INET_DIAG_INFO:
            info = payload[off + 4 : off + alen]
        elif atype == INET_DIAG_BBRINFO and alen >= 4 + 20:
            bbr = payload[off + 4 : off + alen]
        off += (alen + 3) & ~3
    if info is None or len(info) < TI_BYTES_ACKED + 8:
        return None
    ssthresh = struct.unpack_from("=I", info, TI_SND_SSTHRESH)[0]
    sample = {
        "sport": sport,
        "dport": dport,
        "rtt_ms": struct.unpack_from("=I", info, TI_RTT_US)[0] / 1000.0,
        "mss_bytes": struct.unpack_from("=I", info, TI_SND_MSS)[0],
        "cwnd_packets": struct.unpack_from("=I", info, TI_SND_CWND)[0],
        "ssthresh_packets": ssthresh if ssthresh < TCP_INFINITE_SSTHRESH else None,
        "unacked_packets": struct.unpack_from("=I", info, TI_UNACKED)[0],
        "retransmits": struct.unpack_from("=I", info, TI_TOTAL_RETRANS)[0],
        "lost_packets": struct.unpack_from("=I", info, TI_LOST)[0],
        # Where a starving flow is stuck: in loss recovery after a timeout, how many times its
        # timer has doubled, and how long ago it last sent data.
        "ca_state": CA_STATES[info[TI_CA_STATE]] if info[TI_CA_STATE] < len(CA_STATES) else str(info[TI_CA_STATE]),
        "rto_backoff_events": info[TI_BACKOFF],
        "rto_ms": struct.unpack_from("=I", info, TI_RTO_US)[0] / 1000.0,
        "since_data_sent_ms": struct.unpack_from("=I", info, TI_LAST_DATA_SENT_MS)[0],
        "acked_bytes": struct.unpack_from("=Q", info, TI_BYTES_ACKED)[0],
        "pacing_rate_bytes_per_sec": struct.unpack_from("=Q", info, TI_PACING_RATE)[0],
    }
    if bbr is not None:
        # In-kernel BBR's own estimates (what its window and pacing are made of), to set beside an
        # agent BBR's: bw, min RTT, and the gains of its mode (Startup 2.885, Drain, ProbeBW's cycle).
        bw_lo, bw_hi, min_rtt_us, pacing_gain, cwnd_gain = struct.unpack_from("=IIIII", bbr, 0)
        sample["bbr_bw_bytes_per_sec"] = bw_hi << 32 | bw_lo
        sample["bbr_min_rtt_ms"] = min_rtt_us / 1000.0
        sample["bbr_pacing_gain_ratio"] = round(pacing_gain / 256, 3)
        sample["bbr_cwnd_gain_ratio"] = round(cwnd_gain / 256, 3)
    if len(info) >= TI_SNDBUF_LIMITED + 8:
        sample["busy_us"] = struct.unpack_from("=Q", info, TI_BUSY_TIME)[0]
        sample["rwnd_limited_us"] = struct.unpack_from("=Q", info, TI_RWND_LIMITED)[0]
        sample["sndbuf_limited_us"] = struct.unpack_from("=Q", info, TI_SNDBUF_LIMITED)[0]
    return sample


def dump(sock: socket.socket, seq: int, dst: bytes | None) -> list[dict]:
    sock.send(request(seq))
    out = []
    while True:
        data = sock.recv(1 << 20)
        off = 0
        while off + NLMSG_HDR.size <= len(data):
            length, mtype, _, _, _ = NLMSG_HDR.unpack_from(data, off)
            if length < NLMSG_HDR.size:
                return out
            if mtype == NLMSG_DONE:
                return out
            if mtype == NLMSG_ERROR:
                return out
            s = parse_msg(data[off + NLMSG_HDR.size : off + length], dst)
            if s is not None:
                out.append(s)
            off += (length + 3) & ~3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dst", required=True, help="IPv4 address of the receiver")
    ap.add_argument("--interval", type=float, default=0.1, help="seconds between samples")
    ap.add_argument("--out", required=True, help="JSON lines file")
    a = ap.parse_args(argv)
    dst = ipaddress.IPv4Address(a.dst).packed
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
    t0 = time.monotonic()
    seq = 0
    with open(a.out, "w") as f:
        print(json.dumps({"t0_monotonic_s": t0}), file=f, flush=True)
        while not stop:
            t = time.monotonic() - t0
            seq += 1
            for s in dump(sock, seq, dst):
                s["t_s"] = round(t, 4)
                f.write(json.dumps(s) + "\n")
            f.flush()
            time.sleep(max(a.interval - (time.monotonic() - t0 - t), 0.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
