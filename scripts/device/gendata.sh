#!/usr/bin/env bash
# On the GPU machine: self-play records from one network for SECONDS on every GPU, with the loop's recipe (loop_rl.json: 100 playouts a move, 400 on the quarter of moves
# that are training targets, resignation below 5%), packed into independent archives of at most
# 15 MB (the device returns files up to 16 MiB) in /tmp/gendata-parts, of which the first RETURN
# come back as $OUT/gendata-TAG-NN.tar.xz. Each archive holds part of one folder, gendata-TAG; unpack
# here with
#   for f in gendata-TAG-*.tar.xz; do tar xJf $f -C .carry/records; done
# (pack_records.sh then packs the folder for gpunet.sh). In the same call, gpunet.sh can train on all
# of it at once: RECORDS="/tmp/gendata/gendata-TAG ..." (a folder is taken as it is).
#
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/bin", DIR_OF_NET]:
#     bash scripts/device/gendata.sh NET SECONDS
# Environment: PLAYOUTS (100), FULL (400), ARGS (more `jiriki selfplay` options, "--resign 0.05"),
# SEED (the date), TAG (the date and time), GPUS (the first GPUS GPUs: default all, one self-play
# process each), RETURN (8: the archives that come back; the device returns at most 8 files, so leave
# room for the other scripts'; 0 packs nothing, for a training in the same call).
set -uo pipefail
source scripts/device/env.sh
NET=$1 SECS=$2
PLAYOUTS=${PLAYOUTS:-100} FULL=${FULL:-400} ARGS=${ARGS:---resign 0.05} RETURN=${RETURN:-8}
SEED=${SEED:-$(date +%s)} TAG=${TAG:-$(date +%Y%m%d-%H%M%S)} GPUS=${GPUS:-$(gpu_count)}
[[ -f $NET ]] || { echo "no network $NET"; exit 1; }
start "gendata-$TAG.log"
step "machine"; machine
step "build"; build jiriki
J=$PWD/build-device/jiriki
DIR=/tmp/gendata/gendata-$TAG PARTS=/tmp/gendata-parts
rm -rf /tmp/gendata "$PARTS" && mkdir -p "$DIR" "$PARTS"
step "self-play: $(basename "$NET") for $SECS s on $GPUS GPU(s), $PLAYOUTS playouts a move, $FULL on training targets, $ARGS"
read -ra MORE <<< "$ARGS"
# One process a GPU with its share of the cores, each with its own seed and file names, as on
# machines of one GPU. Measured on 4 H200s (bench/results/gpunet_2026-11-27_stop39_x4.txt): one
# process on all four at batch 256 made 958,101 nodes/s and 50,737 training positions in 180 s, four
# at batch 128 (ARGS) 810,000 nodes/s and 159,943 in 230 s. Games in flight when the time is up are
# lost, and each GPU keeps 12 x 1.25 x batch of them going: short runs want a smaller batch.
selfplay_on() {
  echo "--- GPU $1"
  "$J" selfplay --model "$NET" --out "$DIR" --name "gendata-$TAG-g$1" --seconds "$SECS" --playouts "$PLAYOUTS" \
    --playout-cap-full "$FULL" --backend cuda --seed "$SEED$1" --report-seconds 60 "${MORE[@]}" 2>&1 | tail -9
}
side_by_side "$GPUS" selfplay_on $(seq 0 $((GPUS - 1)))
echo "all GPUs: $(cat /tmp/side-*.out | grep -o "training positions [0-9]*" | awk '{s += $3} END {print s}') training positions"
((RETURN > 0)) || exit 0

# pack NAME FILE...: one archive of the files (names relative to /tmp/gendata); one over 15 MB is
# made again as two of half the files each.
pack() {
  local name=$1; shift
  tar cf - -C /tmp/gendata "$@" | xz -T0 -6 > "$PARTS/$name.tar.xz"
  if (($(stat -c %s "$PARTS/$name.tar.xz") > 15000000 && $# > 1)); then
    rm "$PARTS/$name.tar.xz"
    local half=$(($# / 2))
    pack "${name}a" "${@:1:half}"
    pack "${name}b" "${@:half+1}"
  fi
}
step "pack"
rm -f "$DIR"/*.jsonl.tmp
mapfile -t FILES < <(cd /tmp/gendata && ls -d gendata-"$TAG"/*)
# Groups of 60 MB of records (about 25 MB compressed: split once), in parallel.
# (`wait` names its jobs: a bare one would wait for start's tee as well.)
group=() bytes=0 n=0 jobs=()
for f in "${FILES[@]}"; do
  group+=("$f") bytes=$((bytes + $(stat -c %s "/tmp/gendata/$f")))
  if ((bytes > 60000000)); then
    pack "gendata-$TAG-$(printf %02d $n)" "${group[@]}" &
    jobs+=($!) group=() bytes=0 n=$((n + 1))
  fi
done
if ((${#group[@]})); then pack "gendata-$TAG-$(printf %02d $n)" "${group[@]}" & jobs+=($!); fi
wait "${jobs[@]}"
ls "$PARTS"/*.tar.xz | head -"$RETURN" | xargs -r cp -t "$OUT"
echo "$(ls "$PARTS" | wc -l) archives, $(du -sm "$PARTS" | cut -f1) MB; back in \$OUT: $(ls "$OUT" | grep -c "^gendata-$TAG-")"
