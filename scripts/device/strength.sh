#!/usr/bin/env bash
# On the GPU machine: issue 22's GPU bar. Builds jiriki with CUDA and plays it, network NET on the
# GPU, against each OPPONENT through `jiriki match` at byoyomi BYOYOMI ms, from openings drawn from
# gpsshogi's book. CONC games at once: the jiriki instances share the GPU; in each game one engine
# thinks at a time, so CONC x the larger of THREADS and the opponent's threads should not pass the
# machine's 16 cores. gpsshogi thinks for its whole byoyomi, so answers may come up to a second late
# (--margin 1000, for both engines, as the README's example). Each match's summary (with each engine's
# time and nodes a move, and nodes/s) is printed and kept in $OUT/LOG, the games of every match (JSON
# lines and CSA) in $OUT/matches.tar.gz. Under a time limit, give START_WITHIN (seconds: pairs of
# games start only that soon, and every pair started is played out; leave the longest game's time,
# ~240 s at byoyomi 1 s, before the limit). A match killed anyway (by `timeout` or the call's limit)
# still leaves its finished games in $OUT/matches.tar.gz (an exit trap packs them), and
# `jiriki match --summarize matches/OPPONENT/games.jsonl` counts them.
#
#   run with carry [".carry/debs", ".carry/include.tar.xz", ".carry/lib", DIR_OF_NET]:
#     bash scripts/device/strength.sh NET GAMES [OPPONENT...]      OPPONENT: gpsshogi (default),
#                                                                  gpsshogi8 (8 threads), fairy-stockfish,
#                                                                  or a .jnn file: jiriki with that network
#                                                                  on the GPU, as NET (carry its folder)
# Environment: GPUS (1: the machine's first GPU and all its cores; N: N matches side by side, one a
# GPU with GAMES/N of the games and cores/N of the cores, each as on a machine of one GPU, then
# counted together by `jiriki match --summarize`), CONC (4: games at once on each GPU), THREADS (jiriki's search threads: 3, or CPUS_PER_GAME when
# that is set, the game's own cores, which gpsshogi leaves idle while jiriki thinks), BYOYOMI (1000), TC (the time control,
# byoyomi=BYOYOMI; e.g. nodes=800 between two networks), BOOK_PLIES (16), SEED (1), NAME (jiriki's
# name in the results, the network's file name), LOG (strength.log: another name keeps two runs'
# logs apart), OPTIONS (more USI options for NET's engine only, as `jiriki match --engine` fields, e.g.
# "option.Softmax_Temperature=120": with the same network as the opponent and another NAME, a match
# of search settings; or "option.BatchSize=256", the setting of the GPU strength matches),
# CPUS_PER_GAME (each game's two engines confined to that many cores of their own, `jiriki match
# --cpus-per-game`: 8 for gpsshogi8, as its bar asks; CONC x it must fit a GPU's share of the cores). jiriki's search threads sleep
# while the GPU works (JIRIKI_CUDA_SPIN=0): spinning, they took cores from the other games' gpsshogi
# (175,000 nodes/s against 193,000-233,000; bench/results/match_2026-11-27_gpu_gpu-v4_bar.txt).
#   e.g. TC=nodes=800 CONC=14 THREADS=1 NAME=t120 OPTIONS=option.Softmax_Temperature=120 \
#        bash scripts/device/strength.sh networks/gpu.jnn 100 networks/gpu.jnn
# or "nodes=N", NET's own node count under TC=nodes=M (networks compared at the playouts each makes in
# the same time on a CPU, from `jiriki bench search --backend cpu` there). DETACH=1 (below): the
# matches go on between calls on the warm machine, e.g. the GPU bar's 64 games over three calls:
#   DETACH=1 START_WITHIN=1300 GPUS=2 CONC=2 CPUS_PER_GAME=8 SEED=S bash scripts/device/strength.sh networks/gpu.jnn 64 gpsshogi8
set -uo pipefail
source scripts/device/env.sh
NET=$1 GAMES=$2; shift 2
OPPONENTS=${*:-gpsshogi}
GPUS=${GPUS:-1} CONC=${CONC:-4} THREADS=${THREADS:-${CPUS_PER_GAME:-3}} BYOYOMI=${BYOYOMI:-1000} BOOK_PLIES=${BOOK_PLIES:-16} SEED=${SEED:-1}
TC=${TC:-byoyomi=$BYOYOMI}
NAME=${NAME:-$(basename "$NET" .jnn)} OPTIONS=${OPTIONS:-}
[[ -f $NET ]] || { echo "no network $NET"; exit 1; }
((GAMES % (2 * GPUS) == 0)) || { echo "GAMES must be a multiple of 2 x GPUS (pairs of games on each GPU)"; exit 1; }
NET=$(realpath "$NET")
start "${LOG:-strength.log}"
# DETACH=1: the matches outlive one command (10 minutes). The first call starts this script again in
# a process session of its own (setsid: it lives on while the machine stays warm) and waits up to
# WAIT_S seconds (540); a later call on the warm machine finds it running and waits again; the call
# that sees it finished prints its whole log. Every call brings back matches.tar.gz, the games so far.
# With START_WITHIN about the calls' total, every pair of games started is played out.
if [[ -n ${DETACH:-} ]]; then
  D=/tmp/strength-detached
  trap 'tar czf "$OUT/matches.tar.gz" -C /tmp matches 2> /dev/null' EXIT
  if [[ ! -f $D/started ]]; then
    rm -rf $D /tmp/matches && mkdir -p $D
    setsid bash -c 'DETACH= OUT=$0/out bash "$@" > $0/log 2>&1; touch $0/done' "$D" "$0" "$NET" "$GAMES" "$@" \
      < /dev/null > /dev/null 2>&1 &
    touch $D/started
    step "started in the background: $NAME against ${OPPONENTS}, $GAMES games (log $D/log)"
  else
    step "started by an earlier call: $(cat /tmp/matches/*/games.jsonl 2> /dev/null | wc -l) of $GAMES games played"
  fi
  deadline=$((SECONDS + ${WAIT_S:-540}))
  while [[ ! -f $D/done ]] && ((SECONDS < deadline)); do
    sleep 10
    ((SECONDS % 60 < 10)) && echo "$(date +%T): $(cat /tmp/matches/*/games.jsonl 2> /dev/null | wc -l) of $GAMES games played"
  done
  if [[ ! -f $D/done ]]; then
    echo "$(cat /tmp/matches/*/games.jsonl 2> /dev/null | wc -l) of $GAMES games played; call again on the warm machine to go on"
    exit 0
  fi
  cat $D/log
  exit 0
