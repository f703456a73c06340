#!/usr/bin/env bash
# `make install` and `make uninstall` (docs/install.md). Install copies what `make stage` put in
# STAGE under $DESTDIR: the binaries, their man pages and completions, the systemd unit and the
# module's source for DKMS. Every file, and every folder it had to create, goes into a manifest
# ($DATADIR/polycc/install-manifest.txt); uninstall removes exactly those, folders only when
# they are empty. Runs no dkms and needs no root when DESTDIR is a folder of the user's.
#
#   agent/packaging/install.sh install|uninstall
#
# From the environment (the Makefile passes them all): DESTDIR (may be empty), BINDIR, DATADIR,
# UNITDIR, DKMS_SRCDIR, MODNAME, VERSION, and for install STAGE.
set -euo pipefail

: "${DESTDIR=}" "${BINDIR:?}" "${DATADIR:?}" "${UNITDIR:?}" "${DKMS_SRCDIR:?}" "${MODNAME:?}" "${VERSION:?}"
for path in "$BINDIR" "$DATADIR" "$UNITDIR" "$DKMS_SRCDIR"; do
	case $path in /*) ;; *) echo "install.sh: $path: not an absolute path" >&2; exit 2 ;; esac
done
MANIFEST="$DATADIR/polycc/install-manifest.txt"
MODULE_SRC="$DKMS_SRCDIR/$MODNAME-$VERSION"
entries=()  # "dir PATH" or "file PATH", PATH without DESTDIR, in the order they were made

# `dir` entries for each folder from the top down that does not exist yet, then the folders.
make_dirs() {
	local dir=$1 missing=()
	while [ ! -d "$DESTDIR$dir" ] && [ "$dir" != / ]; do
		missing=("$dir" "${missing[@]}")
		dir=$(dirname "$dir")
	done
	for dir in "${missing[@]}"; do
		mkdir "$DESTDIR$dir"
		entries+=("dir $dir")
	done
}

# put MODE SOURCE DEST
put() {
	make_dirs "$(dirname "$3")"
	install -m "$1" "$2" "$DESTDIR$3"
	entries+=("file $3")
	echo "  $3"
}

# put_tree MODE SOURCE_DIR DEST_DIR: every file under SOURCE_DIR, at the same relative path.
put_tree() {
	local f
	while IFS= read -r f; do
		put "$1" "$2/$f" "$3/$f"
	done < <(cd "$2" && find . -type f | sed 's|^\./||' | LC_ALL=C sort)
}

install_all() {
	: "${STAGE:?}"
	[ -d "$STAGE/bin" ] && [ -d "$STAGE/share" ] && [ -d "$STAGE/module" ] ||
		{ echo "install.sh: $STAGE is not staged (make stage)" >&2; exit 1; }
	# A second install keeps the first one's entries: the folders it created are still ours.
	if [ -f "$DESTDIR$MANIFEST" ]; then
		mapfile -t entries < "$DESTDIR$MANIFEST"
	fi
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	[ -z "$DESTDIR" ] || mkdir -p "$DESTDIR"
	echo "installing polycc $VERSION into ${DESTDIR:-/}:"
	put_tree 755 "$STAGE/bin" "$BINDIR"
	put_tree 644 "$STAGE/share" "$DATADIR"
	sed "s|@BINDIR@|$BINDIR|g" "$(dirname "$0")/polycc-portus.service.in" > "$tmp/polycc-portus.service"
	put 644 "$tmp/polycc-portus.service" "$UNITDIR/polycc-portus.service"
	put_tree 644 "$STAGE/module" "$MODULE_SRC"
	sed -e "s|@MODNAME@|$MODNAME|g" -e "s|@VERSION@|$VERSION|g" "$(dirname "$0")/dkms.conf.in" > "$tmp/dkms.conf"
	put 644 "$tmp/dkms.conf" "$MODULE_SRC/dkms.conf"
	make_dirs "$(dirname "$MANIFEST")"
	entries+=("file $MANIFEST")
	printf '%s\n' "${entries[@]}" | awk '!seen[$0]++' > "$DESTDIR$MANIFEST"
	echo "  $MANIFEST (what make uninstall removes)"
	# AMD's crypto driver is a module named ccp too, which DKMS's would hide (docs/install.md).
	if [ -z "$DESTDIR" ] && [ "$MODNAME" = ccp ] &&
		find "/lib/modules/$(uname -r)/kernel" -name 'ccp.ko*' 2>/dev/null | grep -q .; then
		echo "warning: this kernel has AMD's crypto driver, also a module named ccp, which a DKMS ccp.ko" >&2
		echo "         would hide: make uninstall, then make install MODNAME=ccp_polycc" >&2
	fi
	echo "next: sudo make install-dkms$([ "$MODNAME" = ccp ] || echo " MODNAME=$MODNAME") (builds and installs $MODNAME.ko for this kernel), then"
	echo "      sudo systemctl daemon-reload && sudo systemctl enable --now polycc-portus"
}

uninstall_all() {
	[ -f "$DESTDIR$MANIFEST" ] ||
		{ echo "install.sh: no $DESTDIR$MANIFEST: nothing installed there by make install" >&2; exit 1; }
	if [ -z "$DESTDIR" ] && command -v dkms >/dev/null && dkms status "$MODNAME/$VERSION" 2>/dev/null | grep -q .; then
		echo "note: DKMS still has $MODNAME/$VERSION: sudo make uninstall-dkms removes it" >&2
	fi
	mapfile -t entries < "$DESTDIR$MANIFEST"
	local e i
	echo "removing polycc $VERSION from ${DESTDIR:-/}:"
	for e in "${entries[@]}"; do
		if [ "${e%% *}" = file ]; then
			rm -f "$DESTDIR${e#file }"
			echo "  ${e#file }"
		fi
	done
	# Folders last, deepest first; one that holds something else now is left where it is.
	for ((i = ${#entries[@]} - 1; i >= 0; i--)); do
		e=${entries[i]}
		if [ "${e%% *}" = dir ]; then
			rmdir "$DESTDIR${e#dir }" 2>/dev/null || echo "  kept ${e#dir }/ (not empty)"
		fi
	done
}

case "${1:-}" in
install) install_all ;;
uninstall) uninstall_all ;;
*) echo "usage: $0 install|uninstall" >&2; exit 2 ;;
esac
