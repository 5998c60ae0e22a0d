#!/usr/bin/env bash
# timeout: 120
# The corruption matrix, CI size: a durable 2-server bank; each of server 1's
# files (the log segment, both page images, both CRC files, the manifest) is
# once flipped at one byte and once zeroed in one 4 KiB block, at an offset
# drawn from a fixed seed; restart and `lotus bank --verify`.  Every case must
# pass with every acknowledged transfer present, or be refused with a message
# naming the damage - never start with data missing.  The long run is
# scripts/corruption-soak --cases N.
. "$(dirname "$0")/lib.sh"
"$ROOT/scripts/corruption-soak" --fixed --seed "${LOTUS_TEST_SEED:-1}"
