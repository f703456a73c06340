# polycc: `make demo` builds everything and runs the main job; `make test` runs every test.
SHELL := /bin/bash
CARGO ?= cargo
SIM := target/release/polycc-sim

.PHONY: all build test demo bench deps clean lint

all: build

deps:
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs) or run .ci/run"; exit 1; }
	@command -v python3 >/dev/null || { echo "python3 not found: apt-get install python3"; exit 1; }

build: deps
	$(CARGO) build --release --workspace

# Unit, property and simulator-scenario tests (test profile is optimized; see Cargo.toml).
test: deps
	mkdir -p target; set -o pipefail; $(CARGO) test --workspace 2>&1 | tee target/test.log
	@awk '/^test result:/ { p += $$4; f += $$6 } END { printf "tests: %d passed, %d failed\n", p, f }' target/test.log

# Until the kernel path lands: the two PolyCC scenarios in the simulator, BBR vs CUBIC vs fused.
demo: build
	python3 experiments/demo.py --sim $(SIM)

# Simulator speed and per-report decision cost (criterion), with ratios printed.
bench: deps
	$(CARGO) bench -p polycc-algorithms --bench decision
	$(CARGO) bench -p polycc-sim --bench sim_speed

lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
