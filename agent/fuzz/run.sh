#!/usr/bin/env bash
# cargo-fuzz over the agent's boundary parsers for SECONDS in all, shared evenly by the targets
# (make fuzz-agent: 30 min; make test: 2 min). Each target's corpus grows in corpus/<target>
# (started from seeds/<target>); a crash lands in artifacts/<target>/ (cargo-fuzz's place) and
# fails the run.
# Prints one line per target and closes with `cargo-fuzz: N passed, M failed` (a target passes
# when it ran its time without a crash); logs in target/fuzz-logs/.
#
#   agent/fuzz/run.sh SECONDS [TARGET...]
#   cargo +nightly fuzz run -s none TARGET artifacts/TARGET/crash-...   replays a crash
#
# Built without a sanitizer (-s none): the parsers are safe Rust (the agent's only unsafe code,
# umask around the control socket's bind, is not on these paths), so AddressSanitizer found
# nothing to check and ran the targets 2-5x slower; panics, debug assertions and overflow checks
# are on. FUZZ_SANITIZER=address builds with it.
set -uo pipefail
cd "$(dirname "$0")"

seconds=${1:?usage: run.sh SECONDS [TARGET...]}
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(control_request control_request_structured policy_file policy_file_structured)
sanitizer=${FUZZ_SANITIZER:-none}
# Requests are one line of at most 64 KiB (control::MAX_REQUEST_BYTES); policy files are small
# enough that 16 KiB inputs cover every layout while keeping each execution fast.
max_len=16384
logs=target/fuzz-logs
mkdir -p "$logs"

fail() {
  echo "fuzz-agent: $*" >&2
  echo "cargo-fuzz: 0 passed, ${#targets[@]} failed"
  exit 1
}

cargo +nightly --version >/dev/null 2>&1 ||
  fail "no nightly toolchain: rustup toolchain install nightly --profile minimal"
cargo +nightly fuzz --version >/dev/null 2>&1 || fail "no cargo-fuzz: cargo install cargo-fuzz --locked"

start=$(date +%s)
if ! cargo +nightly fuzz build -s "$sanitizer" >"$logs/build.log" 2>&1; then
  tail -n 40 "$logs/build.log"
  fail "the fuzz targets do not build (log: agent/fuzz/$logs/build.log)"
fi
echo "fuzz-agent: targets built in $(($(date +%s) - start)) s (-s $sanitizer)"

per_target=$((seconds / ${#targets[@]}))
[ "$per_target" -ge 1 ] || per_target=1
passed=0
failed=0
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  seeds=()
  [ -d "seeds/$t" ] && seeds=("seeds/$t")
  log="$logs/$t.log"
  marker="$logs/.$t.start"
  touch "$marker"
  t0=$(date +%s)
  cargo +nightly fuzz run -s "$sanitizer" "$t" "corpus/$t" "${seeds[@]}" -- \
    -max_total_time="$per_target" -max_len=$max_len -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 >"$log" 2>&1
  rc=$?
  secs=$(($(date +%s) - t0))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  [ -n "$runs" ] || runs=$(grep -o '^#[0-9]*' "$log" | tail -n 1 | tr -d '#')
  runs=${runs:-0}
  crashes=$(find "artifacts/$t" -type f -newer "$marker" | wc -l)
  [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ] && crashes=1
  echo "fuzz-agent $t: $runs runs in $secs s ($((runs / (secs > 0 ? secs : 1))) per s), corpus $(ls "corpus/$t" | wc -l), $crashes crashes"
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    grep -A 12 -m 1 -E "panicked at|ERROR: libFuzzer|SUMMARY" "$log" | head -n 30
    echo "fuzz-agent $t: libFuzzer exited $rc; input(s) in agent/fuzz/artifacts/$t/, log in agent/fuzz/$log" >&2
  fi
done
echo "cargo-fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
