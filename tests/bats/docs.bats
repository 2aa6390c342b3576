#!/usr/bin/env bats
# The documentation's shape, checked on the files alone (no cluster, no
# build): the README stays a front door, every relative link resolves to a
# file of the repository (and names a heading there when it has an
# anchor), no link leaves the repository, and the configuration reference
# lists every key the parser accepts.

load helpers

# No cluster: none of helpers.bash's per-test requirements, nothing to stop.
setup() { :; }
teardown_file() { :; }

# doc_files - the Markdown files whose links are checked, relative to the
# repository's root.
function doc_files() {
	(
		cd "$APUS_ROOT" || exit 1
		ls README.md ARCHITECTURE.md BENCHMARKS.md doc/*.md apps/*/README.md
	)
}

# link_targets FILE - the target of every inline link `[text](target)` of
# FILE outside fenced code blocks, one a line, without a "title".
function link_targets() {
	awk '/^[[:space:]]*```/ { code = !code; next } !code' "$1" |
		grep -oE '\]\([^)[:space:]]+' | sed 's/^](//'
}

# relative_targets FILE - link_targets less web and mail links and pure
# #anchors: the ones that must name a file of the repository.
function relative_targets() {
	link_targets "$1" | grep -vE '^(https?:|mailto:|#)' || true
}

# heading_slugs FILE - the anchors GitHub gives FILE's headings (outside
# fenced code): lower case, punctuation dropped, spaces as hyphens, and a
# -N suffix for the Nth repeat of a heading.
function heading_slugs() {
	awk '/^[[:space:]]*```/ { code = !code; next } !code && /^#{1,6} /' "$1" |
		sed -E 's/^#+ +//; s/ +#+ *$//' | tr '[:upper:]' '[:lower:]' |
		LC_ALL=C sed -E 's/[^a-z0-9 _-]//g; s/ /-/g' |
		awk '{ n = seen[$0]++; print (n ? $0 "-" n : $0) }'
}

@test "README.md has at most 250 lines" {
	local n
	n=$(wc -l <"$APUS_ROOT/README.md")
	[ "$n" -gt 20 ] || fail "README.md has only $n lines"
	[ "$n" -le 250 ] || fail "README.md has $n lines (at most 250: the rest belongs in doc/)"
}

@test "every relative link in the docs points to an existing file" {
	local f t path bad="" count=0
	for f in $(doc_files); do
		for t in $(relative_targets "$APUS_ROOT/$f"); do
			count=$((count + 1))
			path=${t%%#*}
			[ -e "$APUS_ROOT/$(dirname "$f")/$path" ] || bad+="$f: ($t); "
		done
	done
	[ "$count" -ge 10 ] || fail "BUG: found only $count relative links in $(doc_files | tr '\n' ' ')"
	[ -z "$bad" ] || fail "links to files that do not exist: $bad"
}

@test "no link in the docs leaves the repository" {
	local f t path real bad=""
	for f in $(doc_files); do
		for t in $(link_targets "$APUS_ROOT/$f"); do
			case $t in https:* | http:* | mailto:* | '#'*) continue ;; esac
			path=${t%%#*}
			case $path in
			/* | file:*) bad+="$f: ($t) is an absolute path; " && continue ;;
			esac
			real=$(realpath -m "$APUS_ROOT/$(dirname "$f")/$path")
			case $real in
			"$APUS_ROOT" | "$APUS_ROOT"/*) ;;
			*) bad+="$f: ($t) resolves to $real; " ;;
			esac
		done
		# A path in backquotes that climbs out of the repository is a
		# pointer out of it too (`../x` from a file of doc/ stays inside).
		# shellcheck disable=SC2016 # the backquotes are grep's pattern.
		for t in $(grep -oE '`\.\./[^` ]+`' "$APUS_ROOT/$f" | tr -d '`'); do
			real=$(realpath -m "$APUS_ROOT/$(dirname "$f")/$t")
			case $real in
			"$APUS_ROOT" | "$APUS_ROOT"/*) ;;
			*) bad+="$f: \`$t\` resolves to $real; " ;;
			esac
		done
	done
	[ -z "$bad" ] || fail "links out of the repository: $bad"
}

@test "every anchor of a link to a Markdown file names a heading there" {
	local f t path file anchor bad="" count=0
	for f in $(doc_files); do
		for t in $(link_targets "$APUS_ROOT/$f"); do
			case $t in https:* | http:* | mailto:*) continue ;; *'#'*) ;; *) continue ;; esac
			path=${t%%#*} anchor=${t#*#}
			if [ -z "$path" ]; then
				file="$APUS_ROOT/$f"
			else
				file="$APUS_ROOT/$(dirname "$f")/$path"
			fi
			case $file in *.md) ;; *) continue ;; esac
			[ -f "$file" ] || continue # the test above names it
			count=$((count + 1))
			heading_slugs "$file" | grep -qxF -- "$anchor" || bad+="$f: ($t); "
		done
	done
	[ "$count" -ge 10 ] || fail "BUG: found only $count links with anchors"
	[ -z "$bad" ] || fail "anchors that name no heading: $bad"
}

@test "doc/configuration.md documents every key common/config.c accepts" {
	local keys k missing=""
	# set_global() and set_node() compare the key with each name they know:
	# if (!strcmp(k, "cluster")) ...
	keys=$(grep -oE 'strcmp\(k, "[a-z_]+"\)' "$APUS_ROOT/common/config.c" |
		sed -E 's/.*"([a-z_]+)".*/\1/' | sort -u)
	[ "$(wc -w <<<"$keys")" -ge 30 ] ||
		fail "BUG: found only '$keys' in common/config.c (has the way keys are matched changed?)"
	for k in $keys; do
		# A row of the key table: | `key` | default | meaning |
		grep -qE "^\| \`$k\` \|" "$APUS_ROOT/doc/configuration.md" || missing+="$k "
	done
	[ -z "$missing" ] || fail "keys the parser accepts but doc/configuration.md's table lacks: $missing"
}
