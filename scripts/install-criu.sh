#!/usr/bin/env bash
# A CRIU that works on this machine (for the guard's checkpoints, issue 5).
# Debian bookworm's criu 3.17 fails `criu check` on kernels with the newer
# vDSO layout, and CRIU < 4.2 cannot dump TCP sockets on kernels >= 6.16
# (doc/operator-guide.md, "Checkpoints and the guard").  So: keep a CRIU that passes `criu check`; otherwise
# build the newest criu >= 4.2 source package from Debian unstable/testing
# (fetched through a private apt source list; the system's apt
# configuration is left alone) into /opt/criu, linked as
# /usr/local/sbin/criu.  Idempotent; says what it does while it builds.
#
#   scripts/install-criu.sh        (root; scripts/install-deps.sh runs it)
set -euo pipefail

PREFIX=/opt/criu
WORK=${APUS_CRIU_WORK:-/var/tmp/apus-criu}
log() { echo "install-criu: $*"; }

works() { # CRIU binary -> does `criu check` pass?
	[ -x "$1" ] && "$1" check 2>&1 | grep -q "Looks good"
}

for c in "$(command -v criu 2>/dev/null || true)" "$PREFIX/sbin/criu"; do
	if [ -n "$c" ] && works "$c"; then
		log "$c passes criu check ($("$c" --version | head -n 1)), nothing to do"
		exit 0
	fi
done
[ "$(id -u)" -eq 0 ] || { log "needs root to build and install CRIU"; exit 1; }

log "installing CRIU's build dependencies"
apt-get install -y --no-install-recommends build-essential pkg-config python3 libbsd-dev \
	libcap-dev libgnutls28-dev libnet1-dev libnftables-dev libnl-3-dev libprotobuf-c-dev \
	libprotobuf-dev protobuf-c-compiler protobuf-compiler uuid-dev nftables xz-utils >/dev/null

mkdir -p "$WORK/lists/partial"
cd "$WORK"
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
mirror=${mirror:-http://deb.debian.org/debian}
{
	echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror sid main"
	echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror testing main"
} >sources.list
APT=(-o Dir::Etc::sourcelist="$WORK/sources.list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$WORK/lists")
log "reading the criu source packages of Debian unstable/testing ($mirror)"
apt-get "${APT[@]}" update >/dev/null

# The newest version offered, and its upstream tarball's SHA-256.
read -r version < <(apt-cache "${APT[@]}" showsrc criu 2>/dev/null | sed -n 's/^Version: //p' | sort -V | tail -n 1)
[ -n "$version" ] || { log "no criu source package found"; exit 1; }
upstream=${version%-*}
upstream=${upstream#*:}
if [ "$(printf '%s\n4.2\n' "$upstream" | sort -V | head -n 1)" != 4.2 ]; then
	log "the newest criu source is $upstream, older than the 4.2 this kernel needs"
	exit 1
fi
tarball=criu_$upstream.orig.tar.xz
sha=$(apt-cache "${APT[@]}" showsrc criu 2>/dev/null | awk -v f="$tarball" '$3 == f && length($1) == 64 { print $1; exit }')
log "fetching criu $version"
apt-get "${APT[@]}" --download-only source "criu=$version" >/dev/null 2>&1 || true
[ -f "$tarball" ] || { log "could not download $tarball"; exit 1; }
echo "$sha  $tarball" | sha256sum -c --quiet - || { log "$tarball does not match its SHA-256"; exit 1; }

log "building criu $upstream (about a minute on 2 cores)"
rm -rf "criu-$upstream"
tar xf "$tarball"
cd "criu-$upstream"
# SKIP_PIP_INSTALL: do not pip-install pycriu into whatever python3 is on PATH.
make -j"$(nproc)" criu lib >build.log 2>&1 || { tail -n 20 build.log; log "build failed"; exit 1; }
make install-criu install-lib PREFIX="$PREFIX" SKIP_PIP_INSTALL=1 >>build.log 2>&1 ||
	{ tail -n 20 build.log; log "install failed"; exit 1; }
ln -sf "$PREFIX/sbin/criu" /usr/local/sbin/criu
if works "$PREFIX/sbin/criu"; then
	log "installed $("$PREFIX/sbin/criu" --version | head -n 1) in $PREFIX: criu check passes"
else
	"$PREFIX/sbin/criu" check 2>&1 | tail -n 3
	log "built, but criu check fails on this kernel"
	exit 1
fi
