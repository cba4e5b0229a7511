#!/usr/bin/env bash
# On the GPU machine: does a new network beat the one it would replace? Each NAME:NEW:OLD:SEED plays
# NEW against OLD at 800 playouts a move in one `jiriki match` process (the arena: 64 games at once,
# both sides on the GPUs), 8 random opening plies drawn from SEED, until the SPRT of the replacement
# rule (elo0=0 elo1=15) decides or 1,000 games; all pairs at once, each stopped (SIGINT: its summary
# is still written) after SECONDS. Logs: $OUT/NAME.log; games: $OUT/sprt_games.tar.gz.
# A fifth field, NAME:NEW:OLD:SEED:PRIOR, continues a test an earlier call left undecided: PRIOR is
# that call's games.jsonl of the pair (carried), and the log ends with the one SPRT over both runs,
# walked in the order they were played (`jiriki match --summarize PRIOR --summarize NEW --sprt`).
#   carry [".carry/include.tar.xz", ".carry/lib", ".carry/cudnn-choices.txt"]
#   bash scripts/device/sprt.sh 400 gpu:new-gpu.jnn:networks/gpu.jnn:5101 cpu:new-cpu.jnn:networks/cpu.jnn:5102
set -u
source scripts/device/env.sh
SECONDS_LIMIT=$1
shift
start sprt_device.log
step build
build jiriki
J=$PWD/build-device/jiriki
use_carried_cudnn_choices
GPUS=$(seq -s, 0 $(($(gpu_count) - 1)))
step "matches on GPUs $GPUS"
PIDS=()
NAMES=()
declare -A PRIOR
for pair in "$@"; do
  IFS=: read -r name new old seed prior <<< "$pair"
  PRIOR[$name]=${prior:-}
  timeout -s INT "$SECONDS_LIMIT" "$J" match --engine "model=$new name=new" --engine "model=$old name=shipped" \
    --games 1000 --concurrency 64 --seed "$seed" --tc nodes=800 --backend cuda --gpus "$GPUS" --random-plies 8 \
    --max-plies 320 --sprt "elo0=0 elo1=15 alpha=0.05 beta=0.05" --out "$OUT/$name" > "$OUT/$name.log" 2>&1 &
  PIDS+=($!)
  NAMES+=("$name")
done
for p in "${PIDS[@]}"; do wait "$p"; done  # (a bare `wait` would wait for start's tee too)
for name in "${NAMES[@]}"; do
  step "$name"
  grep -A 9 "^new vs shipped: " "$OUT/$name.log"
  if [[ -n ${PRIOR[$name]} ]]; then
    echo "--- continued over ${PRIOR[$name]} and this call's games" | tee -a "$OUT/$name.log"
    "$J" match --summarize "${PRIOR[$name]}" --summarize "$OUT/$name/games.jsonl" \
      --sprt "elo0=0 elo1=15 alpha=0.05 beta=0.05" 2>&1 | tee -a "$OUT/$name.log"
  fi
done
cd "$OUT" && tar czf sprt_games.tar.gz "${NAMES[@]}" && rm -rf "${NAMES[@]}"
