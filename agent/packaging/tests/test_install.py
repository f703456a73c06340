#!/usr/bin/env python3
"""`make install` and `make uninstall` as a user runs them, into a temporary DESTDIR.

Checks that install writes every file users expect (binaries, man pages, completions, the systemd
unit, the module's DKMS source) and lists each in its manifest; that the binaries say their
version; that the pages render, the completions complete, the unit verifies and its ExecStart
flags parse; that the installed module source is self-contained (built as DKMS would, against the
QEMU guest's kernel headers, or the running kernel's); and that uninstall leaves nothing behind.

Run by `make install-test` (and so `make test`) after `make stage`; closes with
`packaging: N passed, M failed`, the line `make test`'s summary counts. POLYCC_KDIR names the
kernel headers to build the module against (default: `experiments/vm/polycc-vm kdir`).
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PREFIX = "/usr"
BINARIES = ["polycc", "polycc-portus", "polycc-sim", "polycc-tune"]
MODNAME = "ccp"


def version():
    """The workspace's version, as the Makefile reads it."""
    return re.search(r'^version = "(.*)"$', (ROOT / "Cargo.toml").read_text(), re.M).group(1)


def make(target, destdir, *args):
    """`make TARGET DESTDIR=... PREFIX=/usr ARGS...`; its output, or a failure with it."""
    argv = ["make", "--no-print-directory", "-s", target, f"DESTDIR={destdir}", f"PREFIX={PREFIX}", *args]
    run = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        raise AssertionError(f"make {target} exited {run.returncode}:\n{run.stdout}\n{run.stderr}")
    return run.stdout


