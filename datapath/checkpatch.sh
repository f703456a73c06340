#!/bin/sh
# Run the kernel's checkpatch.pl (from Debian's linux-source-6.1, cached once) on the module's
# own sources. Ignored: CAMELCASE (libccp's struct and field names), LINUX_VERSION_CODE (the
# cong_control signature must follow the target headers) and its constant-side twin, and
# REPEATED_WORD (a diagram line ending and the next starting with "agent").
set -eu
cache=${POLYCC_VM_CACHE:-$HOME/.cache/polycc-vm}/checkpatch
script=$(ls "$cache"/linux-source-*/scripts/checkpatch.pl 2>/dev/null | head -n 1 || true)
if [ -z "$script" ]; then
	mkdir -p "$cache"
	work=$(mktemp -d "$cache/dl.XXXXXX")
	(cd "$work" && apt-get download -q linux-source-6.1 >/dev/null 2>&1) ||
		{ echo "checkpatch: apt-get download linux-source-6.1 failed (run apt-get update as root)" >&2; rm -rf "$work"; exit 1; }
	dpkg-deb --fsys-tarfile "$work"/linux-source-6.1_*.deb | tar -x -C "$work" --wildcards '*/linux-source-6.1.tar.xz'
	tar -xJf "$work"/usr/src/linux-source-6.1.tar.xz -C "$cache" --wildcards \
		'*/scripts/checkpatch.pl' '*/scripts/spelling.txt' '*/scripts/const_structs.checkpatch'
	rm -rf "$work"
	script=$(ls "$cache"/linux-source-*/scripts/checkpatch.pl | head -n 1)
fi
cd "$(dirname "$0")"
perl "$script" --no-tree --strict --terse \
	--ignore CAMELCASE,LINUX_VERSION_CODE,CONSTANT_COMPARISON,REPEATED_WORD \
	-f ccp_main.c ccp_flowinfo.c ccp_flowinfo.h ccp_nl.c ccp_nl.h ccp_prr.h ccp_stats.c ccp_stats.h ccp_validate.c ccp_validate.h 2>/dev/null
echo "checkpatch: 1 passed, 0 failed"
