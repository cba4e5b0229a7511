#!/usr/bin/env bash
# On the GPU machine (see the device tool's docs): builds jiriki with CUDA and measures self-play
# with a 10-block, 192-channel network: `jiriki bench nn --backend cuda` at the self-play batch
# size, then `jiriki selfplay` at 800 playouts per move, then with playout-cap randomisation (800
# playouts with probability 0.25, else 160). Rates are taken from the stats files after WARMUP
# seconds (the evaluators tune their cuDNN engines on their first batch). Everything goes to $OUT.
#
#   run with carry [".carry"]:  bash scripts/device/selfplay.sh [SECONDS] [THREADS] [EVALUATORS] [BATCH]
#
# SECONDS per self-play run (default 60), THREADS worker threads and EVALUATORS network calls in
# flight on the GPU (defaults 12 and 4), BATCH positions per network call (default 256). RUNS (default
# "p800 cap") picks the self-play runs; EXTRA adds self-play options to each (e.g. "--games 1280
# --concurrent 1280" for runs whose games finish). Each run ends with a summary of its finished games
# (results, game ends, and the stats file's resignation counts).
set -uo pipefail
source scripts/device/env.sh
# Fewer cuDNN engine candidates per convolution: shorter tuning at each evaluator's first batch (the
# same setting for the benchmark and for self-play, so that the two compare).
export JIRIKI_CUDNN_CANDIDATES=${JIRIKI_CUDNN_CANDIDATES:-4}
RUN_SECONDS=${1:-60}
THREADS=${2:-12}
EVALUATORS=${3:-4}
BATCH=${4:-256}
WARMUP=${WARMUP:-20}
RUNS=${RUNS:-p800 cap}
start selfplay_device.log

step "machine"
machine

step "build"
build jiriki
J=build-device/jiriki

step "network"
MODEL=/tmp/net10x192.jnn
$J nn init --blocks 10 --channels 192 -o "$MODEL"

step "bench nn at batch $BATCH"
$J bench nn --model "$MODEL" --backend cuda --batch "$BATCH" --seconds 5 | tee "$OUT/bench_nn.txt"

run_selfplay() {  # NAME, then selfplay options
  local name=$1
  shift
  step "selfplay $name"
  rm -rf "/tmp/sp_$name"
  time $J selfplay --model "$MODEL" --out "/tmp/sp_$name" --name "$name" --backend cuda --seconds "$RUN_SECONDS" \
    --threads "$THREADS" --evaluators "$EVALUATORS" --batch "$BATCH" --report-seconds 5 "$@" ${EXTRA:-} \
    | tee "$OUT/selfplay_$name.txt"
  cp "/tmp/sp_$name/$name.stats.jsonl" "$OUT/"
  $J records summary "/tmp/sp_$name" 2>&1 | tee "$OUT/summary_$name.txt"
  tail -1 "/tmp/sp_$name/$name.stats.jsonl" | python3 -c 'import json,sys; r=json.load(sys.stdin); print({k: r[k] for k in ("games","ends","no_resign_games","would_resign","false_resign")})' 
}
[[ " $RUNS " == *" p800 "* ]] && run_selfplay p800 --playouts 800
[[ " $RUNS " == *" cap "* ]] && run_selfplay cap --playouts 160 --playout-cap-full 800 --playout-cap-prob 0.25

step "steady state (after ${WARMUP} s)"
python3 - "$OUT" "$BATCH" "$WARMUP" $RUNS <<'PY'
import json, sys
out, batch, warmup, runs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
bench = None
for line in open(f"{out}/bench_nn.txt"):
    f = line.split()
    if len(f) >= 2 and f[0] == str(batch) and bench is None:
        bench = float(f[1])  # evaluate(): host conversion and copies included (first table)
print(f"bench nn --backend cuda, batch {batch}: {bench:.0f} positions/s")
dlshogi = 45000 * 3600 / 800
print(f"dlshogi's published 45,000 nodes/s (RTX 3090) at 800 playouts/move: {dlshogi:.0f} positions/hour")
for name, per_move, full in (("p800", 800, 1.0), ("cap", 0.25 * 800 + 0.75 * 160, 0.25)):
    if name not in runs:
        continue
    rows = [json.loads(l) for l in open(f"{out}/{name}.stats.jsonl") if l.strip()]
    a = next(r for r in rows if r["seconds"] >= warmup)
    b = rows[-2] if len(rows) > 2 else rows[-1]  # the last full interval, before the stop
    dt = b["seconds"] - a["seconds"]
    rate = lambda k: (b[k] - a[k]) / dt
    evals, nodes = rate("nn_positions"), rate("playouts")
    fill = (b["nn_positions"] - a["nn_positions"]) / max(1, (b["nn_calls"] - a["nn_calls"]) * batch)
    print(f"\n{name}: {a['seconds']:.0f}-{b['seconds']:.0f} s")
    print(f"  network evaluations/s {evals:.0f} = {100 * evals / bench:.1f}% of bench nn at batch {batch}; batch fill {100 * fill:.1f}%")
    print(f"  nodes (playouts)/s {nodes:.0f}; moves/s {rate('moves'):.1f}; training positions/s {rate('positions'):.1f} (counted)")
    print(f"  training positions/hour: {3600 * rate('positions'):.0f} counted, {3600 * nodes * full / per_move:.0f} from nodes/s "
          f"({per_move:.0f} playouts per searched move on average, {full:.2f} of them recorded)")
PY
