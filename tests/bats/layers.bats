#!/usr/bin/env bats
# The boundaries ARCHITECTURE.md draws, checked on the built objects and
# the sources: the folders' includes make no circle (common/ at the bottom,
# checker/ on it alone, the coordinator's layers above, the guard on them
# and the CLI's commands on the guard), the coordinator
# never reaches into the shim, and never calls a libc function the shim
# interposes except through `sys` (common/sys.h), so no call of its own can
# enter one of our wrappers inside a server.

load helpers

OBJ="$APUS_ROOT/build/obj"

# interposed - the function names libapus.so exports (preload/libapus.map).
function interposed() {
	sed -n '/global:/,/local:/p' "$APUS_ROOT/preload/libapus.map" | sed 's/global://; s/local:.*//' |
		tr -s ' \t;' '\n' | grep -E '^[a-z_0-9]+$'
}

# The folders whose includes are checked; each coordinator/NAME/ is a layer
# of its own.
LAYER_DIRS="common checker coordinator preload guard cli"

setup() {
	[ -d "$OBJ/coordinator" ] || fail "no objects in $OBJ (run make)"
}

# includes - "FILE TARGET" for every #include "..." of the layer folders'
# sources that names a file of the repository, both relative to the root:
# the target as the compiler finds it (next to FILE first, then from the
# root, which the Makefile's -I. adds).
function includes() {
	(
		cd "$APUS_ROOT" || exit 1
		local f inc t
		# shellcheck disable=SC2086 # LAYER_DIRS is a list
		find $LAYER_DIRS -name '*.[ch]' | sort | while read -r f; do
			sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/p' "$f" |
				while read -r inc; do
					if [ -e "${f%/*}/$inc" ]; then
						t=${f%/*}/$inc
					elif [ -e "$inc" ]; then
						t=$inc
					else
						continue	# a system header
					fi
					case $t in *./*) t=$(realpath -m --relative-to=. "$t") ;; esac
					echo "$f $t"
				done
		done
	)
}

# layer_edges - "FROM TO" for each pair of folders where a file of FROM
# includes one of TO, once each.  A file's folder is coordinator/NAME for
# the coordinator's layers, else the first component of its path.
function layer_edges() {
	includes | awk '
		function layer(p, a, n) {
			n = split(p, a, "/")
			if (a[1] == "coordinator" && n > 2) return a[1] "/" a[2]
			return n > 1 ? a[1] : "."
		}
		{ f = layer($1); t = layer($2); if (f != t) print f, t }' | sort -u
}

@test "the folders' includes make no circle" {
	local edges
	edges=$(layer_edges)
	# The graph is there: the checker sits on common/, the coordinator's
	# node on its storage and transport, the shim on the node.
	for e in "checker common" "coordinator/node coordinator/storage" \
		"coordinator/node coordinator/transport" "preload coordinator/node" "cli guard"; do
		grep -qxF "$e" <<<"$edges" || fail "BUG: no edge '$e' in: $(tr '\n' ';' <<<"$edges")"
	done
	# tsort names the folders of each circle on stderr.
	run tsort <<<"$edges"
	[ "$status" -eq 0 ] || fail "a circle between folders: $(grep '^tsort: ' <<<"$output" |
		sed 's/^tsort: //' | tr '\n' ' ')(edges: $(tr '\n' ';' <<<"$edges"))"
}

@test "common/ includes nothing outside common/" {
	local f t bad="" n=0
	while read -r f t; do
		case $f in common/*) n=$((n + 1)) ;; *) continue ;; esac
		case $t in common/*) ;; *) bad+="$f: $t; " ;; esac
	done < <(includes)
	[ "$n" -ge 5 ] || fail "BUG: found only $n includes in common/"
	[ -z "$bad" ] || fail "common/ includes another folder's header: $bad"
}

@test "checker/ includes only checker/ and common/" {
	local f t bad=""
	while read -r f t; do
		case $f in checker/*) ;; *) continue ;; esac
		case $t in checker/* | common/*) ;; *) bad+="$f: $t; " ;; esac
	done < <(includes)
	[ -z "$bad" ] || fail "checker/ includes the coordinator's (it goes the other way): $bad"
}

@test "guard/ never includes cli/ (the commands sit on the guard)" {
	local f t bad="" n=0
	while read -r f t; do
		case $f in cli/*) ;; *) continue ;; esac
		case $t in guard/*) n=$((n + 1)) ;; esac
	done < <(includes)
	# The edge the other way is there, so that the check below means something.
	[ "$n" -ge 5 ] || fail "BUG: found only $n includes of guard/ in cli/"
	while read -r f t; do
		case $f in guard/*) ;; *) continue ;; esac
		case $t in cli/*) bad+="$f: $t; " ;; esac
	done < <(includes)
	[ -z "$bad" ] || fail "guard/ includes the CLI's (it goes the other way): $bad"
	# Nor do its objects call what only the commands have (cli.h: cli_*,
	# cmd_*), declared or not (objects of its sources only: a build from
	# before the split still has the commands' objects in obj/guard/).
	local c o u
	for c in "$APUS_ROOT"/guard/*.c; do
		o=$OBJ/guard/$(basename "$c" .c).o
		[ -f "$o" ] || fail "no object $o (run make)"
		u=$(nm -u "$o" | awk '{ print $2 }' | grep -E '^(cli|cmd)_' | tr '\n' ' ')
		[ -z "$u" ] || bad+="${o#"$OBJ"/}: $u; "
	done
	[ -z "$bad" ] || fail "guard/ objects call the CLI's functions: $bad"
}

@test "coordinator/ has no files of its own: each is in a layer's folder" {
	run find "$APUS_ROOT/coordinator" -maxdepth 1 -type f
	[ -z "$output" ] || fail "files directly in coordinator/: $output"
}

@test "common/, checker/ and coordinator/ call what the shim interposes only through sys" {
	local names o bad=""
	names=$(interposed)
	[ "$(wc -w <<<"$names")" -ge 15 ] || fail "BUG: found only '$names' in libapus.map"
	for o in "$OBJ"/common/*.o "$OBJ"/coordinator/*/*.o "$OBJ"/checker/*.o; do
		[ "${o#"$OBJ"/}" = common/sys.o ] && continue
		u=$(nm -u "$o" | awk '{ print $2 }' | grep -xF "$names" | tr '\n' ' ')
		[ -z "$u" ] || bad+="${o#"$OBJ"/}: $u; "
	done
	[ -z "$bad" ] || fail "direct calls of interposed functions (use sys.NAME): $bad"
	# And sys.o itself does take libc's (the table's defaults).
	nm -u "$OBJ/common/sys.o" | grep -qw close || fail "sys.o does not name close"
}

@test "common/, coordinator/ and checker/ never include preload/" {
	run grep -rlE '#include +"(\.\./)*preload/' "$APUS_ROOT/common" "$APUS_ROOT/coordinator" "$APUS_ROOT/checker"
	[ -z "$output" ] || fail "includes of preload/: $output"
}

@test "preload/ sees the node only through node.h (struct node is opaque to it)" {
	run grep -rlE '#include +"(\.\./)*coordinator/([a-z]+/)?(node|replay)_internal\.h"' "$APUS_ROOT/preload"
	[ -z "$output" ] || fail "preload/ includes a coordinator internal header: $output"
	run grep -rnE 'shim_node->' "$APUS_ROOT/preload"
	[ -z "$output" ] || fail "preload/ reads the node's fields: $output"
}

@test "ARCHITECTURE.md names every header of another folder that preload/ includes, and no other" {
	local row used named h
	# Headers of other folders are included by their path from the root.
	used=$(grep -ohE '#include +"(\.\./)?[a-z]+(/[a-z]+)*/[a-z_0-9]+\.h"' "$APUS_ROOT"/preload/*.[ch] |
		sed -E 's/.*"(\.\.\/)?([^"]+)"/\2/' | grep -v '^preload/' | sort -u)
	[ -n "$used" ] || fail "found no include of another folder in preload/"
	# The folder table's preload/ row: its last column says what it uses.
	row=$(grep -m1 '^| `preload/` |' "$APUS_ROOT/ARCHITECTURE.md")
	[ -n "$row" ] || fail "ARCHITECTURE.md has no preload/ row"
	row=${row##*| \`coordinator/\` through}
	for h in $used; do
		grep -qE "\`($h|${h##*/})\`" <<<"$row" || fail "preload/ includes $h; ARCHITECTURE.md does not say so"
	done
	# Headers the row names as used (before its "Never" sentence) are used.
	named=$(sed 's/Never.*//' <<<"$row" | grep -oE '`([a-z]+/)*[a-z_0-9]+\.h`' | tr -d '`' | sort -u)
	for h in $named; do
		[ -e "$APUS_ROOT/preload/$h" ] && continue	# its own (shim.h)
		grep -q "/${h##*/}\$" <<<"$used" || fail "ARCHITECTURE.md says preload/ uses $h; it does not include it"
	done
}

@test "the control page's parts stay apart (coordinator/storage/region.h has the map)" {
	local h may inc
	# Each part is its own header so that a change to one recompiles only
	# its users: none includes another, but for the mailboxes' verify
	# answer, a struct check_result of the status page.
	for h in region region_wire region_status region_mail; do
		[ -e "$APUS_ROOT/coordinator/storage/$h.h" ] || fail "no coordinator/storage/$h.h"
		may=none
		[ "$h" = region_mail ] && may=region_status.h
		inc=$(grep -oE '#include +"([a-z]+/)*region[a-z_]*\.h"' "$APUS_ROOT/coordinator/storage/$h.h" |
			sed -E 's/.*"(.*\/)?(.*)"/\2/' | grep -vx "$may" | tr '\n' ' ')
		[ -z "$inc" ] || fail "coordinator/storage/$h.h includes $inc"
	done
}

@test "preload/ compiles without any header of the control page" {
	local d bad=""
	# The shim asks its node (node.h); the region's words, status page and
	# mailboxes are the coordinator's, the CLI's and the guard's.
	for d in "$OBJ"/preload/*.d; do
		grep -qE 'coordinator/storage/region(_[a-z]+)?\.h' "$d" && bad+="${d#"$OBJ"/} "
	done
	[ -n "$(ls "$OBJ"/preload/*.d 2>/dev/null)" ] || fail "no dependency files in $OBJ/preload"
	[ -z "$bad" ] || fail "preload/ objects that include a region header: $bad"
}
