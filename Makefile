# polycc: `make demo` builds everything and runs the main job; `make test` runs every test.
SHELL := /bin/bash
CARGO ?= cargo
# rustup's toolchain, where ci/install-deps.sh put it on a machine that had none.
ifneq ($(wildcard $(HOME)/.cargo/bin/cargo),)
export PATH := $(HOME)/.cargo/bin:$(PATH)
endif
# The cargo profile of every build here: release, except under `make test`, which builds everything
# once in the ci profile (Cargo.toml: release code with polycc's debug assertions and overflow checks)
# and runs the tests, the simulator, the wheel and the guest's agent from that one build. Scripts find
# the binaries through POLYCC_BIN_DIR (experiments/runner/bins.py; default target/release).
ifneq ($(filter test,$(MAKECMDGOALS)),)
PROFILE ?= ci
endif
PROFILE ?= release
export PROFILE
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
export POLYCC_BIN_DIR := $(abspath $(TARGET_DIR))/$(PROFILE)
SIM := $(POLYCC_BIN_DIR)/polycc-sim
VM := experiments/vm/polycc-vm
LOGS := target/test-logs
# The module for the QEMU guest's kernel (Debian 6.1); `make -C datapath` builds for this host.
KDIR_GUEST = $(shell $(VM) kdir)
KDIR_612 = $(shell $(VM) kdir --612)

.PHONY: all release tables publish-demo publish-docs deps-demo deps-mocc deps-test deps-fuzz build stage install uninstall install-dkms uninstall-dkms install-test test demo bpf-test bench-bpf sim-demo bench gym train train-smoke judge bench-kernel deps clean lint datapath datapath-test vm-test e2e-test vm-prepare experiments experiments-test fuzz fuzz-agent

all: build

# Set-up, shared with .ci/run: ci/install-deps.sh installs what is missing (apt through sudo when
# not root, Rust through rustup, Python packages through pip) and does nothing when all is there.
# deps: what building needs; deps-demo adds the runner's packages, deps-mocc MOCC's pipeline;
# deps-test both and libFuzzer; deps-fuzz (make fuzz) those and nightly cargo-fuzz.
deps:
	@ci/install-deps.sh build
deps-demo:
	@ci/install-deps.sh demo
deps-mocc:
	@ci/install-deps.sh mocc
deps-test:
	@ci/install-deps.sh test
deps-fuzz:
	@ci/install-deps.sh fuzz

# Every release build here selects the same packages, so cargo resolves one feature set and builds each
# dependency once: `-p polycc-sim` or `-p polycc-agent` alone unifies features differently (libc,
# serde_json, ...), and a clean `make test` built the release tree three times (3:47 for the runner's
# tests, 5:13 and 138 crates, tract among them, to stage, 1:22 for the guest: 10 of its 48 minutes).
RELEASE_PACKAGES := -p polycc-agent -p polycc-sim -p polycc-tune
release: deps
	$(CARGO) build --profile $(PROFILE) $(RELEASE_PACKAGES)

build: release
	$(MAKE) datapath

# ccp.ko for the guest kernel (downloads Debian's kernel and headers into the cache once).
datapath:
	$(MAKE) -C datapath KDIR="$(KDIR_GUEST)"

vm-prepare:
	$(VM) prepare

# Installing (docs/install.md): `make stage` builds the release binaries and stages them, their
# man pages and completions (generated from their clap commands) and ccp.ko's source in
# target/stage/; `make install` (which stages first where cargo is on PATH) copies them under
# $(DESTDIR)$(PREFIX), the systemd unit into UNITDIR and the module's source into
# $(DKMS_SRCDIR)/$(MODNAME)-$(VERSION) with a dkms.conf, and lists what it wrote in
# $(DATADIR)/polycc/install-manifest.txt, which `make uninstall` removes. No dkms runs but in
# `make install-dkms` (add, build and install the module for the running kernel).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share
UNITDIR ?= $(PREFIX)/lib/systemd/system
DKMS_SRCDIR ?= /usr/src
# MODNAME=ccp_polycc where AMD's crypto driver, also `ccp`, must keep its name (docs/install.md).
MODNAME ?= ccp
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml | head -n 1)
STAGE := $(abspath $(TARGET_DIR))/stage
# The binaries users run; polycc-ipc-baseline and mocc-targets are development tools.
INSTALL_BINS := polycc polycc-portus polycc-sim polycc-tune
INSTALL_ENV = DESTDIR="$(DESTDIR)" BINDIR="$(BINDIR)" DATADIR="$(DATADIR)" UNITDIR="$(UNITDIR)" \
  DKMS_SRCDIR="$(DKMS_SRCDIR)" MODNAME="$(MODNAME)" VERSION="$(VERSION)" STAGE="$(STAGE)"

