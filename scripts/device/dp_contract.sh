#!/usr/bin/env bash
# On a GPU machine with 2 or more GPUs: the data-parallel contract of `jiriki train` on real GPUs.
#   same      the threaded launch (--gpus 0,1) twice and `mpirun -np 2` (one process a GPU) once, from
#             the same records, seed and settings, NCCL and host aggregation each: are the weights
#             identical? (the threaded pair first: it says whether the GPU's arithmetic repeats at all)
#   die       `mpirun -np 2`, rank 1 killed (SIGKILL) in the middle: does rank 0 end, and how long after?
#   resume    --gpus 0,1 (then --gpus 0), stopped by SIGKILL as its first checkpoint appears, then
#             --resume: it continues from the checkpoint's step and ends at the asked step count; its
#             weights against an uninterrupted run's, and those against a run without checkpoints
#             (tensor by tensor where they differ).
#   checkpoints  (only when named in STEPS) two GPUs, 3000 steps, twice with checkpoints every 1000
#             steps and twice without, under each mode: do checkpoints change the weights?
# The records are made on the machine first (self-play of the shipped GPU network).
#
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/cudnn-choices.txt"]:
#     [STEPS="same die resume checkpoints"] bash scripts/device/dp_contract.sh
set -uo pipefail
source scripts/device/env.sh
start dp_contract.log

step "machine"
machine
build jiriki
J=$PWD/build-device/jiriki
MPIRUN=$(command -v mpirun || true)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=/tmp/dpc; rm -rf $W; mkdir -p $W

# cuDNN's choices: the carried file, and every shape used below timed once (a warm-up run on both
# GPUs) before any comparison. A run that times a shape may pick another engine than the next run,
# which reads the file, and another engine rounds differently: compared runs must read the same choices.
use_carried_cudnn_choices

step "records: self-play of networks/gpu.jnn on GPU 0"
"$J" selfplay --backend cuda --gpus 0 --model networks/gpu.jnn --positions 12000 --playouts 32 \
  --out $W/data --name dpc --report-seconds 30 2>&1 | tail -2
# A small network and fixed steps: the contract, not the speed.
COMMON=(train --backend cuda --data $W/data --blocks 4 --channels 64 --batch 128 --lr 0.05 --schedule constant
        --check-every 10 --log-every 100 --loader-threads 2)
sums() { sha256sum "$@" | awk '{print substr($1, 1, 16)}' | tr '\n' ' '; echo; }
step "warm-up: cuDNN's choices for this network on both GPUs"
"$J" "${COMMON[@]}" --steps 20 --gpus 0,1 --model-out $W/warm.jnn > $W/warm.txt 2>&1; echo "exit $?"

if [[ " ${STEPS:-same die resume} " == *" same "* ]]; then
  for mode in nccl host; do
    step "same: $mode, 300 steps, threaded twice and mpirun -np 2"
    for k in 1 2; do
      "$J" "${COMMON[@]}" --steps 300 --gpus 0,1 --allreduce $mode --model-out $W/t$k-$mode.jnn > $W/t$k-$mode.txt 2>&1
      echo "threaded $k: exit $? $(grep -m1 -E "replicas" $W/t$k-$mode.txt | cut -c1-120)"
    done
    if [[ -n $MPIRUN ]]; then
      "$MPIRUN" -np 2 "$J" "${COMMON[@]}" --steps 300 --allreduce $mode --model-out $W/m-$mode.jnn > $W/m-$mode.txt 2>&1
      echo "mpirun: exit $? $(grep -m1 -E "replicas" $W/m-$mode.txt | cut -c1-120)"
    fi
    echo "weights sha256 (threaded 1, threaded 2, mpirun): $(sums $W/t1-$mode.jnn $W/t2-$mode.jnn $W/m-$mode.jnn)"
    cmp -s $W/t1-$mode.jnn $W/t2-$mode.jnn && echo "threaded runs identical" || echo "threaded runs DIFFER"
    cmp -s $W/t1-$mode.jnn $W/m-$mode.jnn && echo "mpirun identical to threaded" || echo "mpirun DIFFERS from threaded"
  done
fi

