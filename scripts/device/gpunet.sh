#!/usr/bin/env bash
# On the GPU machine: networks trained on the records carried in .carry/pack (the newest record
# folders of .carry/records that fit, one archive each, picked by pack_records.sh: the loop's
# generations, gendata.sh's self-play, teacher games; the newest file of the newest loop generation
# is held out and every network's held-out loss is printed), training taking seconds here where the
# games cost hours:
#   gpu.jnn        a larger network for GPUs, BLOCKS x CHANNELS, fresh, EPOCHS passes over all records
#   VARIANTS       more networks, each "NAME:ARGS" (separated by ';'): `jiriki train ARGS` on the
#                  records, where ARGS may name the small network as SMALL (e.g. "lr02:--init SMALL
#                  --lr 0.02 --steps 1000 --window 160000"); they come back as NAME.jnn, to be
#                  matched elsewhere
# then plays MATCHES on the GPU (default: gpu.jnn against SMALL, the network it should replace, e.g.
# the loop's best 6x64): each "NAME:REF" (separated by ';') plays the trained NAME.jnn against the
# network file REF with `jiriki match`, GAMES games at TC (byoyomi BYOYOMI ms, or e.g. nodes=800),
# CONC games at once sharing the GPU, THREADS search threads each, openings from gpsshogi's book.
# On a machine of several GPUs the networks train side by side, one a GPU, and the matches play
# side by side, one a GPU with its share of the cores (each as on a machine of one GPU).
# The networks (in bf16 with BF16=1, as shipped; the matches play those files), the log and the
# matches' summaries and games (gpunet_matches.tar.gz) come back in $OUT (at most 8 files).
#
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/bin", ".carry/book" (or .carry/debs),
#                   ".carry/pack", DIR_OF_SMALL]:
#     bash scripts/device/gpunet.sh SMALL [GAMES]
# Environment: BLOCKS (10; 0 trains no gpu.jnn, only the variants), CHANNELS (128), EPOCHS (4),
# BATCH (512), LR (0.1), VARIANTS (none), KEEP (1; 0 brings back no variant's network, only the
# log), BF16 (0; 1 stores every network trained here with bf16 weights, `jiriki nn convert`), MATCHES,
# TC, RECORDS (the records: .tar.xz archives, or folders of records such as gendata.sh's
# /tmp/gendata/gendata-TAG in the same call; default ".carry/pack/*.tar.xz", what pack_records.sh
# picked), CONC (8), THREADS (1), BYOYOMI (300), SEED (1), GPUS (the GPUs used side by side: all),
# START_WITHIN (seconds after which a match starts no more pairs of games: 0, none);
# GAMES 0 plays no match.
set -uo pipefail
source scripts/device/env.sh
SMALL=$1 GAMES=${2:-40}
BLOCKS=${BLOCKS:-10} CHANNELS=${CHANNELS:-128} EPOCHS=${EPOCHS:-4} BATCH=${BATCH:-512} LR=${LR:-0.1}
CONC=${CONC:-8} THREADS=${THREADS:-1} BYOYOMI=${BYOYOMI:-300} SEED=${SEED:-1} VARIANTS=${VARIANTS:-}
KEEP=${KEEP:-1} RECORDS=${RECORDS:-.carry/pack/*.tar.xz} BF16=${BF16:-0} GPUS=${GPUS:-$(gpu_count)}
MATCHES=${MATCHES-$([[ $BLOCKS -gt 0 ]] && echo "gpu:$(realpath "$SMALL")")} TC=${TC:-byoyomi=$BYOYOMI}
[[ -f $SMALL ]] || { echo "no network $SMALL"; exit 1; }
SMALL=$(realpath "$SMALL")
start gpunet.log
step "machine"; machine
step "build"; build jiriki
J=$PWD/build-device/jiriki

step "records"
rm -rf /tmp/records /tmp/heldout && mkdir -p /tmp/records /tmp/heldout
for r in $RECORDS; do
  if [[ -d $r ]]; then cp -rl "$r" /tmp/records/ || exit 1  # (links: the held-out file moves out of the copy)
  else tar xJf "$r" -C /tmp/records || exit 1; fi
done
# The held-out file: the newest of the loop's newest generation (the same file as more records come),
# else the newest of gendata.sh's self-play (HELDOUT=selfplay: that one even with generations), else
# the newest of all.
HELD=$( ([[ ${HELDOUT:-} != selfplay ]] && ls /tmp/records/gen[0-9]*/*.hcpe3 2>/dev/null ||
  ls /tmp/records/gendata*/*.hcpe3 2>/dev/null || ls /tmp/records/*/*.hcpe3) | sort | tail -1)
