#!/usr/bin/env bash
# On the GPU machine: teacher games of gpsshogi against itself on the CPU cores, with jiriki's own
# match runner (the CPU-only build carried in .carry/bin, so they start at once), while the CUDA
# jiriki builds; then trains networks on the GPU on every teacher game so far (this run's and the
# earlier ones carried in .carry/data). Prepare .carry here first: scripts/device/prepare.sh.
#
#   run with carry [".carry"]:  bash scripts/device/teacher.sh GAME_SECONDS
#
# gpsshogi is deterministic, so the second player searches 4/5 of the nodes of the first: otherwise each
# colour-swapped pair would be one game played twice.
# Environment: NODES (gpsshogi's node limit a move, 30000), CONC (games at once, 14), BOOK_PLIES
# (plies of each opening drawn from gpsshogi's own book, 24), NETS ("6x64 10x128": networks to
# train), TRAIN_STEPS (per network, 4000), STEPS ("teacher train" by default; "selfplay" adds GPU
# self-play of MODEL, default the shipped networks/cpu.jnn, at PLAYOUTS (100) with SP_THREADS (6)
# workers from the end of the build to the end of the teacher games, into $OUT/selfplay: the GPU is
# otherwise idle while gpsshogi plays).
set -uo pipefail
source scripts/device/env.sh
SECS=${1:-360}
NODES=${NODES:-30000} CONC=${CONC:-13} BOOK_PLIES=${BOOK_PLIES:-24}
NETS=${NETS:-6x64 10x128} TRAIN_STEPS=${TRAIN_STEPS:-4000} STEPS=${STEPS-teacher train}
export CPATH=$PWD/.carry/include
start teacher.log
step "machine"; machine

GPS=/tmp/gps
step "gpsshogi from the carried .debs"
mkdir -p $GPS/home
for d in .carry/debs/*.deb; do dpkg -x "$d" $GPS; done
ln -sfn $GPS/usr/share/gpsshogi-data/data $GPS/home/data
cat > $GPS/gpsusi <<EOS
#!/bin/sh
export LD_LIBRARY_PATH=$GPS/usr/lib/x86_64-linux-gnu OSL_HOME=$GPS/home
exec $GPS/usr/games/gpsusi --node-count-hard-limit \${GPS_NODES:-$NODES} -N 1 "\$@"
EOS
chmod +x $GPS/gpsusi
LD_LIBRARY_PATH=$GPS/usr/lib/x86_64-linux-gnu OSL_HOME=$GPS/home $GPS/usr/games/gpsusi --health-check 2>&1 | tail -2
.carry/bin/jiriki-cpu book import $GPS/usr/share/gpsshogi-data/data/joseki.dat -o /tmp/joseki.db

TAG=$(date +%Y%m%d-%H%M%S)
if [[ " $STEPS " == *" teacher "* ]]; then
  step "teacher games for $SECS s: gpsshogi x2 at $NODES nodes, $CONC at once, openings $BOOK_PLIES plies from its book"
  timeout -s INT "$SECS" .carry/bin/jiriki-cpu match --engine "cmd=$GPS/gpsusi name=gps-a" --engine "cmd=$GPS/gpsusi name=gps-b env.GPS_NODES=$((NODES * 4 / 5))" \
    --games 100000 --concurrency "$CONC" --tc byoyomi=60000 --timeout 120000 --book /tmp/joseki.db --book-plies "$BOOK_PLIES" \
    --seed "$(date +%s)" --hcpe3 "$OUT/teacher-$TAG.hcpe3" --out /tmp/teacher > "$OUT/teacher-$TAG.log" 2>&1 &
  TEACHER=$!
fi

step "build (CUDA) beside the teacher games"
nice -n 10 bash -c "source scripts/device/env.sh; configure() { cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCUDNN_INCLUDE_DIR=$CUDNN_INC -DCUDNN_LIBRARY=$CUDNN_LIB -DJIRIKI_TESTS=OFF \
  -DJIRIKI_BOOST_INCLUDE_DIR=$PWD/.carry/include -DJIRIKI_BOOST_FILESYSTEM=$PWD/.carry/lib/libboost_filesystem.a \
  ${NCCL_INC:+-DNCCL_INCLUDE_DIR=$NCCL_INC} ${NCCL_LIB:+-DNCCL_LIBRARY=$NCCL_LIB} | grep -E 'jiriki|Error|error'; }; \
  configure && cmake --build build-device -j 3 --target jiriki > $OUT/build.log 2>&1" || { grep -E "error|FAILED" "$OUT/build.log" | head -30; }

if [[ " $STEPS " == *" selfplay "* ]]; then
  LEFT=$((SECS - SECONDS + 5))
  step "self-play of ${MODEL:-networks/cpu.jnn} on the GPU for $LEFT s beside the teacher games"
  JIRIKI_CUDNN_CANDIDATES=4 build-device/jiriki selfplay --backend cuda --model "${MODEL:-networks/cpu.jnn}" \
    --out "$OUT/selfplay" --seconds "$LEFT" --playouts "${PLAYOUTS:-100}" --threads "${SP_THREADS:-6}" \
    --report-seconds 60 --seed "$(date +%s)" 2>&1 | tail -4
  build-device/jiriki records summary "$OUT"/selfplay/*.hcpe3 | head -8
fi

if [[ -n "${TEACHER:-}" ]]; then
  wait $TEACHER
  tail -8 "$OUT/teacher-$TAG.log"
  build-device/jiriki records summary "$OUT/teacher-$TAG.hcpe3" | head -8
fi

if [[ " $STEPS " == *" train "* ]]; then
  DATA=$(ls .carry/data/*.hcpe3 "$OUT"/teacher-*.hcpe3 2>/dev/null)
  echo "data: $DATA"
  for net in $NETS; do
    step "train $net on the teacher games"
    build-device/jiriki train --data $DATA --backend cuda --blocks ${net%x*} --channels ${net#*x} --batch 256 \
      --steps "$TRAIN_STEPS" --optimizer sgd --lr 0.05 --warmup-steps 200 --val-lambda 0.5 --loader-threads 4 \
      --log-every 500 --model-out "$OUT/net$net.jnn" --checkpoint "/tmp/net$net.ckpt" --log "$OUT/train$net.jsonl" 2>&1 | tail -6
  done
fi
ls -la "$OUT"
