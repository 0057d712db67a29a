#!/usr/bin/env bash
# Builds the Debian package of Kelp: OUTDIR/kelp_<version>_<arch>.deb (OUTDIR: target/debian),
# with /usr/bin/kelp, the systemd unit, /etc/kelp/kelp.toml (a conffile), the docs, a manual
# page and the maintainer scripts from packaging/ (packaging/README.md says what each does).
#   scripts/package-deb.sh [OUTDIR]
#   KELP_BIN=/path/to/kelp scripts/package-deb.sh   # package that binary instead of building
# Version: Cargo.toml's. Depends: computed by dpkg-shlibdeps from the binary's libraries and
# symbol versions (so a package built on bookworm installs on any bookworm), plus adduser.
# Needs dpkg-deb and dpkg-shlibdeps (dpkg-dev, which build-essential pulls in) and objcopy
# (binutils). Prints the .deb's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
OUTDIR="${1:-target/debian}"
log() { echo "package-deb: $*" >&2; }
for tool in dpkg-deb dpkg-shlibdeps objcopy; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    log "$tool not found: apt-get install dpkg-dev binutils"
    exit 1
  fi
done

version="$(sed -n '/^\[package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)"
[ -n "$version" ] || { log "no [package] version in Cargo.toml"; exit 1; }
arch="$(dpkg --print-architecture)"

if [ -z "${KELP_BIN:-}" ]; then
  log "cargo build --release --bin kelp"
  cargo build --release --locked --bin kelp
  KELP_BIN="${CARGO_TARGET_DIR:-target}/release/kelp"
fi
[ -x "$KELP_BIN" ] || { log "no executable at $KELP_BIN"; exit 1; }

stage="$(mktemp -d -t kelp-deb-XXXXXX)"
trap 'rm -rf "$stage"' EXIT
root="$stage/kelp_${version}_$arch"
umask 022
install -d "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" "$root/etc/kelp" \
  "$root/usr/share/doc/kelp"
# Debug info stays out of the package (it is 6/7 of the release binary); the symbol table stays,
# so a panic's backtrace still names functions.
objcopy --strip-debug "$KELP_BIN" "$root/usr/bin/kelp"
chmod 0755 "$root/usr/bin/kelp"
install -m 0644 packaging/kelp.service "$root/lib/systemd/system/kelp.service"
install -m 0644 packaging/kelp.toml "$root/etc/kelp/kelp.toml"
install -m 0644 packaging/debian/copyright "$root/usr/share/doc/kelp/copyright"
gzip -9n -c README.md >"$root/usr/share/doc/kelp/README.md.gz"
gzip -9n -c packaging/README.md >"$root/usr/share/doc/kelp/README.Debian.gz"
install -d "$root/usr/share/man/man1"
gzip -9n -c packaging/kelp.1 >"$root/usr/share/man/man1/kelp.1.gz"
chmod 0644 "$root/usr/share/man/man1/kelp.1.gz"
# A native package's changelog: which commit it was built from.
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
maint="$(sed -n 's/^Maintainer: //p' packaging/debian/control.in)"
printf 'kelp (%s) unstable; urgency=medium\n\n  * Built from commit %s.\n\n -- %s  %s\n' \
  "$version" "$commit" "$maint" "$(date -R ${SOURCE_DATE_EPOCH:+-d "@$SOURCE_DATE_EPOCH"})" \
  | gzip -9n >"$root/usr/share/doc/kelp/changelog.gz"
# Symbols are kept on purpose (above): lintian is told so.
install -d "$root/usr/share/lintian/overrides"
install -m 0644 packaging/debian/lintian-overrides "$root/usr/share/lintian/overrides/kelp"
chmod 0644 "$root/usr/share/doc/kelp/"*.gz
install -m 0644 packaging/debian/conffiles "$root/DEBIAN/conffiles"
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$root/DEBIAN/"

# dpkg-shlibdeps reads a source package's debian/control; a minimal one for the call.
mkdir -p "$stage/src/debian"
printf 'Source: kelp\n\nPackage: kelp\nArchitecture: any\n' >"$stage/src/debian/control"
shlibs="$(cd "$stage/src" && dpkg-shlibdeps -O "$root/usr/bin/kelp" | sed -n 's/^shlibs:Depends=//p')"
[ -n "$shlibs" ] || { log "dpkg-shlibdeps found no shared library dependencies"; exit 1; }
depends="$shlibs, adduser"
installed_size="$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@DEPENDS@/$depends/" \
  -e "s/@INSTALLED_SIZE@/$installed_size/" packaging/debian/control.in >"$root/DEBIAN/control"
(cd "$root" && find . -type f ! -path './DEBIAN/*' ! -path './etc/*' -printf '%P\0' | sort -z \
  | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"

mkdir -p "$OUTDIR"
deb="$OUTDIR/kelp_${version}_$arch.deb"
dpkg-deb --build --root-owner-group "$root" "$deb" >/dev/null
log "built $deb (Depends: $depends)"
echo "$deb"
