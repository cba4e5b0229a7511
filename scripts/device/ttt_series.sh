#!/usr/bin/env bash
# On a GPU machine: time-to-target runs of docs/batch-size.md one after another in one call
# (scripts/device/ttt.sh each, data parallel on every GPU unless GPUS says otherwise), on the records
# in /tmp/tt. A machine without them makes them first with scripts/device/ttdata.sh (DATA_SECONDS,
# default 300, at PLAYOUTS=48 CAP=0 HELDOUT_GAMES=200, not packed: 5.0M positions on 2 H200s), and a
# warm machine keeps them for the next call, so that every run of a series trains on the same set.
# Every run's logs come back together in $OUT/ttt_TAG.tar.gz (a call returns at most 8 files).
#
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/cudnn-choices.txt"]:
#     TAG=x2_host_a bash scripts/device/ttt_series.sh MODE SECONDS NAME:BATCH...
# e.g. `TAG=x2_host_a bash scripts/device/ttt_series.sh host 110 b32_host:32 b128_host:128 b512_host:512
# b1024_host:1024`, then on the same machine `TAG=x2_host_b ... host 110 auto_host_1:auto auto_host_2:auto
# b512_host_r2:512` (names as scripts/batch_size_report.py reads them: b<batch>_<mode>[_r<k>],
# auto_<mode>[_<k>]). HALVES=1: auto runs on several GPUs also log the batch halves' noise scale
# beside the replicas' (--noise-halves: one more full-batch pass every 50 steps, about 2% of a step,
# so off by default: the series times --batch auto as users run it).
set -uo pipefail
source scripts/device/env.sh
MODE=$1 SECS=$2
shift 2
TAG=${TAG:-series}
N=$(echo "${GPUS:-$(seq -s, 0 $(($(gpu_count) - 1)))}" | tr ',' '\n' | wc -l)

if [[ ! -d /tmp/tt/train ]]; then
  PLAYOUTS=${PLAYOUTS:-48} CAP=${CAP:-0} HELDOUT_GAMES=${HELDOUT_GAMES:-200} PACK=0 \
    bash scripts/device/ttdata.sh "${DATA_SECONDS:-300}" 2>&1 | grep -E "^(train|heldout):|failed"
fi
for run in "$@"; do
  name=${run%%:*} batch=${run#*:}
  halves=""
  [[ $batch == auto && $N -gt 1 && ${HALVES:-0} == 1 ]] && halves=1
  NOISE_HALVES=$halves bash scripts/device/ttt.sh "$name" "$batch" "$MODE" "$SECS" 2>&1 | grep -E "^=== train|^test" | tail -2
  # The replicas the run trained with, from its own log: a series on the wrong GPUs is caught here.
  grep -m1 -oE "steps of [0-9]+ positions( \([0-9]+ replicas x [0-9]+\))?" "$OUT/ttt_$name.log"
done
sleep 2  # the last run's log is written by its tee
(cd "$OUT" && tar czf "ttt_$TAG.tar.gz" ttt_*.jsonl ttt_*.log ttdata.log 2>/dev/null; rm -f ttt_*.jsonl ttt_*.log ttdata.log build.log)
ls "$OUT"