stage:
	$(CARGO) build --profile $(PROFILE) $(RELEASE_PACKAGES)
	rm -rf $(STAGE) && mkdir -p $(STAGE)/bin $(STAGE)/share
	for b in $(INSTALL_BINS); do \
	  cp $(POLYCC_BIN_DIR)/$$b $(STAGE)/bin/ && POLYCC_CLI_DOCS=$(STAGE)/share $(STAGE)/bin/$$b >/dev/null || exit 1; \
	done
	$(MAKE) --no-print-directory -C datapath source DEST=$(STAGE)/module MODNAME=$(MODNAME)

# `sudo make install` after `make stage`: root's PATH seldom has cargo, and then what is staged
# is installed as it is.
install:
	@if command -v $(CARGO) >/dev/null; then $(MAKE) --no-print-directory stage; \
	else echo "make install: no $(CARGO) on PATH: installing $(STAGE) as \`make stage\` left it"; fi
	@$(INSTALL_ENV) agent/packaging/install.sh install

uninstall:
	@$(INSTALL_ENV) agent/packaging/install.sh uninstall

install-dkms:
	@command -v dkms >/dev/null || { echo "install-dkms: dkms not found (apt-get install dkms)" >&2; exit 1; }
	@test -f $(DKMS_SRCDIR)/$(MODNAME)-$(VERSION)/dkms.conf || { echo "install-dkms: run make install first" >&2; exit 1; }
	dkms add $(MODNAME)/$(VERSION) || dkms status $(MODNAME)/$(VERSION) | grep -q .
	dkms build $(MODNAME)/$(VERSION)
	dkms install $(MODNAME)/$(VERSION)

uninstall-dkms:
	dkms remove $(MODNAME)/$(VERSION) --all

# `make install` into a temporary DESTDIR, checked file by file, then `make uninstall`
# (agent/packaging/tests/test_install.py; builds the staged module source against the guest's headers).
install-test: stage
	python3 agent/packaging/tests/test_install.py

