#!/bin/sh
# Print the directory holding the libccp C sources bundled in the `libccp` crate, as cargo
# resolved it for this workspace (agent/ depends on it). The project keeps no copy of libccp.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
command -v cargo >/dev/null || { echo "find-libccp: cargo not found (install Rust >= 1.85 with rustup)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "find-libccp: python3 not found" >&2; exit 1; }
cargo metadata --format-version 1 --manifest-path "$root/Cargo.toml" 2>/dev/null | python3 -c '
import json, os, sys
meta = json.load(sys.stdin)
for p in meta["packages"]:
    if p["name"] == "libccp":
        d = os.path.join(os.path.dirname(p["manifest_path"]), "libccp")
        if os.path.isfile(os.path.join(d, "ccp.c")):
            print(d)
            sys.exit(0)
sys.exit("find-libccp: the workspace does not resolve the libccp crate (agent/Cargo.toml should depend on it); run cargo fetch")
'
