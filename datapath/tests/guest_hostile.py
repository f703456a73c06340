"""What a hostile local user does to ccp.ko and its agent, for guest_e2e.py: netlink senders over
the module's transport (genl or usersock), unprivileged probes, an unprivileged flood, and
malformed CCP messages. Runs in the guest as root; each unprivileged step forks and drops to a
given uid."""
from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
from pathlib import Path

NETLINK_USERSOCK, NETLINK_GENERIC = 2, 16


# An unprivileged process sending junk for argv[1] seconds over the module's transport (argv[2])
# to the module (port 0), into usersock's multicast group 22, and to the agent's port (its pid,
# netlink's first automatic port id), 100 of each per 10 ms; prints {"sent_messages": n, "refused_messages": n}
# (refused: the send itself failed, EPERM: genl lets no unprivileged process address a port
# or a group). On genl what reaches the kernel is refused there (GENL_ADMIN_PERM).
FLOOD = (
    "import json,os,socket,struct,sys,time\n"
    "end=time.time()+float(sys.argv[1]);genl=sys.argv[2]=='genl';agent=int(sys.argv[3]);n=r=0\n"
    "s=socket.socket(socket.AF_NETLINK,socket.SOCK_RAW,16 if genl else 2);s.bind((0,0));s.setblocking(False)\n"
    "junk=struct.pack('=IHHII',80,0x1d if genl else 0,1,0,0)+bytes(range(64))\n"
    "while time.time()<end:\n"
    "  for dst in ((0,0),(0,1<<21),(agent,0)):\n"
    "    for _ in range(100):\n"
    "      try: s.sendto(junk,dst);n+=1\n"
    "      except BlockingIOError: pass\n"
    "      except OSError: r+=1\n"
    "  try:\n"
    "    while s.recv(65536): pass\n"
    "  except OSError: pass\n"
    "  time.sleep(0.01)\n"
    "print(json.dumps({'sent_messages':n,'refused_messages':r}))\n"
)


def start_flood(seconds: float, ipc: str, agent_pid: int) -> subprocess.Popen:
    return subprocess.Popen(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                             "python3", "-c", FLOOD, str(seconds), ipc, str(agent_pid)],
                            stdout=subprocess.PIPE, text=True)


def flood_result(p: subprocess.Popen) -> dict:
    try:
        return json.loads(p.communicate(timeout=30)[0])
    except (json.JSONDecodeError, subprocess.TimeoutExpired) as e:
        return {"error": str(e)}


def genl_family_id(sock: socket.socket, name: str = "polycc_ccp") -> int:
    """The generic netlink family's id, from the controller (CTRL_CMD_GETFAMILY)."""
    attr_name = name.encode() + b"\x00"
    attr = struct.pack("=HH", 4 + len(attr_name), 2) + attr_name
    attr += b"\x00" * (-len(attr) % 4)
    body = struct.pack("=BBH", 3, 1, 0) + attr
    sock.sendto(struct.pack("=IHHII", 16 + len(body), 0x10, 1, 0, 0) + body, (0, 0))
    data = sock.recv(65536)
    ty = struct.unpack_from("=H", data, 4)[0]
    if ty == 2:
        raise OSError(-struct.unpack_from("=i", data, 16)[0], f"no generic netlink family {name}")
    at = 20
    while at + 4 <= len(data):
        alen, atype = struct.unpack_from("=HH", data, at)
        if atype == 1:
            return struct.unpack_from("=H", data, at + 4)[0]
        at += (alen + 3) & ~3
    raise OSError(0, "no family id in the answer")