# Everything: the set-up script's checks, Rust unit/property/simulator tests (algorithms, agent, simulator, tuner), MOCC's training
# environment and pipeline (pytest, and a one-minute training smoke run that must raise the reward), the
# experiment runner's tests, the module's message validator (fuzzed under ASan/UBSan), checkpatch on the
# module, module builds against the 6.1 and 6.12 headers, `make install` and `make uninstall` into a
# temporary folder, the QEMU harness, and the end-to-end kernel tests in the guest. Closes with one
# "tests: N passed, N failed" line; each step prints its start time first ([make test HH:MM:SS] step), so a
# slow run shows where its minutes went.
test: deps-test
	@mkdir -p $(LOGS) && rm -f $(LOGS)/*.log
	@echo "[make test $$(date -u +%T)] install-deps"
	set -o pipefail; python3 -m pytest -q ci/tests 2>&1 | tee $(LOGS)/install-deps.log
	@echo "[make test $$(date -u +%T)] cargo"
	set -o pipefail; $(CARGO) test --workspace --profile $(PROFILE) 2>&1 | tee $(LOGS)/cargo.log
	@echo "[make test $$(date -u +%T)] gym"
	set -o pipefail; $(MAKE) --no-print-directory gym 2>&1 | tee $(LOGS)/gym.log
	@echo "[make test $$(date -u +%T)] mocc"
	set -o pipefail; python3 -m pytest -q onnx/tests 2>&1 | tee $(LOGS)/mocc.log
	@echo "[make test $$(date -u +%T)] mocc-smoke"
	set -o pipefail; $(MAKE) --no-print-directory train-smoke 2>&1 | tee $(LOGS)/mocc-smoke.log
	@echo "mocc train smoke: 1 passed, 0 failed" | tee -a $(LOGS)/mocc-smoke.log
	@echo "[make test $$(date -u +%T)] experiments"
	set -o pipefail; $(MAKE) --no-print-directory experiments-test 2>&1 | tee $(LOGS)/experiments.log
	@echo "[make test $$(date -u +%T)] datapath"
	set -o pipefail; $(MAKE) --no-print-directory datapath-test 2>&1 | tee $(LOGS)/datapath.log
	@echo "[make test $$(date -u +%T)] install"
	set -o pipefail; $(MAKE) --no-print-directory install-test 2>&1 | tee $(LOGS)/install.log
	@echo "[make test $$(date -u +%T)] vm"
	set -o pipefail; $(MAKE) --no-print-directory vm-test 2>&1 | tee $(LOGS)/vm.log
	@echo "[make test $$(date -u +%T)] e2e"
	set -o pipefail; $(MAKE) --no-print-directory e2e-test 2>&1 | tee $(LOGS)/e2e.log
	@echo "[make test $$(date -u +%T)] done"
	@python3 ci/summarize.py $(LOGS)/*.log

datapath-test:
	$(MAKE) -C datapath validate-test
	$(MAKE) -C datapath prr-test
	$(MAKE) -C datapath fuzz FUZZ_SECONDS=30
	datapath/checkpatch.sh
	$(MAKE) -C datapath KDIR="$(KDIR_GUEST)"
	$(MAKE) -C datapath KDIR="$(KDIR_612)"
	@echo "module builds: 2 passed, 0 failed"

vm-test:
	python3 experiments/vm/test_vm.py

# libFuzzer over ccp.ko's message validator and libccp in user space (ASan/UBSan) for 30 minutes,
# growing datapath/build/user/fuzz-corpus; `make test` runs 30 s of it (datapath-test).
# Then the agent's parsers (fuzz-agent) for another 30 minutes.
FUZZ_SECONDS ?= 1800
fuzz: deps-fuzz
	$(MAKE) -C datapath fuzz FUZZ_SECONDS=$(FUZZ_SECONDS)
	$(MAKE) --no-print-directory fuzz-agent FUZZ_SECONDS=$(FUZZ_SECONDS)

# cargo-fuzz (libFuzzer, nightly) over the agent's boundary parsers, FUZZ_SECONDS shared by four
# targets: control socket request lines and policy files, as raw bytes and as generated
# well-formed input (agent/fuzz/src/lib.rs says what each asserts). Corpora grow in
# agent/fuzz/corpus/, crashes land in agent/fuzz/artifacts/ and fail the target (needs nightly and
# cargo-fuzz: `make deps-fuzz`). `make test` replays the targets' checks on stable instead
# (agent/tests/fuzz_replay.rs: the seeds, changed seeds, generated requests and files), which spares
# CI nightly, cargo-fuzz's own build and the targets' build of the dependency tree (7-8 cold minutes).
fuzz-agent: deps-fuzz
	agent/fuzz/run.sh $(FUZZ_SECONDS)

# The kernel path end to end in the guest: ccp.ko + polycc-portus + netem.
e2e-test: deps
	$(CARGO) build --profile $(PROFILE) $(RELEASE_PACKAGES)
	$(MAKE) datapath
	POLYCC_CCP_KO=$(CURDIR)/datapath/build/$(notdir $(KDIR_GUEST))-ccp/ccp.ko python3 datapath/tests/test_e2e.py
	# Again on ccp.ko's portus-compatible transport (ipc=usersock): what the transport carries or
	# decides (delivery, the agent's liveness, the flood, permissions). The rest (startup, the
	# flow table, pinned windows, policies, IPv6) is the same libccp messages over either.
	POLYCC_CCP_KO=$(CURDIR)/datapath/build/$(notdir $(KDIR_GUEST))-ccp/ccp.ko python3 datapath/tests/test_e2e.py \
		--ipc usersock --results results/vm-e2e-usersock $(foreach s,link agent_kill quiet_agent \
		agent_hang agent_restart stress hostile,--only $(s))
	# The BPF datapath (no module) on the same emulated link, in a 6.12 guest (struct_ops links).
	python3 datapath/tests/test_e2e.py --datapath bpf --results results/vm-e2e-bpf

# The main job: the fused policy against in-kernel BBR and CUBIC on an emulated aggregating link, 3 x 30 s
# per scheme in one guest boot (experiments/scenarios/demo.toml through the experiment runner; about 7-9
# minutes on 2 cores): per-rep and median goodput, fused / best member, time to 80 %, sparklines, the
# guest's fidelity; report and per-second plot in results/kernel-demo/.
# `make demo DATAPATH=bpf`: no module, no guest: the BPF congestion control on this host's kernel
# (datapath/bpf/demo.sh; docs/bpf-datapath.md).
ifeq ($(DATAPATH),bpf)
demo: deps
	$(CARGO) build --profile $(PROFILE) $(RELEASE_PACKAGES)
	datapath/bpf/demo.sh
else
demo: deps-demo build
	POLYCC_CCP_KO=$(CURDIR)/datapath/build/$(notdir $(KDIR_GUEST))-ccp/ccp.ko python3 experiments/run --backend vm demo
endif

# The newest `make demo` run (RUN=results/kernel-demo/<ts>-vm for another) kept in docs/results/demo
# with its picture, and the README's "A first result" rebuilt from it (experiments/publish.py).
publish-demo:
	python3 experiments/publish.py demo $(RUN)

# Every results block in the README and docs/ rebuilt from the runs kept in docs/results
# (`experiments/publish.py keep RUN NAME` keeps one; `make test` checks that none is stale).
publish-docs:
	python3 experiments/publish.py

# The BPF datapath on this host's kernel (also part of `cargo test --workspace` in `make test`; each
# test skips with the missing feature named where it cannot run), then its benchmarks.
bpf-test: deps
	$(CARGO) test -p polycc-bpf
	$(CARGO) test -p polycc-agent --test bpf_e2e

bench-bpf: deps
	$(CARGO) build --profile $(PROFILE) $(RELEASE_PACKAGES)
	$(CARGO) bench -p polycc-agent --bench bpf_roundtrip | tee target/bench-bpf-roundtrip.jsonl
	python3 datapath/bpf/roundtrip_table.py target/bench-bpf-roundtrip.jsonl --table target/bench-bpf-roundtrip-table.json
	$(CARGO) bench -p polycc-agent --bench bpf_loopback | tee target/bench-bpf-loopback.txt
	python3 datapath/bpf/loopback_table.py target/bench-bpf-loopback.txt --table target/bench-bpf-loopback-table.json
	python3 datapath/bpf/bench_cpu.py --out target/bench-bpf-cpu.json --table target/bench-bpf-cpu-table.json
	OUT=target/bpf-fallback-veth datapath/bpf/fallback_veth.sh 3 | tee target/bench-bpf-fallback-veth.txt

# The demo and the two PolyCC scenarios on the simulator (~15 s, no guest; docs/demo.md).
sim-demo: deps
	$(CARGO) build --profile $(PROFILE) $(RELEASE_PACKAGES)
	experiments/run --backend sim --sim $(SIM) --full demo polycc-s1 polycc-s2

# The measured tables in docs/ that tests and benchmarks print (docs/pcc.md, tune.md, mocc.md, agent.md,
# testing.md), remeasured by their commands and rebuilt (experiments/tables.py; tens of minutes).
tables: deps
	python3 experiments/tables.py --all

# Simulator speed and per-report decision cost (criterion), with ratios printed.
bench: deps
	$(CARGO) bench -p polycc-algorithms --bench decision
	$(CARGO) bench -p polycc-algorithms --bench mocc
	$(CARGO) bench -p polycc-sim --bench sim_speed
	$(CARGO) bench -p polycc-agent --bench reports

# Report -> update round trips through ccp.ko and the agent, beside a unix-socket baseline, and the
# ACK path's cost against in-kernel Reno on a CPU-bound link (guest, one boot each).
bench-kernel: build
	POLYCC_CCP_KO=$(CURDIR)/datapath/build/$(notdir $(KDIR_GUEST))-ccp/ccp.ko python3 experiments/ipc_bench.py
	POLYCC_CCP_KO=$(CURDIR)/datapath/build/$(notdir $(KDIR_GUEST))-ccp/ccp.ko python3 experiments/ack_bench.py

# MOCC's training environment: the polycc_gym Python module (onnx/gym, pyo3) built with maturin
# and installed into python3; its tests: python3 -m pytest onnx/tests/test_gym.py.
GYM_WHEELS := target/gym-wheels
gym: deps-mocc
	python3 -m pip install -q "maturin>=1.5,<2" numpy pytest
	rm -rf $(GYM_WHEELS)
	python3 -m maturin build --profile $(PROFILE) --quiet -m onnx/gym/Cargo.toml -o $(GYM_WHEELS)
	python3 -m pip install -q --force-reinstall --no-deps $(GYM_WHEELS)/polycc_gym-*.whl

# MOCC training (onnx/python/mocc) on the Rust simulator: the full schedule into onnx/runs/train,
# exported to onnx/mocc.onnx (resumable: TRAIN_ARGS=--resume); the smoke run (about a minute, asserts
# the bootstrap objectives' evaluation reward rises). Needs pip install -r onnx/requirements.txt and make gym
# (exit status 4 says so when polycc_gym is missing).
MOCC := PYTHONPATH=onnx/python python3 -m mocc
train: deps-mocc
	$(MOCC).train --out onnx/runs/train --workers 2 --seed 1 --export onnx/mocc.onnx $(TRAIN_ARGS)

train-smoke: deps-mocc
	rm -rf onnx/runs/smoke
	$(MOCC).train --out onnx/runs/smoke --smoke --workers 2 --seed 1 --no-progress

# Issue 18's targets for onnx/mocc.onnx on 30 links of the users range, eq. 2's oracle as the yardstick
# (mocc.judge; about 30 s here; exit 1 while a target is missed). The classic CCAs run on $(SIM).
judge: deps-mocc
	$(MOCC).judge --model onnx/mocc.onnx --links 30 --out onnx/runs/judge --no-progress

# The experiment runner (experiments/run): every scenario on the simulator (under a minute), then the
# kernel-path targets (polycc-s1, polycc-s2, fidelity, overhead) in the QEMU guest, quick settings
# (about 20 minutes, of which ~4 for the 10 s link probes around each round: the guest's fidelity); FULL=1
# for the paper-length runs. Reports and plots go to results/<scenario>/.
EXPERIMENTS_SIM := polycc-s1 fusion-share polycc-s2 pcc-loss pcc-shallow pcc-changing mocc-objectives mocc-fairness fidelity matrix
EXPERIMENTS_VM := polycc-s1 polycc-s2 fidelity overhead
experiments: deps-demo
	$(CARGO) build --profile $(PROFILE) $(RELEASE_PACKAGES)
	$(MAKE) datapath
	python3 experiments/run $(if $(FULL),--full) $(EXPERIMENTS_SIM)
	POLYCC_CCP_KO=$(CURDIR)/datapath/build/$(notdir $(KDIR_GUEST))-ccp/ccp.ko python3 experiments/run --backend vm $(if $(FULL),--full) $(EXPERIMENTS_VM)

# The runner's own tests: metrics on synthetic inputs, scenario validation, the simulator backend end to end.
experiments-test: deps-demo
	$(CARGO) build --profile $(PROFILE) $(RELEASE_PACKAGES)
	python3 experiments/tests/run_tests.py

# Clippy, and rustdoc's link checks over every item (private ones too: the code's own docs link them).
lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --workspace --document-private-items

clean:
	$(CARGO) clean
	$(MAKE) -C datapath clean
