#!/usr/bin/env bash
# experiments/sim_fingerprint.sh: one hash per simulator run over a fixed grid of schemes and links,
# for checking that a refactor changes no behaviour. The simulator is a pure function of its flags
# and seed, so two revisions that decide alike print the same hashes, down to every report's cwnd
# and rate (the hash covers the JSON summary, less its wall-clock time, and the per-report series).
#
#   experiments/sim_fingerprint.sh [POLYCC_SIM] > before.txt   # at the old revision
#   experiments/sim_fingerprint.sh [POLYCC_SIM] > after.txt    # at the new one
#   diff before.txt after.txt                                  # empty: same behaviour
#
# POLYCC_SIM defaults to target/release/polycc-sim (build it with `cargo build --release -p polycc-sim`).
set -euo pipefail
cd "$(dirname "$0")/.."
SIM=${1:-${POLYCC_BIN_DIR:-target/release}/polycc-sim}
[ -x "$SIM" ] || { echo "sim_fingerprint: $SIM not found: cargo build --release -p polycc-sim" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

schemes=(
  "--alg reno" "--alg cubic" "--alg vegas" "--alg bbr" "--alg copa" "--alg allegro" "--alg vivace"
  "--alg mocc" "--alg mocc --weights 0.1,0.8,0.1"
  "--alg fused --pilot bbr --copilot cubic --fusion max --fuse-on cwnd"
  "--alg fused --pilot bbr --copilot copa --fusion min --fuse-on rate"
  "--alg fused --pilot vivace --copilot cubic"
)
links=(
  "--bw 20mbit --rtt 40ms"
  "--bw 20mbit --rtt 100ms --rtt-dev 70ms"
  "--bw 50mbit --rtt 30ms --loss 0.01"
  "--bw 100mbit --rtt 10ms --buffer 6pkt"
  "--bw 20mbit --rtt 40ms --bw-change 5s:10mbit"
)
extra=(
  "--alg bbr --flows 3 --stagger 5s --bw 20mbit --rtt 40ms"
  "--alg fused --pilot bbr --copilot cubic --competitor cubic --bw 20mbit --rtt 100ms"
  "--alg vivace --bw 100mbit --rtt 30ms --policer 20mbit"
  "--alg vivace --bw 100mbit --rtt 30ms --random-changes 5s:bw=10mbit-100mbit,rtt=10ms-100ms,loss=0-0.01"
)
run() {
  # shellcheck disable=SC2086
  "$SIM" $1 --duration 20s --json --series "$TMP/s.csv" > "$TMP/s.json"
  # wall_s is the host's time to simulate, the one field that is not a function of the flags.
  printf '%s  %s\n' "$(sed -E 's/"wall_s":[^,}]*,?//' "$TMP/s.json" | cat - "$TMP/s.csv" | sha256sum | cut -c1-16)" "$1"
}
for s in "${schemes[@]}"; do for l in "${links[@]}"; do run "$s $l"; done; done
for e in "${extra[@]}"; do run "$e"; done
