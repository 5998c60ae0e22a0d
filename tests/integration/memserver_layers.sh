#!/usr/bin/env bash
# The memory server's layers stay one-way (src/memserver/ms_int.h draws them):
#   conn (1) < handlers (2) < outcomes (3) < durable (4) < termination, replica (5)
#   < memserver.c (6)
# ms_int.h (shared structs and the hook table), memserver.h (the public
# options) and identity.c (the data directory's IDENTITY, a leaf) are at the
# bottom.  Fails when
#   - a file of src/memserver/ is not in the layer map below;
#   - a file includes a memserver header of its own layer or one above
#     (other than its own header);
#   - ms_int.h declares a function (each belongs in its layer's header);
#   - an object file of a layer references a symbol that a memserver object
#     of the same layer or a higher one defines (an upward call, also one
#     made without the header).  Needs the build; skipped without it.
# An upper layer is reached from below only through srv->hooks.
# LOTUS_MS_SRC / LOTUS_MS_OBJ: check another copy of the sources / objects.
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
src=${LOTUS_MS_SRC:-src/memserver}
obj=${LOTUS_MS_OBJ:-${LOTUS_BUILD:-build}/src/memserver}

declare -A rank=(
	[ms_int.h]=0 [memserver.h]=0 [identity.h]=0 [identity.c]=0
	[conn.h]=1 [conn.c]=1 [misses.h]=1 [misses.c]=1
	[handlers.h]=2 [handlers.c]=2
	[outcomes.h]=3 [outcomes.c]=3
	[durable.h]=4 [durable.c]=4 [backup.h]=4 [backup.c]=4
	[termination.h]=5 [termination.c]=5 [replica.h]=5 [replica.c]=5
	[memserver.c]=6
)
bad=0
problem() { echo "FAIL: $*"; bad=1; }   # every problem is listed, then it fails

for f in "$src"/*.c "$src"/*.h; do
	n=$(basename "$f")
	r=${rank[$n]:-}
	if [ -z "$r" ]; then
		problem "$n is in no layer: add it to the map in $0 and to ms_int.h"
		continue
	fi
	while IFS=: read -r line inc; do
		[ "$inc" = "${n%.*}.h" ] && continue   # its own header
		ir=${rank[$inc]:-}
		if [ -z "$ir" ]; then
			problem "$n:$line includes memserver/$inc, which is in no layer"
		elif [ "$ir" -ge "$r" ]; then
			problem "$n:$line (layer $r) includes memserver/$inc (layer $ir): an upward include"
		fi
	done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"memserver/' "$f" |
		 sed 's|^\([0-9]*\):.*"memserver/\([^"]*\)".*|\1:\2|')
done

# ms_int.h: structs, the hook table and static inlines only.
while IFS= read -r l; do
	problem "ms_int.h declares a function (move it to its layer's header): $l"
done < <(grep -E '^[A-Za-z_][A-Za-z0-9_ *]*[ *]ms_[a-z0-9_]+\(' "$src/ms_int.h" | grep -v '^static' || true)

# The objects: every reference to another memserver object goes down.
if ls "$obj"/*.o >/dev/null 2>&1 && command -v nm >/dev/null; then
	declare -A owner=()
	for o in "$obj"/*.o; do
		c=$(basename "$o" .o).c
		[ -n "${rank[$c]:-}" ] || { problem "$c (object $o) is in no layer"; continue; }
		for s in $(nm --defined-only -g "$o" | awk '$2 ~ /^[TDBR]$/ {print $3}'); do
			owner[$s]=$c
		done
	done
	for o in "$obj"/*.o; do
		c=$(basename "$o" .o).c
		r=${rank[$c]:-}
		[ -n "$r" ] || continue
		for s in $(nm -u "$o" | awk '{print $2}'); do
			d=${owner[$s]:-}
			[ -n "$d" ] && [ "$d" != "$c" ] || continue
			[ "${rank[$d]}" -lt "$r" ] ||
				problem "$c (layer $r) calls $s of $d (layer ${rank[$d]}): an upward call"
		done
	done
else
	echo "note: no objects in $obj; the symbol check did not run"
fi
[ $bad -eq 0 ] && echo "memserver layers: one-way"
exit $bad
