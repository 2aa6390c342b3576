#!/usr/bin/env bash
# Give every node of a gerbera cluster config the same config.xml and the
# same initial database.
#
#   init.sh --config C [--force] [--media DIR] [--autoscan]
#
# Makes a small media folder DIR (default /tmp/apus-gerbera/media: three
# MP3s with ID3v1 tags, two 1x1 JPEGs, a text file) unless it exists,
# writes <data_dir>/config.xml for every [node N] of C (config.xml.in, the
# node's data_dir as gerbera's home), scans DIR ONCE with a bare gerbera
# (no apus; node 0's address, its app port + 1000) into a database, and
# copies that gerbera.db to every node as gerbera.db and
# gerbera.db.template (reset.sh, app_reset_cmd, puts it back in every
# fresh start).  The object IDs of a scan follow readdir() order, which
# is a property of the file system: made once and copied, they are the
# same on every replica.
#
# --autoscan adds DIR to every config as an inotify autoscan directory:
# each replica's own inotify thread then adds what appears in DIR, with
# no client request (README.md, "The scan threads").
#
# Refuses (exit 1) when a node's gerbera.db exists, unless --force, which
# wipes each node's data_dir first (its apus files too).
set -euo pipefail

usage() { sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
config="" force=0 autoscan=0 media=/tmp/apus-gerbera/media
while [ $# -gt 0 ]; do
	case $1 in
	--config) config=$2; shift 2 ;;
	--force) force=1; shift ;;
	--media) media=$2; shift 2 ;;
	--autoscan) autoscan=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "init.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
[ -n "$config" ] && [ -f "$config" ] || { echo "init.sh: --config FILE is required" >&2; exit 2; }
command -v gerbera >/dev/null 2>&1 || { echo "init.sh: gerbera not found (apt-get install gerbera)" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/node-dirs.sh
. "$here/../../scripts/node-dirs.sh"
mapfile -t dirs < <(node_dirs "$config" | cut -d' ' -f2-)
[ "${#dirs[@]}" -gt 0 ] || { echo "init.sh: no [node N] with a data_dir in $config" >&2; exit 1; }
for d in "${dirs[@]}"; do
	if [ -e "$d/gerbera.db" ] && [ "$force" -eq 0 ]; then
		echo "init.sh: $d/gerbera.db exists (--force wipes every node's data_dir)" >&2
		exit 1
	fi
done

# Node 0's address and port, for the one bare scan.
addr=$(awk '/^\[node 0\]/{s=1;next} /^\[/{s=0} s&&/^[[:space:]]*address[[:space:]]*=/{sub(/.*=[[:space:]]*/,"");print;exit}' "$config")
port=$(awk '/^\[node 0\]/{s=1;next} /^\[/{s=0} s&&/^[[:space:]]*app_port[[:space:]]*=/{sub(/.*=[[:space:]]*/,"");print;exit}' "$config")
[ -n "$addr" ] && [ -n "$port" ] || { echo "init.sh: [node 0] needs address and app_port" >&2; exit 1; }

if [ ! -d "$media" ]; then
	mkdir -p "$media/music" "$media/pics"
	python3 - "$media" <<'PY'
import sys
m = sys.argv[1]
frame = bytes([0xFF, 0xFB, 0x90, 0x64]) + b'\0' * 413  # MPEG-1 layer III, 128 kb/s
for i in range(3):
    tag = (b'TAG' + (b'Song %d' % i).ljust(30, b'\0') + b'Apus'.ljust(30, b'\0')
           + b'Album'.ljust(30, b'\0') + b'2024' + b'\0' * 30 + bytes([0]))
    open('%s/music/track%d.mp3' % (m, i), 'wb').write(frame * 20 + tag)
jpg = bytes.fromhex(
    'ffd8ffe000104a46494600010100000100010000ffdb004300080606070605080707070909080a0c14'
    '0d0c0b0b0c1912130f141d1a1f1e1d1a1c1c20242e2720222c231c1c2837292c30313434341f27393d'
    '38323c2e333432ffc0000b080001000101011100ffc4001f00000105010101010101000000000000'
    '00000102030405060708090a0bffc400b5100002010303020403050504040000017d010203000411'
    '05122131410613516107227114328191a1082342b1c11552d1f02433627282090a161718191a2526'
    '2728292a3435363738393a434445464748494a535455565758595a636465666768696a7374757677'
    '78797a838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3'
    'c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9faffda0008'
    '010100003f00fbd3ffd9')
for i in range(2):
    open('%s/pics/pic%d.jpg' % (m, i), 'wb').write(jpg)
open('%s/readme.txt' % m, 'w').write('hello\n')
PY
fi

# config_xml HOME - config.xml.in for a gerbera whose home is HOME.
config_xml() {
	if [ "$autoscan" -eq 1 ]; then
		sed -e "s#@HOME@#$1#" -e "s#^  <import hidden-files=\"no\">#&\\n    <autoscan use-inotify=\"yes\"><directory location=\"$media\" mode=\"inotify\" recursive=\"yes\" hidden-files=\"no\"/></autoscan>#" "$here/config.xml.in"
	else
		sed "s#@HOME@#$1#" "$here/config.xml.in"
	fi
}
for d in "${dirs[@]}"; do
	if [ "$force" -eq 1 ]; then rm -rf "$d"; fi
	mkdir -p "$d"
	config_xml "$d" >"$d/config.xml"
done

# One scan, by a bare gerbera in a scratch home.
scratch=$(mktemp -d /tmp/gerbera-init.XXXXXX)
pid=""
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null; rm -rf "$scratch"' EXIT
config_xml "$scratch" >"$scratch/config.xml"
gerbera --config "$scratch/config.xml" --ip "$addr" --port $((port + 1000)) --add "$media" >"$scratch/gerbera.log" 2>&1 &
pid=$!
want=$(find "$media" -type f | wc -l)
# gerbera holds its database locked while it runs: the scan is given
# SCAN_S seconds (6 files take well under one), then counted.
sleep "${SCAN_S:-3}"
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
n=$(python3 -c 'import sqlite3,sys
c=sqlite3.connect("file:%s?mode=ro"%sys.argv[1],uri=True)
print(c.execute("select count(*) from mt_cds_object where location like ?",("F%",)).fetchone()[0])' "$scratch/gerbera.db")
[ "$n" -ge "$want" ] || { echo "init.sh: the scan found $n of $want files:" >&2; tail -n 20 "$scratch/gerbera.log" >&2; exit 1; }
rm -f "$scratch/gerbera.db-journal"
for d in "${dirs[@]}"; do
	cp "$scratch/gerbera.db" "$d/gerbera.db.template"
	cp "$scratch/gerbera.db" "$d/gerbera.db"
done
echo "init.sh: $n files of $media in the database of ${#dirs[@]} nodes"
