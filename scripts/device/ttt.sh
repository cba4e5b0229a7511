#!/usr/bin/env bash
# On the GPU machine: one time-to-target run of docs/batch-size.md. Trains a 10x192 network on the
# self-play records carried in .carry/tt.tar.xz (train/ and heldout/), evaluating the held-out set
# every 250,000 samples, for SECONDS (default 500, start-up included), and logs to $OUT/ttt_NAME.jsonl.
# It trains data parallel on every GPU of the machine (BATCH is per GPU); GPUS=0 (or 0,1, ...) picks. The same rule for every run:
# SGD (Nesterov 0.9), learning rate BASE_LR x b / 256 for a global batch b (BASE_LR 0.05 unless set; linear scaling; under --batch auto the starting batch 64's, which
# the trainer scales the same way at each change), warm-up over the first 51,200 samples, then
# constant.
#
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/tt.tar.xz",
#   ".carry/cudnn-choices.txt"] (it builds no tests, so Catch2 stays behind; and ".carry/debs" with TEACHER=1, .carry/fuzzpack.tar.xz with FUZZ):
#     bash scripts/device/ttt.sh NAME BATCH MODE [SECONDS]      BATCH: 8..1024 or auto; MODE: nccl or host
# TEACHER=1: teacher games (scripts/device/teacher_games.sh, CONC 12 at nice 19) on the cores the
# run leaves idle, for as long as it trains; their records come back in $OUT.
# NOISE_HALVES=1: --noise-halves (several GPUs: the halves' noise scale logged beside the replicas').
# LOG_EVERY: steps between train records (default 1000; 50 shows the first steps after a batch change).
# NOISE_EVERY: auto's --noise-every (default: the trainer's, 50; each sample costs one more full-batch
# pass on one GPU; the first auto runs of docs/batch-size.md took 10).
# FUZZ=NAME: instead, scripts/device/fuzz.sh NAME with FUZZ_JOBS (default 14, as in the lr 0.05 series) processes at nice 19 for
# as long as it trains (carry .carry/fuzzpack.tar.xz too). For a comparison, give every run the same.
set -uo pipefail
source scripts/device/env.sh
NAME=$1 BATCH=$2 MODE=$3 SECS=${4:-500}
start "ttt_$NAME.log"
step "machine"; machine
step "build"; build jiriki
[[ -d /tmp/tt ]] || tar xJf .carry/tt.tar.xz -C /tmp
# cuDNN's tuned choices (nn/cuda/fused_conv.cpp) live in one file, carried from machine to machine
# as .carry/cudnn-choices.txt and returned in $OUT; the kernels cuDNN compiles at run time for the
# chosen engines (four a device, 0.3-1.1 s each the first time) live in the CUDA driver's cache
# (~/.nv/ComputeCache), which stays on the machine. So every candidate batch trains two steps once a
# machine before the first run (tuning what the file lacks, compiling the rest): each run then starts
# as a user's second run does, and no run pays a machine's first set-up (a device's set-up took 2-4 s
# on a fresh H200 machine, 0.7-1.2 s on the second run; bench/results/batch_size/h200x2_nccl/setup_probe.txt).
# TUNE_ONLY=1 stops there (the first call of a series: tuning eight batches takes minutes).
use_carried_cudnn_choices
GPU_KEY=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '_')
if [[ ! -f /tmp/ttt-warm ]]; then
  step "a device for each candidate batch, once a machine (cuDNN's choices the file lacks, compiled kernels)"
  for b in 8 16 32 64 128 256 512 1024; do
    grep -qE "^jiriki-cudnn-2 $GPU_KEY/[^ ]*/b$b,i192,o192,[^ ]*,p1," "$JIRIKI_CUDNN_CACHE" 2>/dev/null || echo "batch $b: not in the choice file, tuned"
    t0=$(date +%s%N)
    build-device/jiriki train --backend cuda --data /tmp/tt/heldout --blocks 10 --channels 192 --batch $b \
      --steps 2 --model-out /tmp/tune.jnn > /dev/null 2>&1 || echo "batch $b: failed"
    echo "batch $b: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  done
  touch /tmp/ttt-warm
fi
if [[ -n "${TUNE_ONLY:-}" ]]; then cp "$JIRIKI_CUDNN_CACHE" "$OUT/cudnn-choices.txt"; exit 0; fi
B=$BATCH; [[ $BATCH == auto ]] && B=64
# GPUS (default: every GPU): the replicas; every figure below is of the global batch, N x B.
GPUS=${GPUS:-$(seq -s, 0 $(($(gpu_count) - 1)))}
N=$(echo "$GPUS" | tr ',' '\n' | wc -l)
G=$((B * N))
LR=$(python3 -c "print(${BASE_LR:-0.05} * $G / 256)")
if [[ -n "${TEACHER:-}" ]]; then
  CONC=${CONC:-12} NICE=19 bash scripts/device/teacher_games.sh "$SECS" build-device/jiriki > "$OUT/teacher_games.txt" 2>&1 &
  BESIDE=$!
elif [[ -n "${FUZZ:-}" ]]; then
  bash scripts/device/fuzz.sh "$FUZZ" "$SECS" "${FUZZ_JOBS:-14}" > /dev/null 2>&1 &
  BESIDE=$!
fi
# --batch auto keeps the step times it measures for later runs of the setting (training/tuner_file.h).
# As for the devices above, a short auto run on these GPUs in this mode measures them once a machine,
# so that every auto run of a series starts as a user's second run does, not only the second.
if [[ $BATCH == auto && ! -f /tmp/ttt-tuned-$MODE-$GPUS ]]; then
  step "the tuner's step times on GPUs $GPUS under $MODE, once a machine"
  build-device/jiriki train --backend cuda --gpus "$GPUS" --data /tmp/tt/heldout --blocks 10 --channels 192 \
    --optimizer sgd --batch auto --batch-start 64 --allreduce "$MODE" --steps 1 --model-out /tmp/tune.jnn 2>&1 |
    grep -E "^tuner" && touch "/tmp/ttt-tuned-$MODE-$GPUS"
fi
step "train $NAME: batch $BATCH a GPU on GPUs $GPUS, --allreduce $MODE, lr $LR at global batch $G, for $SECS s"
timeout -s INT "$SECS" build-device/jiriki train --backend cuda --gpus "$GPUS" --data /tmp/tt/train --test /tmp/tt/heldout \
  --blocks 10 --channels 192 --optimizer sgd --lr "$LR" --schedule constant --warmup-steps $((51200 / G)) \
  --eval-every $((250000 / G)) --batch "$BATCH" --batch-start 64 --allreduce "$MODE" --steps 100000000 \
  ${NOISE_EVERY:+--noise-every "$NOISE_EVERY"} ${NOISE_HALVES:+--noise-halves} \
  --loader-threads 8 --log-every "${LOG_EVERY:-1000}" --model-out /tmp/ttt.jnn --checkpoint /tmp/ttt.ckpt \
  --log "$OUT/ttt_$NAME.jsonl" 2>&1 | grep -E "^test|^tuner at|^training|stopped|backend"
# Only that job: a bare `wait` would also wait for start's tee, which outlives the script's output.
[[ -n "${BESIDE:-}" ]] && wait "$BESIDE"
[[ -n "${FUZZ:-}" ]] && tail -1 "$OUT/fuzz_$FUZZ.log"
cp "$JIRIKI_CUDNN_CACHE" "$OUT/cudnn-choices.txt"
grep '"type":"device"' "$OUT/ttt_$NAME.jsonl"