mv "$HELD" /tmp/heldout/
echo "generations: $(ls /tmp/records | tr "\n" " ")"
echo "held out: $(basename "$HELD")"

# train NAME ARGS...: one network on the records, the held-out metrics and seconds printed, the
# network and its file kept in $OUT.
train() {
  local name=$1 t0=$SECONDS; shift
  echo "--- train $name: $*"
  "$J" train --data /tmp/records --test /tmp/heldout --seed "$SEED" --log-every 1000 --model-out "/tmp/$name.jnn" "$@" 2>&1 |
    grep -E "^(training|test|wrote|error)" | tail -6
  [[ -f /tmp/$name.jnn ]] || { echo "training $name wrote no network"; return 1; }
  [[ $BF16 == 1 ]] && "$J" nn convert "/tmp/$name.jnn" -o "/tmp/$name.jnn" --weights bf16
  [[ $name == gpu || $KEEP == 1 ]] && cp "/tmp/$name.jnn" "$OUT/$name.jnn"
  echo "--- $name: $((SECONDS - t0)) s"
}


step "the small network on the held-out file (its metrics: one step at a learning rate of 1e-30, no statistics update)"
"$J" train --data /tmp/heldout --test /tmp/heldout --init "$SMALL" --steps 1 --lr 1e-30 --bn-momentum 0 \
  --model-out /tmp/small_eval.jnn 2>&1 | grep -E "^test"

# Every network to train as "NAME:ARGS", gpu.jnn first.
TRAINS=()
[[ $BLOCKS -gt 0 ]] && TRAINS+=("gpu:--blocks $BLOCKS --channels $CHANNELS --epochs $EPOCHS --batch $BATCH --lr $LR --warmup-steps 200")
IFS=';' read -ra VARIANT_LIST <<< "$VARIANTS"
TRAINS+=("${VARIANT_LIST[@]}")
train_one() { local a; read -ra a <<< "${1#*:}"; train "${1%%:*}" "${a[@]/#SMALL/$SMALL}"; }
step "train ${#TRAINS[@]} network(s), $GPUS at a time"
side_by_side "$GPUS" train_one "${TRAINS[@]}"
[[ $BLOCKS -gt 0 && ! -f /tmp/gpu.jnn ]] && exit 1
[[ $GAMES -gt 0 && -n $MATCHES ]] || exit 0

# Each network through isready once: cuDNN's choices for its shapes are kept on disk for the games.
declare -A NETS=()
IFS=';' read -ra MATCH_LIST <<< "$MATCHES"
for m in "${MATCH_LIST[@]}"; do NETS[/tmp/${m%%:*}.jnn]=1 NETS[${m#*:}]=1; done
for net in "${!NETS[@]}"; do
  step "warm-up: $(basename "$net") through isready"
  printf 'usi\nsetoption name ModelFile value %s\nsetoption name Backend value cuda\nsetoption name Threads value %s\nisready\nquit\n' \
    "$net" "$THREADS" | "$J" | grep -E "readyok|info string" | tail -2
done
# The openings: gpsshogi's book, carried converted (.carry/book/joseki.db.xz, 0.2 MB) or made from its .deb.
if [[ -f .carry/book/joseki.db.xz ]]; then
  xz -dc .carry/book/joseki.db.xz > /tmp/joseki.db
else
  source scripts/device/engines.sh
  unpack_engines "$J" > /dev/null
fi

# play NAME:REF: one match, in /tmp/match-NAME-REF.
play() {
  local name=${1%%:*} ref=${1#*:}
  local tag=$name-$(basename "$ref" .jnn)
  echo "--- $name.jnn against $(basename "$ref"): $GAMES games, $CONC at once, $TC, $THREADS threads each${CUDA_VISIBLE_DEVICES:+, GPU $CUDA_VISIBLE_DEVICES}"
  "$J" match --engine "cmd=$J name=$name option.ModelFile=/tmp/$name.jnn option.Backend=cuda option.Threads=$THREADS" \
    --engine "cmd=$J name=$(basename "$ref" .jnn) option.ModelFile=$ref option.Backend=cuda option.Threads=$THREADS" \
    --games "$GAMES" --concurrency "$CONC" --tc $TC --margin 1000 --book /tmp/joseki.db --book-plies 16 \
    --seed "$SEED" --start-within "${START_WITHIN:-0}" --out "/tmp/match-$tag" 2>&1 | grep -v "^games "
}
step "${#MATCH_LIST[@]} match(es), $GPUS at a time"
rm -rf /tmp/match-*
side_by_side "$GPUS" play "${MATCH_LIST[@]}"
tar czf "$OUT/gpunet_matches.tar.gz" -C /tmp $(cd /tmp && ls -d match-*/summary.json match-*/games.jsonl)
