#!/usr/bin/env bash
# On the GPU machine: how the search's playouts per second share out when several jiriki instances
# share the GPU, as in a match of CONC games at once (strength.sh). For each CONC:THREADS:BATCH
# configuration, CONC `jiriki bench search` processes search at once for SECONDS; prints each
# instance's playouts/s, their sum, the batches' fill and the CPU time they used (cores busy).
#
#   run with carry [".carry/bin", ".carry/include.tar.xz", ".carry/lib"]:
#     bash scripts/device/searchrate.sh NET CONC:THREADS:BATCH...
# Environment: SECONDS_EACH (6), SFEN (the start position).
set -uo pipefail
source scripts/device/env.sh
NET=$(realpath "$1"); shift
S=${SECONDS_EACH:-6}
start "${LOG:-searchrate.log}"
step "machine"; machine
step "build"; build jiriki
J=$PWD/build-device/jiriki
for batch in $(printf '%s\n' "$@" | cut -d: -f3 | sort -un); do
  step "warm-up at batch $batch (cuDNN's choices for this shape, kept on disk)"
  "$J" bench search --model "$NET" --backend cuda --threads 1 --batch "$batch" --seconds 1 ${SFEN:+--sfen "$SFEN"} \
    2>&1 | grep -E "playouts"
done
for config in "$@"; do
  IFS=: read -r conc threads batch <<< "$config"
  step "$conc at once, $threads threads, batch $batch, $S s"
  dir=$(mktemp -d)
  TIMEFORMAT="wall %R s, CPU %U s user + %S s system"
  { time (
    for i in $(seq "$conc"); do
      "$J" bench search --model "$NET" --backend cuda --threads "$threads" --batch "$batch" --seconds "$S" \
        ${SFEN:+--sfen "$SFEN"} > "$dir/$i.txt" 2>&1 &
    done
    wait
  ) ; } 2> "$dir/time"
  grep -h "^playouts" "$dir"/[0-9]*.txt | awk -v conc="$conc" '{sum += $(NF-1); printf "  %s nodes/s\n", $(NF-1)}
    END {printf "sum %d nodes/s, %d per instance\n", sum, sum / conc}'
  grep -h "average batch" "$dir"/[0-9]*.txt | awk '{gsub(/[()%]/, "", $NF); f += $NF; n++} END {printf "batch fill %.1f%%\n", f / n}'
  cat "$dir/time"
  rm -rf "$dir"
done
