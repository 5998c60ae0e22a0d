#!/usr/bin/env bash
# timeout: 90
# Checkpoints keep coming when the log outruns them.  A durable memory server
# with a tiny --checkpoint-log (4K) runs `lotus bank` in short rounds: the log
# grows by more than the trigger during most checkpoints, so the trigger the
# page writer arms next is durable already and fires at once.  (On d0f6129 the
# page writer then re-armed it forever, spinning, and took no checkpoint
# again.)  After every round the MANIFEST's checkpoint number must have moved.
. "$(dirname "$0")/lib.sh"
root=$ROOT
. "$root/scripts/lib-cluster.sh"
top=$T
at_exit 'cluster_stop'
CLUSTER_DATA=$top/data CLUSTER_DURABILITY=sync
cluster_start "$top" 1 --threads 1 --memory 64M --checkpoint-log 4K \
  || fail "the server did not start"
m=$top/data/ms0/MANIFEST
seq_of() { sed -n 's/^seq //p' "$m" 2>/dev/null || true; }
last=0
for r in 1 2 3 4 5 6; do
  "$L" bank --config "$CLUSTER_INI" --accounts 50 --seconds 1 --threads 2 --inflight 2 \
      --ledger "$top/bank.ledger" --quiet >/dev/null 2>"$top/bank.err" \
    || fail "bank failed: $(tail -n 3 "$top/bank.err")"
  s=
  for i in $(seq 100); do   # a checkpoint may still be running: up to 10 s
    s=$(seq_of)
    [ -n "$s" ] && [ "$s" -gt "$last" ] && break
    sleep 0.1
  done
  [ -n "$s" ] && [ "$s" -gt "$last" ] \
    || fail "round $r: no checkpoint since checkpoint ${last} (MANIFEST seq ${s:-none})"
  echo "round $r: checkpoint $s"
  last=$s
done
echo ok
