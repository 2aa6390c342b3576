#!/usr/bin/env bash
# Install what apus needs to build, test and benchmark: a C toolchain,
# Redis, bats, the RDMA/OpenSSL headers, arping (gratuitous ARP for
# scripts/leader-hooks/vip.sh), man and groff (install.bats renders apus(1);
# col is in bsdextrautils), curl and python3 (metrics.bats scrapes, and holds
# a port), systemd (install.bats: systemd-analyze verify; nothing is started),
# and what the benchmark suite compares against or
# draws with (etcd, gnuplot), apps/mariadb's server, client and sysbench, and
# apps/memcached's memcached and libmemcached-tools (memcslap); psmisc's
# fuser (tests/run.sh leaves the regions another run maps alone); tcl, jq
# and dpkg-dev for make redis-suite (Redis's own suite, from Debian's source);
# apps/openldap's slapd and ldap-utils; apps/clamav's clamd (clamav-daemon)
# and clamdscan.
# Idempotent: does nothing when all are present.
set -euo pipefail

PKGS=(
	build-essential pkg-config
	redis-server redis-tools
	bats
	libibverbs-dev librdmacm-dev libssl-dev
	iproute2 procps
	iputils-arping
	man-db groff-base bsdextrautils
	curl python3 systemd
	etcd-server etcd-client gnuplot-nox
	mariadb-server mariadb-client sysbench
	memcached libmemcached-tools
	psmisc gdb
	tcl jq dpkg-dev
	slapd ldap-utils
	clamav-daemon clamdscan
)

log() { echo "install-deps: $*"; }

installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

missing=()
for p in "${PKGS[@]}"; do
	installed "$p" || missing+=("$p")
done

# CRIU for the guard's checkpoints: not fatal, replication works without it.
install_criu() {
	bash "$(dirname "$0")/install-criu.sh" ||
		log "no working CRIU: checkpoints are unavailable (the CRIU tests skip)"
}

if [ "${#missing[@]}" -eq 0 ]; then
	log "all packages present (${PKGS[*]}), skipping apt"
	install_criu
	exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO=(sudo)
	else
		log "must run as root (or have sudo) to install: ${missing[*]}" >&2
		exit 1
	fi
fi

export DEBIAN_FRONTEND=noninteractive
log "missing: ${missing[*]}"
log "running apt-get update"
"${SUDO[@]}" apt-get update
log "running apt-get install -y --no-install-recommends ${missing[*]}"
"${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"

# Debian starts a system redis on 6379 when the package is installed; the
# tests do not use it and it only costs memory and CPU, so stop it.
for p in "${missing[@]}"; do
	[ "$p" = redis-server ] || continue
	log "stopping the system redis-server service, if any"
	"${SUDO[@]}" service redis-server stop >/dev/null 2>&1 || true
	pids=$(ss -ltnpH 'sport = :6379' 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u || true)
	for pid in $pids; do
		if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = redis-server ]; then
			log "killing system redis-server (pid $pid) on port 6379"
			"${SUDO[@]}" kill "$pid" 2>/dev/null || true
		fi
	done
done

# The same for etcd's service (the benchmark starts its own members).
for p in "${missing[@]}"; do
	[ "$p" = etcd-server ] || continue
	log "stopping the system etcd service, if any"
	"${SUDO[@]}" service etcd stop >/dev/null 2>&1 || true
	pkill -x etcd 2>/dev/null || true
done

# And for MariaDB's (apps/mariadb starts its own replicas on 3307-3309 and
# the tests on 20101-20103; the system one on 3306 only costs memory). The
# machine may not run systemd: `service` is enough, and its failure is not.
for p in "${missing[@]}"; do
	[ "$p" = mariadb-server ] || continue
	log "stopping the system mariadb service, if any"
	"${SUDO[@]}" service mariadb stop >/dev/null 2>&1 || true
done

# disable_service NAME - stop the system service NAME and keep it from
# starting at boot, with or without systemd running.
disable_service() {
	log "stopping and disabling the system $1 service, if any"
	"${SUDO[@]}" service "$1" stop >/dev/null 2>&1 || true
	if [ -d /run/systemd/system ]; then
		"${SUDO[@]}" systemctl disable --now "$1" >/dev/null 2>&1 || true
	fi
	"${SUDO[@]}" update-rc.d "$1" disable >/dev/null 2>&1 || true
}

# And memcached's, started on 11211 by the package (invoke-rc.d): the tests
# and apps/memcached start their own.  Stopped and disabled at boot, with or
# without systemd running (a container has none).
for p in "${missing[@]}"; do
	[ "$p" = memcached ] || continue
	disable_service memcached
	pids=$(ss -ltnpH 'sport = :11211' 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u || true)
	for pid in $pids; do
		if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = memcached ]; then
			log "killing system memcached (pid $pid) on port 11211"
			"${SUDO[@]}" kill "$pid" 2>/dev/null || true
		fi
	done
done

# And slapd's, which the package may start on 389 with a system database
# apps/openldap does not use (it starts its own on 7401-7403 and the tests
# on 20801-20803).
for p in "${missing[@]}"; do
	[ "$p" = slapd ] || continue
	disable_service slapd
done

# And clamav's: clamd (which would load a database nobody downloaded) and
# freshclam (which would try the internet every hour).  apps/clamav starts
# its own clamd on 7601-7603 and the tests on 20901-20903.
for p in "${missing[@]}"; do
	[ "$p" = clamav-daemon ] || continue
	disable_service clamav-daemon
	disable_service clamav-freshclam
done

install_criu
log "done"
