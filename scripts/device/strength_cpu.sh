#!/usr/bin/env bash
# On the GPU machine's cores: the CPU network against gpsshogi (1 thread) as the CPU bar plays it,
# jiriki on the CPU backend with 2 search threads, byoyomi 1 s, openings from gpsshogi's book, with
# nproc/2 matches side by side, each pinned (taskset) to 2 cores of its own that both of its engines
# share, as on a 2-core machine; each match plays GAMES/(nproc/2) games (pairs of colours). The
# matches' games are then counted together.
#
# The matches outlast one command (10 minutes): the first call builds, starts them in a process
# session of their own (setsid, so they outlive the command while the machine stays warm) and waits
# up to WAIT_S seconds (default 540); a later call on the same warm machine finds them running and
# waits again. The call that sees them all finished prints every match and the pooled result. Each
# call brings back matches.tar.gz (the games so far).
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/debs", ".carry/dnnl"] (oneDNN: without it the
#   build has only the own kernels, several times slower on that machine's Intel Xeon):
#     SEED=S PRECISION=auto bash scripts/device/strength_cpu.sh NETWORK.jnn GAMES
set -uo pipefail
source scripts/device/env.sh
NET=$(realpath "$1") GAMES=$2
SEED=${SEED:-1} BYOYOMI=${BYOYOMI:-1000} NAME=${NAME:-$(basename "$1" .jnn)} PRECISION=${PRECISION:-auto}
SLOTS=$(($(nproc) / 2))
((GAMES % (2 * SLOTS) == 0)) || { echo "GAMES must be a multiple of 2 x $SLOTS (pairs of games in each match)"; exit 1; }
M=/tmp/matches
start "${LOG:-strength_cpu.log}"
trap 'tar czf "$OUT/matches.tar.gz" -C /tmp matches' EXIT
J=$PWD/build-device/jiriki
if [[ ! -f $M/started ]]; then
  rm -rf $M && mkdir -p $M
  step "machine"; machine
  step "build"; build jiriki
  source scripts/device/engines.sh
  unpack_engines "$J"
  "$J" version
  step "$NAME (CPU, 2 threads, precision $PRECISION) against gpsshogi (1 thread): $GAMES games, $SLOTS matches on 2 cores each, byoyomi $BYOYOMI ms"
  for ((s = 0; s < SLOTS; ++s)); do
    setsid taskset -c "$((2 * s)),$((2 * s + 1))" bash -c '"$@"; touch '"$M/slot$s.done" _ "$J" match \
      --engine "cmd=$J name=$NAME option.ModelFile=$NET option.Backend=cpu option.Threads=2 option.Precision=$PRECISION" \
      --engine "cmd=$GPS/gpsusi name=gpsshogi env.GPS_THREADS=1" --games $((GAMES / SLOTS)) --concurrency 1 \
      --tc "byoyomi=$BYOYOMI" --margin 1000 --book /tmp/joseki.db --book-plies 16 --seed "$SEED$s" \
      --out "$M/slot$s" > "$M/slot$s.out" 2>&1 < /dev/null &
  done
  touch $M/started
else
  step "the matches started by an earlier call: $(ls $M/slot*.done 2>/dev/null | wc -l) of $SLOTS finished"
fi
finished() { (($(ls $M/slot*.done 2>/dev/null | wc -l) == SLOTS)); }
deadline=$((SECONDS + ${WAIT_S:-540}))
while ! finished && ((SECONDS < deadline)); do
  sleep 10
  if ((SECONDS % 60 < 10)); then
    echo "$(date +%T): $(cat $M/slot*/games.jsonl 2>/dev/null | wc -l) of $GAMES games played"
  fi
done
if ! finished; then
  echo "$(cat $M/slot*/games.jsonl 2>/dev/null | wc -l) of $GAMES games played; call again on the warm machine to go on"
  "$J" match $(for f in $M/slot*/games.jsonl; do [[ -s $f ]] && echo "--summarize $f"; done) 2>&1 | tail -4
  exit 0
fi
for ((s = 0; s < SLOTS; ++s)); do grep -v "^games " "$M/slot$s.out" | tail -3; done
step "the $SLOTS matches together"
"$J" match $(for ((s = 0; s < SLOTS; ++s)); do echo "--summarize $M/slot$s/games.jsonl"; done)
