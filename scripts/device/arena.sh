#!/usr/bin/env bash
# On a GPU machine: the loop's gate as a user would play it, two ways, at the same openings and
# seed: two networks at `go nodes 800` in the match's own process (the arena: per GPU one queue per
# network, every game at once), then between jiriki USI processes (CONCURRENCY games at once, each
# process with 2 search threads, their option.GPU spread over the GPUs by game slot). Wall time,
# moves a second and the result of each, in $OUT/arena.log; the games in $OUT/arena_*.tar.gz.
#
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/loop_x4_best.jnn", ".carry/cudnn-choices.txt"]
#   (the tuned cuDNN choices, so that neither way pays a fresh machine's tuning):
#     bash scripts/device/arena.sh [GAMES] [CONCURRENCY]
# A is networks/gpu.jnn; B the network .carry/loop_x4_best.jnn (any .jnn: B=FILE). ARENA_THREADS="8 16"
# plays the arena once for each count of worker threads per GPU (default: the arena's own default).
# Each way's CPU time (user + system, its engine processes included) beside its wall time: how many
# cores it kept busy.
set -uo pipefail
source scripts/device/env.sh
GAMES=${1:-64} CONC=${2:-16}
start arena.log
step "machine"
machine
build jiriki
use_carried_cudnn_choices
J=$PWD/build-device/jiriki
A=$PWD/networks/gpu.jnn B=${B:-$PWD/.carry/loop_x4_best.jnn}
GPUS=$(seq -s, 0 $(($(gpu_count) - 1)))
COMMON=(--games "$GAMES" --tc nodes=800 --random-plies 8 --seed 9 --max-plies 320)
moves() { python3 -c '
import json, sys
n = sum(json.loads(l)["plies"] - json.loads(l)["opening_plies"] for l in open(sys.argv[1]))
print(n)' "$1/games.jsonl" 2>/dev/null || echo 0; }
report() {  # name dir seconds
  local m; m=$(moves "$2")
  echo "$1: $3 s, $m moves, $(python3 -c "print(round($m / max($3, 1e-9), 1))") moves/s; $(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
print("score %s (+%s -%s =%s), Elo %s %s" % (s.get("score"), s.get("wins"), s.get("losses"), s.get("draws"), s.get("elo"), s.get("elo_95")))' "$2/summary.json" 2>&1 | tail -1)"
}

declare -A WALL CPU
TIMEFORMAT='cpu %U %S'  # bash's time: user and system seconds, the children it waited for included
VARIANTS=(${ARENA_THREADS:-default})
for v in "${VARIANTS[@]}"; do
  step "arena ($v worker threads per GPU): B against A, $GAMES games at nodes=800 on GPUs $GPUS"
  extra=(); [[ $v != default ]] && extra=(--threads "$v")
  t0=$(date +%s.%N)
  { time "$J" match --engine "model=$B name=B" --engine "model=$A name=A" "${COMMON[@]}" --backend cuda \
    --gpus "$GPUS" "${extra[@]}" --out /tmp/arena-net-$v > /tmp/arena-log-$v 2>&1; } 2> /tmp/arena-time-$v
  tail -4 /tmp/arena-log-$v
  t1=$(date +%s.%N)
  WALL[$v]=$(python3 -c "print(round($t1 - $t0, 1))")
  CPU[$v]=$(awk '{print $2 + $3}' /tmp/arena-time-$v)
done
step "USI processes: the same, $CONC games at once"
t1=$(date +%s.%N)
{ time "$J" match --engine "cmd=$J name=B option.ModelFile=$B option.Backend=cuda option.Threads=2 option.GPU=$GPUS" \
  --engine "cmd=$J name=A option.ModelFile=$A option.Backend=cuda option.Threads=2 option.GPU=$GPUS" \
  "${COMMON[@]}" --concurrency "$CONC" --out /tmp/arena-usi > /tmp/arena-log-usi 2>&1; } 2> /tmp/arena-time-usi
tail -4 /tmp/arena-log-usi
t2=$(date +%s.%N)
step "summary"
for v in "${VARIANTS[@]}"; do
  report "arena ($v threads a GPU)" /tmp/arena-net-$v "${WALL[$v]}"
  echo "  CPU time $(printf %.0f "${CPU[$v]}") s: $(python3 -c "print(round(${CPU[$v]} / ${WALL[$v]}, 1))") cores busy on average"
done
report "USI processes" /tmp/arena-usi "$(python3 -c "print(round($t2 - $t1, 1))")"
echo "  CPU time (the match and the engine processes it waited for) $(awk '{print $2 + $3}' /tmp/arena-time-usi) s"
(cd /tmp && tar czf "$OUT/arena_games.tar.gz" arena-net-* arena-usi)
