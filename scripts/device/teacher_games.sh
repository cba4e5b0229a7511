#!/usr/bin/env bash
# On the GPU machine's CPU cores: teacher games of gpsshogi against itself through `jiriki match`,
# for SECONDS, into $OUT/teacher-TAG.hcpe3 (its log beside it). gpsshogi comes from the Debian
# .debs carried in .carry/debs, unpacked by scripts/device/engines.sh.
# It runs in the foreground: start it with & beside GPU work (the GPU is idle while gpsshogi plays,
# and the cores are idle while the GPU trains).
#
#   bash scripts/device/teacher_games.sh SECONDS [JIRIKI]
#
# JIRIKI runs the match: default .carry/bin/jiriki-cpu when carried (it starts at once, while the
# CUDA build compiles), else build-device/jiriki. gpsshogi is deterministic, so the second player
# searches 4/5 of the nodes of the first: otherwise each colour-swapped pair would be one game
# played twice. Environment: NODES (gpsshogi's node limit a move, 30000), CONC (games at once, 13),
# BOOK_PLIES (plies of each opening drawn from gpsshogi's own book, 24), NICE (the games' priority,
# 0; 19 beside GPU work that is being timed), OPENINGS (a file of start positions to play from
# instead of the book, e.g. the positions of jiriki's own games: `jiriki records convert --to
# openings`; gpsshogi's games alone never reach the positions a weaker player's mistakes leave, so
# a network taught on them alone cannot judge those).
set -uo pipefail
SECS=$1
JIRIKI=${2:-$([[ -x .carry/bin/jiriki-cpu ]] && echo .carry/bin/jiriki-cpu || echo build-device/jiriki)}
NODES=${NODES:-30000} CONC=${CONC:-13} BOOK_PLIES=${BOOK_PLIES:-24} NICE=${NICE:-0}
OUT=${OUT:-/tmp/jiriki-out}
mkdir -p "$OUT"
source scripts/device/engines.sh
unpack_engines "$JIRIKI"
TAG=$(date +%Y%m%d-%H%M%S)
START=(--book /tmp/joseki.db --book-plies "$BOOK_PLIES") FROM="openings $BOOK_PLIES plies from its book"
[[ -n "${OPENINGS:-}" ]] && START=(--openings "$OPENINGS") FROM="openings from $OPENINGS"
echo "teacher games for $SECS s: gpsshogi x2 at $NODES nodes, $CONC at once, $FROM, nice $NICE"
timeout -s INT "$SECS" nice -n "$NICE" "$JIRIKI" match --engine "cmd=$GPS/gpsusi name=gps-a env.GPS_NODES=$NODES" \
  --engine "cmd=$GPS/gpsusi name=gps-b env.GPS_NODES=$((NODES * 4 / 5))" --games 100000 --concurrency "$CONC" \
  --tc byoyomi=60000 --timeout 120000 "${START[@]}" --seed "$(date +%s)" \
  --hcpe3 "$OUT/teacher-$TAG.hcpe3" --out /tmp/teacher > "$OUT/teacher-$TAG.log" 2>&1
tail -1 "$OUT/teacher-$TAG.log"
