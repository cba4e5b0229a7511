#!/usr/bin/env bash
# On the GPU machine's cores: the CPU network against gpsshogi (1 thread) as the CPU bar plays it,
# jiriki on the CPU backend with 2 search threads, byoyomi 1 s, openings from gpsshogi's book, with
# nproc/2 matches side by side, each pinned (taskset) to 2 cores of its own that both of its engines
# share, as on a 2-core machine; each match plays GAMES/(nproc/2) games (pairs of colours) and starts
# no pair after START_WITHIN seconds (default: none). The matches' games are then counted together.
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/debs", ".carry/dnnl"] (oneDNN: without it the
#   build has only the own kernels, several times slower on that machine's Intel Xeon):
#     SEED=S START_WITHIN=300 bash scripts/device/strength_cpu.sh NETWORK.jnn GAMES
set -uo pipefail
source scripts/device/env.sh
NET=$(realpath "$1") GAMES=$2
SEED=${SEED:-1} BYOYOMI=${BYOYOMI:-1000} NAME=${NAME:-$(basename "$1" .jnn)}
SLOTS=$(($(nproc) / 2))
((GAMES % (2 * SLOTS) == 0)) || { echo "GAMES must be a multiple of 2 x $SLOTS (pairs of games in each match)"; exit 1; }
start "${LOG:-strength_cpu.log}"
rm -rf /tmp/matches && mkdir -p /tmp/matches
trap 'tar czf "$OUT/matches.tar.gz" -C /tmp matches' EXIT
step "machine"; machine
step "build"; build jiriki
J=$PWD/build-device/jiriki
source scripts/device/engines.sh
unpack_engines "$J"
step "$NAME (CPU, 2 threads) against gpsshogi (1 thread): $GAMES games, $SLOTS matches on 2 cores each, byoyomi $BYOYOMI ms"
jobs=()
for ((s = 0; s < SLOTS; ++s)); do
  taskset -c "$((2 * s)),$((2 * s + 1))" "$J" match \
    --engine "cmd=$J name=$NAME option.ModelFile=$NET option.Backend=cpu option.Threads=2" \
    --engine "cmd=$GPS/gpsusi name=gpsshogi env.GPS_THREADS=1" --games $((GAMES / SLOTS)) --concurrency 1 \
    --tc "byoyomi=$BYOYOMI" --margin 1000 --book /tmp/joseki.db --book-plies 16 --seed "$SEED$s" \
    --start-within "${START_WITHIN:-0}" --out "/tmp/matches/slot$s" > "/tmp/matches/slot$s.out" 2>&1 &
  jobs+=($!)
done
wait "${jobs[@]}"  # (named: a bare wait would also wait for start's tee)
for ((s = 0; s < SLOTS; ++s)); do grep -v "^games " "/tmp/matches/slot$s.out" | tail -3; done
step "the $SLOTS matches together"
"$J" match $(for ((s = 0; s < SLOTS; ++s)); do echo "--summarize /tmp/matches/slot$s/games.jsonl"; done)
