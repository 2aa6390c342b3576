#!/usr/bin/env bats
# The boundaries ARCHITECTURE.md draws, checked on the built objects: the
# coordinator never reaches into the shim, and never calls a libc function
# the shim interposes except through `sys` (coordinator/sys.h), so no call
# of its own can enter one of our wrappers inside a server.

load helpers

OBJ="$APUS_ROOT/build/obj"

# interposed - the function names libapus.so exports (preload/libapus.map).
function interposed() {
	sed -n '/global:/,/local:/p' "$APUS_ROOT/preload/libapus.map" | sed 's/global://; s/local:.*//' |
		tr -s ' \t;' '\n' | grep -E '^[a-z_0-9]+$'
}

setup() {
	[ -d "$OBJ/coordinator" ] || fail "no objects in $OBJ (run make)"
}

@test "coordinator/ and checker/ call what the shim interposes only through sys" {
	local names o bad=""
	names=$(interposed)
	[ "$(wc -w <<<"$names")" -ge 15 ] || fail "BUG: found only '$names' in libapus.map"
	for o in "$OBJ"/coordinator/*.o "$OBJ"/checker/*.o; do
		[ "${o##*/}" = sys.o ] && continue
		u=$(nm -u "$o" | awk '{ print $2 }' | grep -xF "$names" | tr '\n' ' ')
		[ -z "$u" ] || bad+="${o#"$OBJ"/}: $u; "
	done
	[ -z "$bad" ] || fail "direct calls of interposed functions (use sys.NAME): $bad"
	# And sys.o itself does take libc's (the table's defaults).
	nm -u "$OBJ/coordinator/sys.o" | grep -qw close || fail "sys.o does not name close"
}

@test "coordinator/ and checker/ never include preload/" {
	run grep -rlE '#include +"(\.\./)?preload/' "$APUS_ROOT/coordinator" "$APUS_ROOT/checker"
	[ -z "$output" ] || fail "includes of preload/: $output"
}

@test "preload/ sees the node only through node.h (struct node is opaque to it)" {
	run grep -rlE '#include +"(\.\./)?coordinator/(node|replay)_internal\.h"' "$APUS_ROOT/preload"
	[ -z "$output" ] || fail "preload/ includes a coordinator internal header: $output"
	run grep -rnE 'shim_node->' "$APUS_ROOT/preload"
	[ -z "$output" ] || fail "preload/ reads the node's fields: $output"
}

@test "ARCHITECTURE.md names every header of another folder that preload/ includes, and no other" {
	local row used named h
	used=$(grep -ohE '#include +"\.\./[a-z]+/[a-z_]+\.h"' "$APUS_ROOT"/preload/*.[ch] |
		sed -E 's/.*"\.\.\/([^"]+)"/\1/' | sort -u)
	[ -n "$used" ] || fail "found no include of another folder in preload/"
	# The folder table's preload/ row: its last column says what it uses.
	row=$(grep -m1 '^| `preload/` |' "$APUS_ROOT/ARCHITECTURE.md")
	[ -n "$row" ] || fail "ARCHITECTURE.md has no preload/ row"
	row=${row##*| \`coordinator/\` through}
	for h in $used; do
		grep -qE "\`($h|${h##*/})\`" <<<"$row" || fail "preload/ includes $h; ARCHITECTURE.md does not say so"
	done
	# Headers the row names as used (before its "Never" sentence) are used.
	named=$(sed 's/Never.*//' <<<"$row" | grep -oE '`([a-z]+/)?[a-z_]+\.h`' | tr -d '`' | sort -u)
	for h in $named; do
		[ -e "$APUS_ROOT/preload/$h" ] && continue	# its own (shim.h)
		grep -q "/${h##*/}\$" <<<"$used" || fail "ARCHITECTURE.md says preload/ uses $h; it does not include it"
	done
}

@test "the control page's parts stay apart (coordinator/region.h has the map)" {
	local h may inc
	# Each part is its own header so that a change to one recompiles only
	# its users: none includes another, but for the mailboxes' verify
	# answer, a struct check_result of the status page.
	for h in region region_wire region_status region_mail; do
		[ -e "$APUS_ROOT/coordinator/$h.h" ] || fail "no coordinator/$h.h"
		may=none
		[ "$h" = region_mail ] && may=region_status.h
		inc=$(grep -oE '#include +"region[a-z_]*\.h"' "$APUS_ROOT/coordinator/$h.h" |
			sed -E 's/.*"(.*)"/\1/' | grep -vx "$may" | tr '\n' ' ')
		[ -z "$inc" ] || fail "coordinator/$h.h includes $inc"
	done
}

@test "preload/ compiles without any header of the control page" {
	local d bad=""
	# The shim asks its node (node.h); the region's words, status page and
	# mailboxes are the coordinator's, the CLI's and the guard's.
	for d in "$OBJ"/preload/*.d; do
		grep -qE 'coordinator/region(_[a-z]+)?\.h' "$d" && bad+="${d#"$OBJ"/} "
	done
	[ -n "$(ls "$OBJ"/preload/*.d 2>/dev/null)" ] || fail "no dependency files in $OBJ/preload"
	[ -z "$bad" ] || fail "preload/ objects that include a region header: $bad"
}
