#!/usr/bin/env bash
# On a GPU machine: self-play as the loop runs it on one GPU (the shipped GPU network, 100 playouts a
# move and 400 on a quarter of the moves, resignation at 5%, a --positions target that sets how
# many games run at once, as the loop's share of a generation does), once for each setting
# LEAVES[/THREADS[/EVALUATORS]]: LEAVES new leaves a game adds to a batch (--leaves-per-game),
# THREADS worker threads and EVALUATORS network calls in flight (each 0 or left out: the default).
# Prints each run's steady rates (moves, nodes and network evaluations a second, positions a network
# call) after WARMUP seconds. Everything goes to $OUT.
#
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/cudnn-choices.txt"]:
#     [POSITIONS=50000] [WARMUP=15] bash scripts/device/selfplay_leaves.sh SECONDS SETTING...
set -uo pipefail
source scripts/device/env.sh
SECS=${1:-45}
shift
start selfplay_leaves.log
step "machine"; machine
step "build"; build jiriki
use_carried_cudnn_choices
J=$PWD/build-device/jiriki

for setting in "${@:-1 2 4}"; do
  IFS=/ read -r L T E <<< "$setting"
  T=${T:-0} E=${E:-0}
  step "selfplay, --leaves-per-game $L, --threads $T, --evaluators $E, --positions ${POSITIONS:-50000}, $SECS s"
  rm -rf /tmp/spl
  "$J" selfplay --threads "$T" --evaluators "$E" --backend cuda --gpus 0 --model networks/gpu.jnn --out /tmp/spl --name l$L-t$T-e$E --seconds "$SECS" \
    --positions "${POSITIONS:-50000}" --playouts 100 --playout-cap-full 400 --resign 0.05 --leaves-per-game "$L" \
    --report-seconds 5 2>&1 | grep -E "^selfplay|games" | sed -n '1p;$p'
  cp /tmp/spl/l$L-t$T-e$E.stats.jsonl "$OUT/"
  python3 - /tmp/spl/l$L-t$T-e$E.stats.jsonl "${WARMUP:-15}" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
a = next(r for r in rows if r["seconds"] >= float(sys.argv[2]))
b = rows[-2] if len(rows) > 2 else rows[-1]  # the last full interval, before the stop
dt = b["seconds"] - a["seconds"]
rate = lambda k: (b[k] - a[k]) / dt
calls = b["nn_calls"] - a["nn_calls"]
print(f"steady {a['seconds']:.0f}-{b['seconds']:.0f} s: moves/s {rate('moves'):.1f}, nodes/s {rate('playouts'):.0f}, "
      f"evals/s {rate('nn_positions'):.0f}, positions a network call {(b['nn_positions'] - a['nn_positions']) / max(calls, 1):.1f}")
PY
done
