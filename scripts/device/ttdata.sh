#!/usr/bin/env bash
# On a GPU machine: records for the time-to-target runs of docs/batch-size.md (scripts/device/ttt.sh),
# made afresh where the earlier ones are lost: self-play of the shipped GPU network
# (networks/gpu.jnn), one `jiriki selfplay` a GPU at once for SECONDS (default 420), PLAYOUTS a move
# (default 100) with playout-cap randomisation up to CAP (default 400, with probability 0.25; only
# those are policy targets; CAP=0: off, every position a target), resignation at 5%, GPU k with
# seed k + 1. HELDOUT_GAMES games (default 400) from the middle of GPU 0's run go to the held-out
# set (heldout/), the rest to the training set (train/). Packed to $OUT/tt.tar.xz.NN in parts of 15 MB
# with a summary of each set: join them with `cat tt.tar.xz.* > .carry/tt.tar.xz` for ttt.sh. The set
# also stays in /tmp/tt, where ttt.sh finds it when the next call comes to the same machine.
#
# (300 s on 2 H200s at PLAYOUTS=48 CAP=0 made 5.0M positions, 143 MB packed: too much to come back.)
#
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/cudnn-choices.txt"]:
#     [PLAYOUTS=48 CAP=0 HELDOUT_GAMES=200 PACK=0] bash scripts/device/ttdata.sh [SECONDS]
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
  "$J" selfplay --backend cuda --gpus $g --model networks/gpu.jnn --out $W/tt/train --name tt-g$g --seed $((g + 1)) \
    --seconds "$SECS" --playouts "${PLAYOUTS:-100}" --playout-cap-full "${CAP:-400}" --resign 0.05 --games-per-file 200 \
    --report-seconds 60 > $W/selfplay-$g.log 2>&1 &
  PIDS+=($!)
done
for p in "${PIDS[@]}"; do wait "$p" || echo "a self-play process failed (exit $?)"; done
tail -n 2 $W/selfplay-*.log
# Files from the middle of GPU 0's run: its first files hold the games that ended first, the shortest.
G0=($(ls $W/tt/train/tt-g0-*.hcpe3 | sort))
HF=$(((${HELDOUT_GAMES:-400} + 199) / 200))
printf '%s\n' "${G0[@]:$((${#G0[@]} / 2)):$HF}" | xargs -r mv -t $W/tt/heldout

step "summary"
for set in train heldout; do echo "$set: $("$J" records summary $W/tt/$set 2>&1 | head -3 | tr '\n' ' ')"; done
# At most 8 files come back from a call: PACK=0 leaves a set too large for that on the machine only.
if [[ ${PACK:-1} != 0 ]]; then
  step "pack"
  tar cf - -C $W tt | xz -T0 | split -b 15M -d - "$OUT/tt.tar.xz."
  ls -l "$OUT"/tt.tar.xz.*
fi
rm -rf /tmp/tt && ln -s $W/tt /tmp/tt
cp "$JIRIKI_CUDNN_CACHE" "$OUT/cudnn-choices.txt" 2>/dev/null
