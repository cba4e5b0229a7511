#!/usr/bin/env bash
# On the GPU machine: trains a larger network for GPUs (BLOCKS x CHANNELS, fresh) on the self-play
# records carried in .carry/records.tar.xz (the loop's generations, one folder each; the newest
# file of the newest folder is held out), then matches it against the network it should replace
# (SMALL, e.g. the loop's best 6x64) on the GPU at equal time: both through `jiriki match`,
# byoyomi BYOYOMI ms, CONC games at once sharing the GPU, THREADS search threads each, openings from
# gpsshogi's book. The new network comes back as $OUT/gpu.jnn, the training log and the match's
# summary with it.
#
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/bin", ".carry/debs",
#                   ".carry/records.tar.xz", DIR_OF_SMALL]:
#     bash scripts/device/gpunet.sh SMALL [GAMES]
# Environment: BLOCKS (10), CHANNELS (128), EPOCHS (4), BATCH (512), LR (0.1), CONC (8), THREADS (1),
# BYOYOMI (300), SEED (1).
set -uo pipefail
source scripts/device/env.sh
SMALL=$1 GAMES=${2:-40}
BLOCKS=${BLOCKS:-10} CHANNELS=${CHANNELS:-128} EPOCHS=${EPOCHS:-4} BATCH=${BATCH:-512} LR=${LR:-0.1}
CONC=${CONC:-8} THREADS=${THREADS:-1} BYOYOMI=${BYOYOMI:-300} SEED=${SEED:-1}
[[ -f $SMALL ]] || { echo "no network $SMALL"; exit 1; }
SMALL=$(realpath "$SMALL")
start gpunet.log
step "machine"; machine
step "build"; build jiriki
J=$PWD/build-device/jiriki

step "records"
rm -rf /tmp/records /tmp/heldout && mkdir -p /tmp/records /tmp/heldout
tar xJf .carry/records.tar.xz -C /tmp/records || exit 1
HELD=$(ls /tmp/records/*/*.hcpe3 | sort | tail -1)
mv "$HELD" /tmp/heldout/
"$J" records summary /tmp/records 2>&1 | tail -3
echo "held out: $(basename "$HELD")"

step "train ${BLOCKS}x${CHANNELS}: $EPOCHS epochs, batch $BATCH, lr $LR"
time "$J" train --data /tmp/records --test /tmp/heldout --blocks "$BLOCKS" --channels "$CHANNELS" --epochs "$EPOCHS" \
  --batch "$BATCH" --lr "$LR" --warmup-steps 200 --seed "$SEED" --log-every 500 --model-out /tmp/gpu.jnn 2>&1 | grep -v "^step .*data wait" | tail -25
[[ -f /tmp/gpu.jnn ]] || { echo "training wrote no network"; exit 1; }
cp /tmp/gpu.jnn "$OUT/gpu.jnn"
cp /tmp/gpu.jnn.log.jsonl "$OUT/gpu_train.log.jsonl" 2>/dev/null

step "the small network on the held-out file (the same metrics, no training)"
"$J" train --data /tmp/heldout --test /tmp/heldout --init "$SMALL" --steps 1 --lr 1e-30 --bn-momentum 0 --model-out /tmp/small_eval.jnn 2>&1 | grep -iE "test|held" | tail -3

# Each network through isready once: cuDNN's choices for its shapes are kept on disk for the games.
for net in /tmp/gpu.jnn "$SMALL"; do
  step "warm-up: $(basename "$net") through isready"
  printf 'usi\nsetoption name ModelFile value %s\nsetoption name Backend value cuda\nsetoption name Threads value %s\nisready\nquit\n' \
    "$net" "$THREADS" | "$J" | grep -E "readyok|info string" | tail -2
done
source scripts/device/engines.sh
unpack_engines "$J" > /dev/null

step "gpu.jnn against $(basename "$SMALL"): $GAMES games, $CONC at once, byoyomi $BYOYOMI ms, $THREADS threads each"
"$J" match --engine "cmd=$J name=big option.ModelFile=/tmp/gpu.jnn option.Backend=cuda option.Threads=$THREADS" \
  --engine "cmd=$J name=small option.ModelFile=$SMALL option.Backend=cuda option.Threads=$THREADS" \
  --games "$GAMES" --concurrency "$CONC" --tc byoyomi="$BYOYOMI" --margin 1000 --book /tmp/joseki.db --book-plies 16 \
  --seed "$SEED" --out /tmp/match-gpunet 2>&1 | grep -v "^games "
cp /tmp/match-gpunet/summary.json "$OUT/match_summary.json" 2>/dev/null