def files_under(top):
    """Every file and every folder under `top`, as absolute paths inside it."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            out.add("/" + os.path.relpath(os.path.join(dirpath, name), top))
    return out


def kernel_headers():
    """A KDIR to build the module against, or None (with why) where there is none."""
    if kdir := os.environ.get("POLYCC_KDIR"):
        return kdir, None
    try:
        run = subprocess.run([str(ROOT / "experiments/vm/polycc-vm"), "kdir"], capture_output=True, text=True,
                             timeout=600)
        if run.returncode == 0 and Path(run.stdout.strip()).is_dir():
            return run.stdout.strip(), None
        why = f"polycc-vm kdir exited {run.returncode}: {run.stderr.strip()[-200:]}"
    except (OSError, subprocess.TimeoutExpired) as e:
        why = f"polycc-vm kdir: {e}"
    running = Path(f"/lib/modules/{os.uname().release}/build")
    return (str(running), None) if running.is_dir() else (None, why)


class Installed(unittest.TestCase):
    """One `make install` into a temporary DESTDIR, looked at file by file."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="polycc-install-")
        cls.dest = Path(cls.tmp.name)
        cls.output = make("install", cls.dest)
        cls.version = version()
        cls.usr = cls.dest / PREFIX.lstrip("/")
        cls.module_src = cls.dest / f"usr/src/{MODNAME}-{cls.version}"

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def manifest(self):
        return (self.usr / "share/polycc/install-manifest.txt").read_text().splitlines()

    def test_everything_users_expect_is_installed(self):
        expected = [f"bin/{b}" for b in BINARIES]
        expected += [f"share/man/man1/{b}.1" for b in BINARIES]
        expected += ["share/man/man1/polycc-policy.1", "share/man/man1/polycc-policy-add.1",
                     "share/man/man1/polycc-flows.1"]
        for b in BINARIES:
            expected += [f"share/bash-completion/completions/{b}", f"share/zsh/site-functions/_{b}",
                         f"share/fish/vendor_completions.d/{b}.fish"]
        expected += ["lib/systemd/system/polycc-portus.service", "share/polycc/install-manifest.txt"]
        missing = [p for p in expected if not (self.usr / p).is_file()]
        self.assertEqual(missing, [], f"not installed under {self.usr}")
        for b in BINARIES:
            self.assertTrue(os.access(self.usr / "bin" / b, os.X_OK), b)
        self.assertFalse((self.usr / "bin/polycc-ipc-baseline").exists(), "a development tool was installed")
        self.assertTrue((self.module_src / "dkms.conf").is_file())

    def test_the_manifest_and_the_output_list_every_file_installed_and_nothing_else(self):
        entries = self.manifest()
        listed_files = {e.split(" ", 1)[1] for e in entries if e.startswith("file ")}
        listed_dirs = {e.split(" ", 1)[1] for e in entries if e.startswith("dir ")}
        present = files_under(self.dest)
        present_files = {p for p in present if (self.dest / p.lstrip("/")).is_file()}
        self.assertEqual(listed_files, present_files)
        # The DESTDIR was empty: every folder was made by install.
        self.assertEqual(listed_dirs, present - present_files)
        for f in listed_files:
            self.assertIn(f, self.output, "make install did not say it installed this file")

    def test_every_installed_binary_prints_the_package_version(self):
        for b in BINARIES:
            run = subprocess.run([self.usr / "bin" / b, "--version"], capture_output=True, text=True, timeout=30)
            self.assertEqual((run.returncode, run.stdout.strip()), (0, f"{b} {self.version}"))

    def test_the_man_pages_render_with_their_flags(self):
        flags = {"polycc-portus": "--alg", "polycc-sim": "--alg", "polycc": "--socket", "polycc-tune": "--config",
                 "polycc-policy-add": "--dst-port"}
        for page, flag in flags.items():
            path = self.usr / f"share/man/man1/{page}.1"
            text = path.read_text()
            binary = "polycc" if page.startswith("polycc-policy") else page
            self.assertRegex(text, rf'(?m)^\.TH {re.escape(page)} 1 +"{binary} {re.escape(self.version)}"', page)
            rendered = self.render(path)
            if rendered is None:
                self.assertIn(flag.replace("-", "\\-"), text, page)
                continue
            self.assertIn("NAME", rendered, page)
            self.assertIn(flag, rendered.replace("\u2010", "-"), f"{page} does not document {flag}")

    def render(self, path):
        """The page as `man -l` (else groff) shows it, without hyphenation; None without either."""
        env = dict(os.environ, MANWIDTH="200", MAN_KEEP_FORMATTING="0")
        if shutil.which("man"):
            cmd = ["man", "-l", "-P", "cat", str(path)]
        elif shutil.which("groff"):
            cmd = ["groff", "-man", "-Tutf8", "-rHY=0", str(path)]
        else:
            return None
        run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stderr.strip(), "", f"{path.name}: warnings while rendering")
        return re.sub(r".\x08", "", run.stdout)

    def complete(self, binary, words):
        """What bash completes for the last of `words` with the installed completion file."""
        script = (f"source {shlex.quote(str(self.usr / 'share/bash-completion/completions' / binary))}\n"
                  f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
                  f"COMP_LINE={shlex.quote(' '.join(words))}; COMP_POINT=${{#COMP_LINE}}\n"
                  # The function the file registered for the command, called as bash calls it.
                  f"fn=$(complete -p {shlex.quote(binary)} | sed -n 's/.* -F \\([^ ]*\\) .*/\\1/p')\n"
                  f'"$fn" {shlex.quote(binary)} {shlex.quote(words[-1])} {shlex.quote(words[-2])}\n'
                  'printf "%s\\n" "${COMPREPLY[@]}"\n')
        run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
        self.assertEqual(run.returncode, 0, run.stderr)
        return run.stdout.split()

    @unittest.skipUnless(shutil.which("bash"), "needs bash")
    def test_bash_completes_subcommands_and_flags(self):
        self.assertEqual(self.complete("polycc", ["polycc", "pol"]), ["policy"])
        self.assertIn("add", self.complete("polycc", ["polycc", "policy", ""]))
        self.assertIn("--alg", self.complete("polycc-portus", ["polycc-portus", "--al"]))

    def test_zsh_and_fish_completions_know_the_subcommands(self):
        for path in ["share/zsh/site-functions/_polycc", "share/fish/vendor_completions.d/polycc.fish"]:
            text = (self.usr / path).read_text()
            self.assertIn("policy", text, path)
            self.assertIn("flows", text, path)

    def unit(self):
        return (self.usr / "lib/systemd/system/polycc-portus.service").read_text()

    def test_the_unit_starts_the_installed_agent_with_flags_it_accepts(self):
        exec_start = re.search(r"^ExecStart=(.*)$", self.unit(), re.M).group(1)
        argv = [a for a in shlex.split(exec_start) if a != "$POLYCC_PORTUS_ARGS"]
        self.assertEqual(argv[0], f"{PREFIX}/bin/polycc-portus")
        self.assertIn("--control-socket", argv)
        self.assertIn("--policy", argv)
        run = subprocess.run([self.usr / "bin/polycc-portus", *argv[1:], "--check"], capture_output=True, text=True,
                             timeout=30)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("RuntimeDirectory=polycc", self.unit())

    @unittest.skipUnless(shutil.which("systemd-analyze"), "needs systemd-analyze")
    def test_the_unit_passes_systemd_analyze_verify(self):
        # systemd-analyze checks that ExecStart exists and Documentation=man: pages are found:
        # point both at the DESTDIR.
        with tempfile.TemporaryDirectory() as d:
            unit = Path(d) / "polycc-portus.service"
            unit.write_text(self.unit().replace(f"{PREFIX}/bin/", f"{self.usr}/bin/"))
            env = dict(os.environ, MANPATH=str(self.usr / "share/man"))
            run = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, env=env,
                                 timeout=60)
        # verify exits 0 on settings it ignores; they are printed.
        self.assertEqual((run.returncode, run.stdout + run.stderr), (0, ""))

    def dkms_conf(self):
        """dkms.conf's variables, read the way dkms reads it (sourced by bash)."""
        script = ('kernel_source_dir="$1"; source "$2/dkms.conf"; printf "%s\\n" "$PACKAGE_NAME" "$PACKAGE_VERSION" '
                  '"${BUILT_MODULE_NAME[0]}" "$AUTOINSTALL" "${MAKE[0]}"')
        run = subprocess.run(["bash", "-c", script, "bash", "KDIR_HERE", str(self.module_src)], capture_output=True,
                             text=True, timeout=30, check=True)
        return dict(zip(["name", "version", "module", "autoinstall", "make"], run.stdout.splitlines()))

    def test_dkms_conf_names_the_module_and_its_folder(self):
        conf = self.dkms_conf()
        self.assertEqual(self.module_src.name, f"{conf['name']}-{conf['version']}")
        self.assertEqual((conf["module"], conf["version"], conf["autoinstall"]), (MODNAME, self.version, "yes"))
        self.assertIn("KDIR_HERE", conf["make"], "dkms.conf's MAKE ignores the kernel it builds for")

    def test_the_module_source_has_every_file_its_kbuild_and_includes_name(self):
        kbuild = (self.module_src / "Kbuild").read_text()
        objects = re.search(rf"^{MODNAME}-y := (.*)$", kbuild, re.M).group(1).split()
        self.assertIn("ccp_main.o", objects)
        missing = [o for o in objects if not (self.module_src / o.replace(".o", ".c")).is_file()]
        for c in self.module_src.glob("*.[ch]"):
            for header in re.findall(r'^#include "([^"]+)"', c.read_text(), re.M):
                if not (self.module_src / header).is_file():
                    missing.append(f"{header} (included by {c.name})")
        self.assertEqual(missing, [])
        self.assertTrue((self.module_src / "Makefile").is_file())

    def test_the_module_builds_from_the_installed_source_as_dkms_builds_it(self):
        kdir, why = kernel_headers()
        if kdir is None:
            self.skipTest(f"no kernel headers to build against ({why})")
        conf = self.dkms_conf()
        with tempfile.TemporaryDirectory() as build:
            # DKMS copies the source into its own tree and runs MAKE[0] there.
            tree = Path(build) / "build"
            shutil.copytree(self.module_src, tree)
            make_cmd = conf["make"].replace("KDIR_HERE", kdir)
            run = subprocess.run(["nice", "-n", "19", "bash", "-c", make_cmd], cwd=tree, capture_output=True,
                                 text=True, timeout=600)
            self.assertEqual(run.returncode, 0, run.stdout[-3000:] + run.stderr[-3000:])
            self.assertTrue((tree / f"{conf['module']}.ko").is_file(), run.stdout[-2000:])


