#!/usr/bin/env bash
# On the GPU machine's cores: the CPU network against gpsshogi (1 thread) as the CPU bar plays it,
# jiriki on the CPU backend with 2 search threads, byoyomi 1 s, openings from gpsshogi's book: one
# match of nproc/2 games at once, each game's two engines confined to 2 cores of their own
# (`--cpus-per-game 2`), as on a 2-core machine.
#
# The match outlasts one command (10 minutes): the first call builds, starts it in a process session
# of its own (setsid, so that it outlives the command while the machine stays warm) and waits up to
# WAIT_S seconds (default 540); a later call on the same warm machine finds it running and waits
# again. The call that sees it finished prints its result. Each call brings back matches.tar.gz (the
# games so far).
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/debs", ".carry/dnnl"] (oneDNN: without it the
#   build has only the own kernels, several times slower on that machine's Intel Xeon):
#     SEED=S PRECISION=auto bash scripts/device/strength_cpu.sh NETWORK.jnn GAMES
set -uo pipefail
source scripts/device/env.sh
NET=$(realpath "$1") GAMES=$2
SEED=${SEED:-1} BYOYOMI=${BYOYOMI:-1000} NAME=${NAME:-$(basename "$1" .jnn)} PRECISION=${PRECISION:-auto}
SLOTS=$(($(nproc) / 2))
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
  step "$NAME (CPU, 2 threads, precision $PRECISION) against gpsshogi (1 thread): $GAMES games, $SLOTS at once on 2 cores each, byoyomi $BYOYOMI ms"
  setsid bash -c '"$@"; touch '"$M/done" _ "$J" match \
    --engine "cmd=$J name=$NAME option.ModelFile=$NET option.Backend=cpu option.Threads=2 option.Precision=$PRECISION" \
    --engine "cmd=$GPS/gpsusi name=gpsshogi env.GPS_THREADS=1" --games "$GAMES" --concurrency $SLOTS --cpus-per-game 2 \
    --tc "byoyomi=$BYOYOMI" --margin 1000 --book /tmp/joseki.db --book-plies 16 --seed "$SEED" \
    --out "$M/games" > "$M/match.out" 2>&1 < /dev/null &
  touch $M/started
else
  step "the match started by an earlier call: $(cat $M/games/games.jsonl 2>/dev/null | wc -l) of $GAMES games played"
fi
deadline=$((SECONDS + ${WAIT_S:-540}))
while [[ ! -f $M/done ]] && ((SECONDS < deadline)); do
  sleep 10
  if ((SECONDS % 60 < 10)); then
    echo "$(date +%T): $(cat $M/games/games.jsonl 2>/dev/null | wc -l) of $GAMES games played"
  fi
done
if [[ ! -f $M/done ]]; then
  echo "$(cat $M/games/games.jsonl 2>/dev/null | wc -l) of $GAMES games played; call again on the warm machine to go on"
  [[ -s $M/games/games.jsonl ]] && "$J" match --summarize $M/games/games.jsonl 2>&1 | tail -4
  exit 0
fi
grep -v "^games " "$M/match.out"