def nl_send(payload: bytes | list[bytes], ipc: str, as_user: int | None = None) -> int:
    """Send CCP messages to the module over its transport, all in one datagram when given a
    list: usersock as portus frames them, genl one message per request with an acknowledgement.
    Returns errno or 0: the send's, and on genl the first error the module (or genetlink's
    permission check) answered."""
    payloads = payload if isinstance(payload, list) else [payload]
    pid = os.fork()
    if pid == 0:
        try:
            if as_user is not None:
                os.setgid(as_user)
                os.setuid(as_user)
            s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW,
                              NETLINK_GENERIC if ipc == "genl" else NETLINK_USERSOCK)
            s.bind((0, 0))
            family = genl_family_id(s) if ipc == "genl" else 0
            frames = b""
            for p in payloads:
                if ipc == "genl":
                    attr = struct.pack("=HH", 4 + len(p), 1) + p + b"\x00" * (-len(p) % 4)
                    p = struct.pack("=BBH", 1, 1, 0) + attr
                    frame = struct.pack("=IHHII", 16 + len(p), family, 1 | 4, 0, 0) + p  # REQUEST|ACK
                else:
                    frame = struct.pack("=IHHII", 16 + len(p), 0, 0, 0, 0) + p
                frames += frame + b"\x00" * (-len(frame) % 4)  # NLMSG_ALIGN
            s.sendto(frames, (0, 0))
            if ipc == "genl":
                s.settimeout(2)
                for _ in payloads:
                    err = -struct.unpack_from("=i", s.recv(65536), 16)[0]
                    if err:
                        os._exit(err)
            os._exit(0)
        except OSError as e:
            os._exit(e.errno or 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def select_ccp_errno(as_user: int) -> int:
    """setsockopt(TCP_CONGESTION, "ccp") from an unprivileged process; returns errno or 0."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(as_user)
            os.setuid(as_user)
            s = socket.socket()
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"ccp")
            os._exit(0)
        except OSError as e:
            os._exit(e.errno or 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def read_errno(path: str, as_user: int) -> int:
    """Read `path` from an unprivileged process; returns errno or 0."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(as_user)
            os.setuid(as_user)
            Path(path).read_text()
            os._exit(0)
        except OSError as e:
            os._exit(e.errno or 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def ccp_header(msg_type: int, length: int, sid: int) -> bytes:
    return struct.pack("<HHI", msg_type, length, sid)


def update_fields(sid: int, updates: list[tuple[int, int, int]], count: int | None = None) -> bytes:
    body = struct.pack("<I", len(updates) if count is None else count)
    body += b"".join(struct.pack("<BIQ", t, i, v) for t, i, v in updates)
    return ccp_header(3, 8 + len(body), sid) + body


def install(n_expr: int, n_instr: int, instr: bytes = b"", claimed_len: int | None = None) -> bytes:
    body = struct.pack("<III", 99, n_expr, n_instr) + instr
    return ccp_header(2, claimed_len if claimed_len is not None else 8 + len(body), 0) + body


HOSTILE_CORPUS = {
    "short": b"\x02\x00",
    "length_mismatch": ccp_header(3, 400, 1) + struct.pack("<I", 0),
    "too_many_updates": update_fields(1, [(2, 4, 1000)], count=300),
    "update_count_low_byte_alias": update_fields(1, [(2, 4, 1000)] * 2, count=258),
    "control_reg_out_of_range": update_fields(1, [(0, 500, 7)]),
    "implicit_micros_update": update_fields(1, [(2, 3, 7)]),
    "socket_id_zero": update_fields(0, [(2, 4, 1000)]),
    "socket_id_huge": update_fields(0xFFFFFFFF, [(2, 4, 1000)]),
    "install_257_expressions": install(257, 0),
    "install_256_instructions": install(1, 256, b"\x00" * 16 * 256 + b"\x00" * 16),
    "install_oversized": install(1, 255, b"\xff" * 16 * 300),
    "install_bad_register": install(0, 1, struct.pack("<BBIBIBI", 0, 7, 1000, 1, 0, 1, 0) + b"\x00"),
    "install_expr_out_of_range": install(1, 1, struct.pack("<IIII", 0, 5, 0, 1) +
                                         struct.pack("<BBIBIBI", 0, 7, 0, 1, 0, 1, 0) + b"\x00"),
    # Issue 16 K1: 111 report-register DEFs (indices in range) overflowed libccp's 110-field
    # measurement on the stack at the program's first report.
    "install_111_report_defs": install(1, 112, struct.pack("<IIII", 111, 1, 111, 1) +
                                       b"".join(struct.pack("<BBIBIBI", 2, 5, k % 110, 5, k % 110, 1, 0)
                                                for k in range(111)) +
                                       struct.pack("<BBIBIBI", 1, 5, 0, 5, 0, 1, 1)),
    "create_from_agent": ccp_header(0, 96, 1) + b"\x00" * 88,
    "garbage_type": ccp_header(77, 12, 1) + b"\x00" * 4,
}
