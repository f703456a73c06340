#!/usr/bin/env python3
"""Tests of the QEMU harness: each boots the guest (or stops before) and checks one promise.

    python3 experiments/vm/test_vm.py [--only NAME]...

Needs root (or passwordless sudo) for apt-get the first time; downloads ~100 MB into the cache
once. Prints each test's wall time; exits non-zero if any test failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
POLYCC_VM = HERE / "polycc-vm"

EXIT_GUEST_HUNG = 124
EXIT_DOWNLOAD = 122
EXIT_GUEST_FAILED = 123
LINK_RATE_MBIT = 20  # netem-check's default link
MIN_CUBIC_UTILISATION = 0.80

HELLO_C = """\
#include <linux/module.h>
static int __init hello_init(void) { pr_info("polycc-vm test module\\n"); return 0; }
static void __exit hello_exit(void) { }
module_init(hello_init);
module_exit(hello_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("polycc-vm harness test: proves KDIR matches the guest's ABI");
"""


def polycc_vm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(POLYCC_VM), *args], cwd=REPO, capture_output=True, text=True, env={**os.environ, **(env or {})}
    )


def load_polycc_vm():
    """polycc-vm as a module, for its pure functions."""
    from importlib.machinery import SourceFileLoader
    from importlib.util import module_from_spec, spec_from_loader

    spec = spec_from_loader("polycc_vm", SourceFileLoader("polycc_vm", str(POLYCC_VM)))
    vm = module_from_spec(spec)
    sys.modules["polycc_vm"] = vm  # its dataclasses look their module up there
    spec.loader.exec_module(vm)
    return vm


def info() -> dict:
    result = polycc_vm("info")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_prepare_is_idempotent() -> None:
    first, second = info(), info()
    assert first == second, (first, second)
    for key in ("vmlinuz", "modules", "initramfs", "kdir", "kdir_612"):
        assert Path(first[key]).exists(), f"{key}: {first[key]} missing"
    assert str(REPO) not in first["cache"], "the cache must live outside the repository"


def test_uname_is_the_unpacked_kernel() -> None:
    result = polycc_vm("run", "--timing", "--", "uname", "-r")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == info()["kernel"], result.stdout
    print(f"    {result.stderr.strip().splitlines()[-1]}")


def test_exit_status_and_streams_come_back() -> None:
    result = polycc_vm("run", "--", "sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 7")
    assert result.returncode == 7, (result.returncode, result.stderr)
    assert result.stdout == "to-stdout\n", result.stdout
    assert "to-stderr" in result.stderr and "polycc-vm:" not in result.stderr, result.stderr


def test_command_runs_as_root_in_the_same_directory_with_a_read_only_host() -> None:
    script = 'echo "$(id -u) $(pwd)"; touch README.md 2>/dev/null && echo writable || echo read-only'
    result = polycc_vm("run", "--", "sh", "-c", script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", str(REPO), "read-only"], result.stdout


def test_time_limit_reports_a_hung_guest() -> None:
    limit_s = 20
    start = time.monotonic()
    result = polycc_vm("run", "--timeout", str(limit_s), "--", "sleep", "1000")
    elapsed = time.monotonic() - start
    assert result.returncode == EXIT_GUEST_HUNG, (result.returncode, result.stderr)
    assert "guest hung" in result.stderr and "while the command ran" in result.stderr, result.stderr
    assert elapsed < limit_s + 10, f"QEMU not killed promptly: {elapsed:.1f} s"


def test_a_guest_that_dies_before_the_command_is_booted_again() -> None:
    # No init in the initramfs: the kernel panics at boot ("No working init found"), every time.
    result = polycc_vm("run", "--timing", "--kernel-args", "rdinit=/nonexistent", "--", "true")
    assert result.returncode == EXIT_GUEST_FAILED, (result.returncode, result.stderr)
    assert "booting again (boot 2 of 2)" in result.stderr, result.stderr
    assert "before the command started, on all 2 boots" in result.stderr, result.stderr
    assert "console: Kernel panic" in result.stderr, result.stderr
    assert ", 2 boots" in result.stderr, result.stderr
    # The fault is the last line: CI keeps a log's tail, which a console trace would otherwise fill.
    assert "console: Kernel panic" in result.stderr.strip().splitlines()[-1], result.stderr[-2000:]
    single = polycc_vm("run", "--boots", "1", "--kernel-args", "rdinit=/nonexistent", "--", "true")
    assert single.returncode == EXIT_GUEST_FAILED and "booting again" not in single.stderr, single.stderr
    bad = polycc_vm("run", "--boots", "0", "--", "true")
    assert bad.returncode == 2 and "--boots must be at least 1" in bad.stderr, bad.stderr


def test_a_fault_is_summed_up_with_where_it_struck_and_its_call_trace() -> None:
    # The 6.12 guest's panic in CI on 2026-12-02: only the trace's tail reached the log.
    vm = load_polycc_vm()
    console = "\n".join([
        "[   23.150000] BUG: kernel NULL pointer dereference, address: 0000000000000008",
        "[   23.150200] Oops: 0002 [#1] PREEMPT SMP NOPTI",
        "[   23.150400] RIP: 0010:net_rx_action+0xec/0x420",
        "[   23.153000] Call Trace:", "[   23.153100]  <IRQ>", "[   23.153200]  ? __die+0x23/0x70",
        "[   23.153400]  handle_softirqs+0xd8/0x2a0", "[   23.153500]  __irq_exit_rcu+0x9b/0xc0",
        "[   23.153550]  </IRQ>", "[   23.153600]  <TASK>", "[   23.153610]  default_idle+0x9/0x20",
        "[   23.153819] Modules linked in: veth sch_tbf", "[   23.157282] Kernel panic - not syncing: Fatal",
    ])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "console.log"
        path.write_text(console)
        line = vm._panic_line(path)
        path.write_text("[    1.0] all quiet\n")
        quiet = vm._panic_line(path)
    assert line == ("console: BUG: kernel NULL pointer dereference, address: 0000000000000008; RIP "
                    "net_rx_action+0xec/0x420; trace <IRQ> handle_softirqs __irq_exit_rcu <TASK> default_idle"), line
    assert quiet == "no kernel fault on the console", quiet


def test_one_tcg_thread_runs_both_vcpus() -> None:
    # --tcg-thread single (the BPF guest's): two vCPUs still, taking turns on one host thread.
    result = polycc_vm("run", "--tcg-thread", "single", "--", "nproc")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2", result.stdout
    bad = polycc_vm("run", "--", "true", env={"POLYCC_VM_TCG_THREAD": "one"})
    assert bad.returncode == 2 and "--tcg-thread (or $POLYCC_VM_TCG_THREAD) must be one of" in bad.stderr, bad.stderr


def test_download_failure_is_reported_as_such() -> None:
    with tempfile.TemporaryDirectory() as cache:
        env = {"POLYCC_VM_CACHE": cache, "POLYCC_VM_KERNEL": "6.1.0-999-amd64"}
        result = polycc_vm("run", "--", "true", env=env)
    assert result.returncode == EXIT_DOWNLOAD, (result.returncode, result.stderr)
    assert "image download failed" in result.stderr, result.stderr


def test_the_612_guest_is_the_newest_version_apt_can_boot() -> None:
    # On 2026-12-02 Debian listed 6.12.118's headers and unsigned image but not yet its signed image:
    # polycc-vm picked 6.12.118 from the headers and the BPF suite failed to download a kernel to boot.
    vm = load_polycc_vm()
    names = ["linux-headers-6.12.117+deb12-amd64", "linux-headers-6.12.117+deb12-common",
             "linux-image-6.12.117+deb12-amd64", "linux-image-6.12.117+deb12-amd64-unsigned",
             "linux-headers-6.12.118+deb12-amd64", "linux-image-6.12.118+deb12-amd64-unsigned",
             "linux-image-6.12.118+deb12-cloud-amd64-dbg", "linux-image-6.12.119+deb12-amd64"]
    assert vm.bootable_612_kvers(names) == ["6.12.117+deb12-amd64"], vm.bootable_612_kvers(names)
    names.append("linux-image-6.12.118+deb12-amd64")
    newest = max(vm.bootable_612_kvers(names), key=vm._version_key)
    assert newest == "6.12.118+deb12-amd64", newest


def test_module_built_against_kdir_loads_in_the_guest() -> None:
    kdirs = info()
    with tempfile.TemporaryDirectory(dir=kdirs["cache"]) as work:  # the guest cannot see the host's /tmp
        for name, kdir in (("kdir", kdirs["kdir"]), ("kdir_612", kdirs["kdir_612"])):
            src = Path(work) / name
            src.mkdir()
            (src / "hello.c").write_text(HELLO_C)
            (src / "Kbuild").write_text("obj-m := hello.o\n")
            build = subprocess.run(["make", "-C", kdir, f"M={src}", "modules"], capture_output=True, text=True)
            assert build.returncode == 0 and (src / "hello.ko").exists(), build.stdout[-2000:] + build.stderr[-2000:]
        ko = Path(work) / "kdir" / "hello.ko"
        script = f"insmod {ko} && grep -q '^hello ' /proc/modules && rmmod hello"
        script += " && dmesg | grep -c 'polycc-vm test module'"
        result = polycc_vm("run", "--", "sh", "-c", script)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "1", result.stdout


def test_netem_link_carries_cubic_and_bbr_without_reordering() -> None:
    with tempfile.TemporaryDirectory() as results:
        result = polycc_vm(
            "run", "--timeout", "240", "--results", results, "--need", "iperf3", "--need", "ethtool",
            "--", str(HERE / "netem-check.sh"),
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        summary = json.loads((Path(results) / "netem-check.json").read_text())
    print("    " + "\n    ".join(result.stdout.strip().splitlines()[:-1]))
    cubic = summary["cc"]["cubic"]
    assert summary["kernel"] == info()["kernel"], summary["kernel"]
    assert cubic["congestion"] == "cubic" and summary["cc"]["bbr"]["congestion"] == "bbr", summary["cc"]
    assert cubic["goodput_mbps"] >= MIN_CUBIC_UTILISATION * LINK_RATE_MBIT, cubic
    assert summary["ping_rtt_ms"]["min"] >= 40.0, summary["ping_rtt_ms"]
    assert not summary["reordering_seen"], summary["udp_probe"]
    # Random loss drops single packets (a GSO buffer of ~4 at once made a bursty-loss link), at
    # about the rate set (BBR's retransmissions also count the few spurious ones TCG stalls cause).
    loss = summary["loss_probe"]
    assert loss["random_loss_drops"] >= 20, loss
    assert loss["packets_per_random_drop"] <= 1.3, loss
    assert 0.5 * loss["set_pct"] <= loss["loss_pct"] <= 2.0 * loss["set_pct"], loss


TESTS: dict[str, Callable[[], None]] = {
    f.__name__.removeprefix("test_"): f
    for f in (
        test_prepare_is_idempotent,
        test_uname_is_the_unpacked_kernel,
        test_exit_status_and_streams_come_back,
        test_command_runs_as_root_in_the_same_directory_with_a_read_only_host,
        test_time_limit_reports_a_hung_guest,
        test_a_guest_that_dies_before_the_command_is_booted_again,
        test_a_fault_is_summed_up_with_where_it_struck_and_its_call_trace,
        test_one_tcg_thread_runs_both_vcpus,
        test_download_failure_is_reported_as_such,
        test_the_612_guest_is_the_newest_version_apt_can_boot,
        test_module_built_against_kdir_loads_in_the_guest,
        test_netem_link_carries_cubic_and_bbr_without_reordering,
    )
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=sorted(TESTS), help="run only these tests")
    args = parser.parse_args()
    failed = []
    for name in args.only or TESTS:
        start = time.monotonic()
        try:
            TESTS[name]()
            verdict = "ok"
        except AssertionError as err:
            failed.append(name)
            verdict = f"FAILED\n{err}"
        print(f"{name}: {verdict} ({time.monotonic() - start:.1f} s)", flush=True)
    total = len(args.only or TESTS)
    print(f"vm tests: {total - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
