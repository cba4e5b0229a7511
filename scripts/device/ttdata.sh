#!/usr/bin/env bash
# On a GPU machine: records for the time-to-target runs of docs/batch-size.md (scripts/device/ttt.sh),
# made afresh where the earlier ones are lost: self-play of the shipped GPU network
# (networks/gpu.jnn), one `jiriki selfplay` a GPU at once for SECONDS (default 420), 100 playouts a
# move with playout-cap randomisation (400 with probability 0.25; only those are policy targets),
# resignation at 5%, GPU k with seed k + 1. GPU 0's process writes the held-out set (heldout/), the
# others the training set (train/); with one GPU, its first HELDOUT_GAMES games (default 400) go to
# the held-out set. Packed to $OUT/tt.tar.xz.NN in parts of 15 MB with a summary of each set: join
# them with `cat tt.tar.xz.* > .carry/tt.tar.xz` for ttt.sh.
#
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/cudnn-choices.txt"]:
#     bash scripts/device/ttdata.sh [SECONDS]
set -uo pipefail
source scripts/device/env.sh
SECS=${1:-420}
start ttdata.log
step "machine"; machine
step "build"; build jiriki
use_carried_cudnn_choices
J=$PWD/build-device/jiriki
W=/tmp/ttdata; rm -rf $W; mkdir -p $W/tt/train $W/tt/heldout
N=$(gpu_count)

step "self-play: $N GPUs for $SECS s"
PIDS=()
for ((g = 0; g < N; ++g)); do
  dir=$W/tt/train
  ((g == 0 && N > 1)) && dir=$W/tt/heldout
  "$J" selfplay --backend cuda --gpus $g --model networks/gpu.jnn --out $dir --name tt-g$g --seed $((g + 1)) \
    --seconds "$SECS" --playouts 100 --playout-cap-full 400 --resign 0.05 --games-per-file 200 \
    --report-seconds 60 > $W/selfplay-$g.log 2>&1 &
  PIDS+=($!)
done
for p in "${PIDS[@]}"; do wait "$p" || echo "a self-play process failed (exit $?)"; done
tail -2 $W/selfplay-*.log
if ((N == 1)); then  # the first files hold the first games
  ls $W/tt/train/*.hcpe3 | head -n $(((${HELDOUT_GAMES:-400} + 199) / 200)) | xargs -r mv -t $W/tt/heldout
fi

step "summary"
for set in train heldout; do echo "$set: $("$J" records summary $W/tt/$set 2>&1 | head -3 | tr '\n' ' ')"; done
step "pack"
tar cJf - -C $W tt | split -b 15M -d - "$OUT/tt.tar.xz."
ls -l "$OUT"/tt.tar.xz.*
cp "$JIRIKI_CUDNN_CACHE" "$OUT/cudnn-choices.txt" 2>/dev/null
