#!/usr/bin/env bash
# Removes the memory files (region_dir, /dev/shm by default) behind the
# <data_dir>/apus.region links found under DIR: a stopped node keeps its
# region there for its restart, so a script that throws its clusters away
# must drop them too, or each run leaves log_size bytes of memory behind.
#
#   scripts/drop-regions.sh DIR
set -uo pipefail
case ${1:-} in
-h | --help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
[ $# -eq 1 ] || { echo "usage: scripts/drop-regions.sh DIR" >&2; exit 2; }
[ -d "$1" ] || exit 0
find "$1" -name apus.region -type l -exec sh -c 'rm -f "$(readlink "$1")"' _ {} \;
