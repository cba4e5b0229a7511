#!/usr/bin/env bash
# On a GPU machine: the loop's gate as a user would play it, two ways, at the same openings and
# seed: two networks at `go nodes 800` in the match's own process (the arena: per GPU one queue per
# network, every game at once), then between jiriki USI processes (CONCURRENCY games at once, each
# process with 2 search threads, their option.GPU spread over the GPUs by game slot). Wall time,
# moves a second and the result of each, in $OUT/arena.log; the games in $OUT/arena_*.tar.gz.
#
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/loop_x4_best.jnn"]:
#     bash scripts/device/arena.sh [GAMES] [CONCURRENCY]
# A is networks/gpu.jnn; B the network .carry/loop_x4_best.jnn (any .jnn: B=FILE).
set -uo pipefail
source scripts/device/env.sh
GAMES=${1:-64} CONC=${2:-16}
start arena.log
step "machine"
machine
build jiriki
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

step "arena: B against A, $GAMES games at nodes=800 on GPUs $GPUS"
t0=$(date +%s.%N)
"$J" match --engine "model=$B name=B" --engine "model=$A name=A" "${COMMON[@]}" --backend cuda --gpus "$GPUS" \
  --out /tmp/arena-net 2>&1 | tail -4
t1=$(date +%s.%N)
step "USI processes: the same, $CONC games at once"
"$J" match --engine "cmd=$J name=B option.ModelFile=$B option.Backend=cuda option.Threads=2 option.GPU=$GPUS" \
  --engine "cmd=$J name=A option.ModelFile=$A option.Backend=cuda option.Threads=2 option.GPU=$GPUS" \
  "${COMMON[@]}" --concurrency "$CONC" --out /tmp/arena-usi 2>&1 | tail -4
t2=$(date +%s.%N)
step "summary"
report "arena" /tmp/arena-net "$(python3 -c "print(round($t1 - $t0, 1))")"
report "USI processes" /tmp/arena-usi "$(python3 -c "print(round($t2 - $t1, 1))")"
tar czf "$OUT/arena_games.tar.gz" -C /tmp arena-net arena-usi
