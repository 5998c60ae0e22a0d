# tests/integration/lib.sh - the one kit of lotus's integration scripts.
# Every script sources it first:
#     . "$(dirname "$0")/lib.sh"
# and gets:
#   fail MSG...     print "FAIL: MSG" and exit 1
#   skip MSG...     print "SKIP: MSG" and exit 77
#   need CMD...     skip unless every CMD is on PATH
#   at_exit 'CMD'   run CMD when the script exits, however it exits; the last
#                   one registered runs first, and the scratch dir goes last
#   L               the lotus binary under test ($LOTUS_BIN, set by tests/run)
#   ROOT            the source tree
#   PY              Debian's python3 (its redis module), not a python3 on PATH
#   T               a fresh scratch directory, removed at exit (LOTUS_KEEP=1
#                   keeps it and says where)
# and, on demand, the kits of scripts/ (cluster_start, serve_start, zk_start,
# tier_need, bed_up):
#   lib_use cluster|serve|tier|netns|zk
# Exit codes are tests/run's: 0 pass, 1 fail, 77 skip.  A script must not set
# its own EXIT trap (it would drop the others): it registers with at_exit.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
L=${LOTUS_BIN:?LOTUS_BIN is not set: run the tests through tests/run}
PY=/usr/bin/python3

fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
need() {
  local c
  for c in "$@"; do command -v "$c" >/dev/null 2>&1 || skip "$c is not installed"; done
}

LIB_AT_EXIT=()
at_exit() { LIB_AT_EXIT=("$1" ${LIB_AT_EXIT[@]+"${LIB_AT_EXIT[@]}"}); }
lib_exit() {
  local rc=$? c
  for c in ${LIB_AT_EXIT[@]+"${LIB_AT_EXIT[@]}"}; do eval "$c"; done
  if [ -n "${LOTUS_KEEP:-}" ]; then
    echo "scratch kept in $T" >&2
  else
    rm -rf "$T"
  fi
  return $rc
}
T=$(mktemp -d "${TMPDIR:-/tmp}/lotus-it.XXXXXX") || { echo "FAIL: mktemp"; exit 1; }
trap lib_exit EXIT
trap 'exit 143' TERM INT   # a timeout's SIGTERM still runs the clean-up

lib_use() {
  local k
  for k in "$@"; do
    case $k in
      cluster|serve|tier|netns|zk) . "$ROOT/scripts/lib-$k.sh" ;;
      *) fail "lib_use: no kit '$k'" ;;
    esac
  done
}
