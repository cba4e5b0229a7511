#!/usr/bin/env bash
# On the GPU machine: self-play records from one network for SECONDS, with the loop's recipe
# (loop_rl.json: 100 playouts a move, 400 on the quarter of moves that are training targets,
# resignation below 5%), brought back as $OUT/gendata-TAG.tar.xz.NN parts of at most 15 MB each
# (the device returns files up to 16 MiB). Unpack here with
#   cat gendata-TAG.tar.xz.* | tar xJf - -C .carry/records
# which adds one folder, gendata-TAG, beside the loop's generations (pack_records.sh then packs it
# for gpunet.sh). In the same call, gpunet.sh can train on it at once: RECORDS="... $OUT/gendata-TAG.tar.xz.00".
#
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/bin", DIR_OF_NET]:
#     bash scripts/device/gendata.sh NET SECONDS
# Environment: PLAYOUTS (100), FULL (400), ARGS (more `jiriki selfplay` options, "--resign 0.05"),
# SEED (the date), TAG (the date and time).
set -uo pipefail
source scripts/device/env.sh
NET=$1 SECS=$2
PLAYOUTS=${PLAYOUTS:-100} FULL=${FULL:-400} ARGS=${ARGS:---resign 0.05}
SEED=${SEED:-$(date +%s)} TAG=${TAG:-$(date +%Y%m%d-%H%M%S)}
[[ -f $NET ]] || { echo "no network $NET"; exit 1; }
start "gendata-$TAG.log"
step "machine"; machine
step "build"; build jiriki
J=$PWD/build-device/jiriki
DIR=/tmp/gendata/gendata-$TAG
rm -rf /tmp/gendata && mkdir -p "$DIR"
step "self-play: $(basename "$NET") for $SECS s, $PLAYOUTS playouts a move, $FULL on training targets, $ARGS"
read -ra MORE <<< "$ARGS"
"$J" selfplay --model "$NET" --out "$DIR" --name "gendata-$TAG" --seconds "$SECS" --playouts "$PLAYOUTS" \
  --playout-cap-full "$FULL" --backend cuda --seed "$SEED" --report-seconds 60 "${MORE[@]}" 2>&1 | tail -12
step "pack"
rm -f "$DIR"/*.jsonl.tmp
tar cf - -C /tmp/gendata "gendata-$TAG" | xz -T0 -6 | split -b 15000000 -d - "$OUT/gendata-$TAG.tar.xz."
ls -l "$OUT"