fi
rm -rf /tmp/matches && mkdir -p /tmp/matches
trap 'tar czf "$OUT/matches.tar.gz" -C /tmp matches' EXIT
step "machine"; machine
step "build"; build jiriki
J=$PWD/build-device/jiriki
# One engine through isready first: it tunes cuDNN's choices for the network's shapes and keeps them
# on disk (~/.cache/jiriki), so the CONC engines of the first games start from the file instead of
# tuning all at once against the runner's start-up timeout.
for net in "$NET" $(printf '%s\n' "$@" | grep '\.jnn$'); do
  step "warm-up: $(basename "$net") through isready"
  # (with OPTIONS' USI options, e.g. a BatchSize whose shapes are then tuned here)
  time { printf 'usi\nsetoption name ModelFile value %s\nsetoption name Backend value cuda\nsetoption name Threads value %s\n' \
    "$(realpath "$net")" "$THREADS"
    for o in $OPTIONS; do [[ $o == option.*=* ]] && o=${o#option.} && printf 'setoption name %s value %s\n' "${o%%=*}" "${o#*=}"; done
    printf 'isready\nquit\n'; } | "$J" | grep -E "readyok|info string" | tail -3
done
source scripts/device/engines.sh
unpack_engines "$J"
# play DIR GAMES SEED: one match of NET's engine against ENGINE.
play() {
  "$J" match --engine "cmd=$J name=$NAME env.JIRIKI_CUDA_SPIN=0 option.ModelFile=$NET option.Backend=cuda option.Threads=$THREADS${OPTIONS:+ $OPTIONS}" \
    --engine "$ENGINE" --games "$2" --concurrency "$CONC" --tc "$TC" --margin 1000 --book /tmp/joseki.db \
    --book-plies "$BOOK_PLIES" --seed "$3" --start-within "${START_WITHIN:-0}" ${CPUS_PER_GAME:+--cpus-per-game "$CPUS_PER_GAME"} \
    --out "$1" 2>&1 | grep -v "^games "
}
play_share() { echo "--- GPU $1"; play "$dir-gpu$1" $((GAMES / GPUS)) "$SEED$1"; }
for opp in $OPPONENTS; do
  case $opp in
    gpsshogi) ENGINE="cmd=$GPS/gpsusi name=gpsshogi env.GPS_THREADS=1" ;;
    gpsshogi8) ENGINE="cmd=$GPS/gpsusi name=gpsshogi8 env.GPS_THREADS=8" ;;
    fairy-stockfish) ENGINE="cmd=$GPS/fairy-stockfish name=fairy-stockfish option.Threads=1" ;;
    *.jnn) [[ -f $opp ]] || { echo "no network $opp"; exit 1; }
      ENGINE="cmd=$J name=$(basename "$opp" .jnn) env.JIRIKI_CUDA_SPIN=0 option.ModelFile=$(realpath "$opp") option.Backend=cuda option.Threads=$THREADS" ;;
    *) echo "unknown opponent $opp"; exit 1 ;;
  esac
  dir=/tmp/matches/$(basename "$opp" .jnn)
  step "$NAME (GPU, $THREADS threads${OPTIONS:+, $OPTIONS}) against $opp: $GAMES games, $CONC at once on each of $GPUS GPU(s), $TC"
  if ((GPUS == 1)); then
    play "$dir" "$GAMES" "$SEED"
  else
    # One match a GPU, each with its share of the games and of the cores and its own openings (seed
    # SEED followed by the GPU's number), then all their games counted together.
    side_by_side "$GPUS" play_share $(seq 0 $((GPUS - 1)))
    step "$NAME against $opp: the $GPUS matches together"
    "$J" match $(for g in $(seq 0 $((GPUS - 1))); do echo "--summarize $dir-gpu$g/games.jsonl"; done)
  fi
done
