#!/usr/bin/env bash
# On the GPU machine: builds jiriki with CUDA and runs `jiriki bench search` with a 10-block,
# 192-channel network (random weights: speed does not depend on them) at a few thread and batch
# settings, plus `jiriki bench nn` at the same batch sizes for the network's own throughput.
#
#   run with carry [".carry"]:  [TESTS=1] bash scripts/device/search.sh ["THREADS:BATCH ..."] [SECONDS]
# TESTS=1 first runs the CUDA backend's tests ("[nn][cuda]").
set -uo pipefail
source scripts/device/env.sh
CONFIGS=${1:-"4:128 8:128 8:256"}
SECONDS_EACH=${2:-8}
start search_device.log
machine
if [[ "${TESTS:-0}" == 1 ]]; then
  build jiriki jiriki_tests
  build-device/jiriki_tests "[nn][cuda]" 2>&1 | tail -5
else
  build jiriki
fi
build-device/jiriki nn init --blocks 10 --channels 192 --seed 1 -o /tmp/net10x192.jnn
batches=$(for c in $CONFIGS; do echo "${c#*:}"; done | sort -un | paste -sd,)
echo "\$ jiriki bench nn --model /tmp/net10x192.jnn --backend cuda --batch $batches --seconds 2"
build-device/jiriki bench nn --model /tmp/net10x192.jnn --backend cuda --batch "$batches" --seconds 2
for c in $CONFIGS; do
  t=${c%:*} b=${c#*:}
  echo
  echo "\$ jiriki bench search --model /tmp/net10x192.jnn --backend cuda --threads $t --batch $b --seconds $SECONDS_EACH"
  build-device/jiriki bench search --model /tmp/net10x192.jnn --backend cuda --threads "$t" --batch "$b" --seconds "$SECONDS_EACH"
done