class Uninstalled(unittest.TestCase):
    """`make uninstall` after one or two installs."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="polycc-uninstall-")
        self.addCleanup(self.tmp.cleanup)
        self.dest = Path(self.tmp.name)

    def test_uninstall_after_two_installs_leaves_nothing(self):
        make("install", self.dest)
        make("install", self.dest)
        out = make("uninstall", self.dest)
        self.assertEqual(files_under(self.dest), set())
        self.assertIn("/usr/bin/polycc-portus", out)

    def test_uninstall_keeps_what_others_put_beside_it(self):
        (self.dest / "usr/bin").mkdir(parents=True)
        (self.dest / "usr/bin/other").write_text("not ours\n")
        make("install", self.dest)
        (self.dest / "usr/share/man/man1/other.1").write_text("not ours either\n")
        make("uninstall", self.dest)
        self.assertEqual(files_under(self.dest), {"/usr", "/usr/bin", "/usr/bin/other", "/usr/share",
                                                   "/usr/share/man", "/usr/share/man/man1",
                                                   "/usr/share/man/man1/other.1"})

    def test_another_module_name_renames_the_dkms_package_and_the_module(self):
        make("install", self.dest, "MODNAME=ccp_polycc")
        src = self.dest / f"usr/src/ccp_polycc-{version()}"
        self.assertIn('BUILT_MODULE_NAME[0]="ccp_polycc"', (src / "dkms.conf").read_text())
        self.assertRegex((src / "Kbuild").read_text(), r"(?m)^obj-m := ccp_polycc\.o$")
        self.assertFalse((self.dest / f"usr/src/ccp-{version()}").exists())
        make("uninstall", self.dest, "MODNAME=ccp_polycc")
        self.assertEqual(files_under(self.dest), set())

    def test_uninstall_with_nothing_installed_fails_and_says_so(self):
        run = subprocess.run(["make", "-s", "uninstall", f"DESTDIR={self.dest}", f"PREFIX={PREFIX}"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("install-manifest.txt", run.stderr)


def main():
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    # A result without the runner's "Ran N tests" line: `make test`'s summary counts the one below.
    result = unittest.TextTestResult(unittest.runner._WritelnDecorator(sys.stderr), True, 2)
    suite.run(result)
    result.printErrors()
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    passed = result.testsRun - failed - len(result.skipped)
    for test, why in result.skipped:
        print(f"skipped {test.id()}: {why}")
    print(f"packaging: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
