"""Run one command in the QEMU guest with what the kernel-path jobs need.

The guest runs the host's binaries, so iperf3 and ethtool are installed on the host first
(`--need`), and the module to load is passed as $POLYCC_CCP_KO (default: datapath/ccp.ko, which
`make datapath` builds for the guest's kernel). Used by datapath/tests/test_e2e.py, the
experiment runner's guest backend (experiments/runner/vm_backend.py, which `make demo` uses) and
experiments/ipc_bench.py.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VM = ROOT / "experiments" / "vm" / "polycc-vm"


# The guest kernel for the BPF datapath: Debian's 6.12 (bookworm-backports; its headers are the
# module's second build target). The default 6.1 guest predates BPF links for struct_ops.
# "6.12": polycc-vm boots the newest 6.12 apt can boot (its headers and signed image both listed).
BPF_GUEST_KERNEL = os.environ.get("POLYCC_VM_KERNEL_BPF", "6.12")


def bpf_guest_env() -> dict[str, str]:
    """polycc-vm's environment for the BPF datapath's guest: the 6.12 kernel, with QEMU's TCG on one
    host thread ($POLYCC_VM_TCG_THREAD overrides). With a thread per vCPU, Debian 12's QEMU 7.2 races
    one vCPU's translation of a code page against another's write to it, and this guest writes code
    whenever an agent starts or exits (its JITted struct_ops programs): ~1 suite in 15 panicked
    (polycc-vm's TCG_THREADS says more)."""
    thread = os.environ.get("POLYCC_VM_TCG_THREAD", "single")
    return {"POLYCC_VM_KERNEL": BPF_GUEST_KERNEL, "POLYCC_VM_TCG_THREAD": thread}


def run_in_guest(command: list[str], results: Path, timeout_s: float, env: dict[str, str] | None = None) -> int:
    """Boot the guest, run `command` as root in the repository root, return its exit status.
    `env` goes to polycc-vm (POLYCC_VM_KERNEL picks another guest kernel). The guest console
    streams to stderr (quiet: kernel errors only), so an oops shows whole, not just its last
    lines: the 6.12 guest's rare panic during bpf_kill (2 in ~30 suites) left only its tail."""
    env = env or {}
    ko = env.get("POLYCC_CCP_KO") or os.environ.get("POLYCC_CCP_KO", str(ROOT / "datapath" / "ccp.ko"))
    cmd = [str(VM), "run", "--console", "--timeout", str(timeout_s), "--results", str(results),
           "--need", "iperf3", "--need", "ethtool", "--env", f"POLYCC_CCP_KO={ko}", "--", *command]
    return subprocess.run(cmd, cwd=ROOT, env={**os.environ, **env}).returncode