if [[ " ${STEPS:-same die resume} " == *" die "* && -n $MPIRUN ]]; then
  step "die: mpirun -np 2, rank 1 killed after 15 s"
  t0=$SECONDS
  "$MPIRUN" -np 2 "$J" "${COMMON[@]}" --steps 100000 --model-out $W/die.jnn > $W/die.txt 2>&1 &
  MP=$!
  sleep 15
  RANK1=$(pgrep -f "model-out $W/die.jnn" | while read -r p; do
    tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -q '^OMPI_COMM_WORLD_RANK=1$' && echo "$p"; done | head -1)
  echo "rank 1 is pid ${RANK1:-none}; killing it at $((SECONDS - t0)) s"
  [[ -n $RANK1 ]] && kill -9 "$RANK1"
  k0=$SECONDS
  for _ in $(seq 1 120); do kill -0 $MP 2> /dev/null || break; sleep 1; done
  if kill -0 $MP 2> /dev/null; then echo "HANG: mpirun still running $((SECONDS - k0)) s after the kill"; kill -9 $MP
  else wait $MP; echo "mpirun ended $((SECONDS - k0)) s after the kill, exit $?"; fi
  pgrep -f "model-out $W/die.jnn" > /dev/null && echo "LEFT: a rank still runs" || echo "no rank left running"
  tail -4 $W/die.txt | cut -c1-200
fi

# Which tensors of two model files differ, and by how much at most.
model_diff() {
  python3 - "$1" "$2" << 'PY'
import sys
sys.path.insert(0, "scripts")
import numpy as np
from torch_reference import read_model
a, b = read_model(sys.argv[1])[1], read_model(sys.argv[2])[1]
diff = [(n, float(np.abs(a[n] - b[n]).max())) for n in a if not np.array_equal(a[n], b[n])]
print("identical" if not diff else f"{len(diff)} of {len(a)} tensors differ: " +
      ", ".join(f"{n} (max {d:.3g})" for n, d in diff[:8]))
PY
}

if [[ " ${STEPS:-same die resume} " == *" resume "* ]]; then
  for gpus in 0,1 0; do
    step "resume: --gpus $gpus, 3000 steps, checkpoint every 1000, SIGKILL as the first checkpoint appears, --resume"
    R=(--steps 3000 --gpus $gpus --allreduce nccl)
    "$J" "${COMMON[@]}" "${R[@]}" --model-out $W/plain.jnn > $W/plain.txt 2>&1; echo "uninterrupted, no checkpoint: exit $?"
    "$J" "${COMMON[@]}" "${R[@]}" --checkpoint-every 1000 --model-out $W/full.jnn > $W/full.txt 2>&1
    echo "uninterrupted, checkpoints every 1000 steps: exit $?"
    rm -f $W/res.jnn $W/res.jnn.ckpt
    "$J" "${COMMON[@]}" "${R[@]}" --checkpoint-every 1000 --model-out $W/res.jnn > $W/res1.txt 2>&1 &
    P=$!
    for _ in $(seq 1 1200); do [[ -f $W/res.jnn.ckpt ]] && break; sleep 0.05; done
    kill -9 $P; wait $P; echo "killed (exit $?) with checkpoint: $(ls -l $W/res.jnn.ckpt 2>&1 | awk '{print $5, $NF}')"
    "$J" "${COMMON[@]}" "${R[@]}" --checkpoint-every 1000 --model-out $W/res.jnn --resume > $W/res2.txt 2>&1
    echo "resumed: exit $?"
    grep -m2 -iE "resum|from step" $W/res2.txt | cut -c1-160
    grep -E "^step|steps" $W/res2.txt | tail -2 | cut -c1-160
    echo "weights sha256 (no checkpoint, checkpoints, resumed): $(sums $W/plain.jnn $W/full.jnn $W/res.jnn)"
    echo "checkpoints against none: $(model_diff $W/plain.jnn $W/full.jnn)"
    echo "resumed against uninterrupted: $(model_diff $W/full.jnn $W/res.jnn)"
  done
fi
if [[ " ${STEPS:-same die resume} " == *" checkpoints "* ]]; then
  for mode in nccl host; do
    step "checkpoints: --gpus 0,1 --allreduce $mode, 3000 steps, twice with a checkpoint every 1000 steps, twice without"
    R=(--steps 3000 --gpus 0,1 --allreduce $mode)
    for k in 1 2; do
      "$J" "${COMMON[@]}" "${R[@]}" --model-out $W/plain$k.jnn > /dev/null 2>&1 || echo "plain $k failed"
      "$J" "${COMMON[@]}" "${R[@]}" --checkpoint-every 1000 --model-out $W/ck$k.jnn > /dev/null 2>&1 || echo "ck $k failed"
    done
    echo "weights sha256 (without 1, 2; with 1, 2): $(sums $W/plain1.jnn $W/plain2.jnn $W/ck1.jnn $W/ck2.jnn)"
    echo "with against without: $(model_diff $W/plain1.jnn $W/ck1.jnn)"
  done
fi
cp "$JIRIKI_CUDNN_CACHE" "$OUT/cudnn-choices.txt" 2>/dev/null
step "done"
