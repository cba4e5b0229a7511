#!/usr/bin/env bash
# On the GPU machine (see docs of the device tool): builds jiriki with CUDA, runs the CUDA backend's
# tests, then scripts/torch_reference.py, which runs `jiriki bench nn --backend cuda`, compares its
# outputs with PyTorch's and times PyTorch on the same network. Everything goes to $OUT.
#
#   run with carry [".carry"]:  bash scripts/device/nn.sh [BATCHES] [ACTIVATION]
#
# STEPS (default "tests compare"; STEPS="" builds only) picks what runs after the build:
#   tests    the CUDA tests, with 4 cuDNN candidates per convolution to save time
#   parts    GPU-only speed at batch 512 and 1024 run as one batch and as two halves, with the
#            per-stage log
#   power    clocks and power draw (nvidia-smi) during sustained GPU-only runs, and through the
#            steps after it
#   sweep    cuDNN's heuristics alone against a sweep of the runtime-compiled engine's kernel
#            configurations (JIRIKI_CUDNN_SWEEP)
#   compare  scripts/torch_reference.py, with TORCH_REF_ARGS appended (e.g. "--window-seconds 2.5"
#            for sustained load)
#
# That machine has CUDA, cuDNN (PyTorch's wheel), cmake and ninja but no Catch2 package: the tests
# use the single header carried in .carry/catch2.
set -uo pipefail
source scripts/device/env.sh
BATCHES=${1:-1,16,64,256,1024}
ACTIVATION=${2:-relu}
STEPS=${STEPS-tests compare}
start nn_device.log

step "machine"
machine

step "build"
if [[ " $STEPS " == *" tests "* ]]; then build jiriki jiriki_tests; else build jiriki; fi

if [[ " $STEPS " == *" tests "* ]]; then
  step "tests"
  time JIRIKI_CUDNN_CANDIDATES=4 build-device/jiriki_tests "[cuda]" --durations yes 2>&1 | tail -40
  build-device/jiriki_tests "[nn]" 2>&1 | tail -3
fi

step "network"
MODEL=/tmp/net10x192_$ACTIVATION.jnn
build-device/jiriki nn init --blocks 10 --channels 192 --activation "$ACTIVATION" -o "$MODEL"
JIRIKI_CUDA_VERBOSE=1 build-device/jiriki nn eval "$MODEL" --backend cuda --top 3

if [[ " $STEPS " == *" parts "* ]]; then
  for k in 1 2; do
    step "large batches as $k part(s)"
    JIRIKI_CUDA_PARTS=$k JIRIKI_CUDA_VERBOSE=1 build-device/jiriki bench nn --model "$MODEL" --backend cuda \
      --batch 512,1024 --seconds 0.5 2>&1 | grep -v "^\[cuda\]   engine\|^\[cuda\] heuristics\|^\[cuda\] conv "
  done
fi

if [[ " $STEPS " == *" power "* ]]; then
  # Clocks, power draw and the reasons for lowered clocks (0x4: the software power cap), sampled by
  # nvidia-smi every 200 ms into $OUT/smi.csv from here to the end: 5 s of GPU-only replays per
  # batch size, then whatever steps follow.
  step "clocks and power under sustained load"
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 200 > "$OUT/smi.csv" &
  trap "kill $! 2>/dev/null" EXIT
  echo "from $(date +%T.%N)"
  JIRIKI_CUDA_VERBOSE=1 build-device/jiriki bench nn --model "$MODEL" --backend cuda --gpu-only \
    --batch "$BATCHES" --seconds 5 2>&1 | grep -v "^\[cuda\]   engine\|^\[cuda\] heuristics\|^\[cuda\] conv "
  echo "until $(date +%T.%N)"
fi

if [[ " $STEPS " == *" sweep "* ]]; then
  # cuDNN's heuristics alone against a sweep of every KERNEL_CFG value (JIRIKI_CUDNN_SWEEP), each
  # tuned into a choice file of its own, then both read back and timed in alternating rounds.
  step "heuristics alone against a kernel-configuration sweep"
  rm -f /tmp/choices_heuristics.txt /tmp/choices_sweep.txt
  bench_gpu() { build-device/jiriki bench nn --model "$MODEL" --backend cuda --gpu-only --batch "$BATCHES" --seconds 0.5; }
  JIRIKI_CUDNN_CACHE=/tmp/choices_heuristics.txt bench_gpu > /dev/null
  time (JIRIKI_CUDNN_SWEEP=100000 JIRIKI_CUDNN_CACHE=/tmp/choices_sweep.txt JIRIKI_CUDA_VERBOSE=1 bench_gpu 2>&1 \
    | grep -E "sweep:|built in|^ +[0-9]+ ")
  for round in 1 2; do
    for choices in heuristics sweep; do
      echo "--- $choices, round $round"
      JIRIKI_CUDNN_CACHE=/tmp/choices_$choices.txt bench_gpu | grep -E "^ +[0-9]+ "
    done
  done
  cp /tmp/choices_heuristics.txt /tmp/choices_sweep.txt "$OUT/"
fi

if [[ " $STEPS " == *" compare "* ]]; then
  step "PyTorch comparison and benchmark"
  time JIRIKI_CUDA_VERBOSE=1 python3 scripts/torch_reference.py --model "$MODEL" --jiriki build-device/jiriki \
    --batch "$BATCHES" ${TORCH_REF_ARGS:-} 2>&1 | tee "$OUT/nn_cuda_bench.txt"
fi
