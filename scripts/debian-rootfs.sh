#!/usr/bin/env bash
# Prints the path of a tarball holding a fresh, minimal Debian (debootstrap --variant=minbase,
# bookworm by default): the "fresh machine" the package test (tests/e2e/test_package_deb.py)
# installs Kelp's .deb into. Made once, with the network, then cached under
# ${KELP_CACHE:-$HOME/.cache/kelp}/debian-rootfs, so later runs only unpack it.
# scripts/install-deps.sh runs it; the test runs it again (a no-op when cached).
# Needs root (debootstrap) and debootstrap on the first run only.
#   KELP_DEBIAN_SUITE (bookworm), KELP_DEBIAN_MIRROR (http://deb.debian.org/debian)
set -euo pipefail
CACHE="${KELP_CACHE:-$HOME/.cache/kelp}"
SUITE="${KELP_DEBIAN_SUITE:-bookworm}"
MIRROR="${KELP_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
ARCH="$(dpkg --print-architecture)"
dir="$CACHE/debian-rootfs"
tarball="$dir/$SUITE-minbase-$ARCH.tar.gz"
log() { echo "debian-rootfs: $*" >&2; }

if [ -s "$tarball" ]; then
  echo "$tarball"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  log "debootstrap needs root to make $tarball"
  exit 1
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  log "debootstrap not found: scripts/install-deps.sh installs it"
  exit 1
fi

mkdir -p "$dir"
work="$(mktemp -d "$dir/.build.XXXXXX")"
cleanup() {
  # debootstrap mounts /proc and /sys in the target while it works; a failed run can leave them.
  local m
  for m in $(findmnt -rn -o TARGET | grep -F "$work/" | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

log "debootstrap --variant=minbase $SUITE from $MIRROR (once; cached in $tarball)"
debootstrap --variant=minbase --arch="$ARCH" "$SUITE" "$work/root" "$MIRROR" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  log "debootstrap failed"
  exit 1
}
# A system as installed, not as debootstrap used it: no downloaded .debs, no apt lists.
rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"*_*
tar --numeric-owner -C "$work/root" -czf "$work/rootfs.tar.gz" .
mv "$work/rootfs.tar.gz" "$tarball"
log "made $tarball ($(du -h "$tarball" | cut -f1))"
echo "$tarball"
