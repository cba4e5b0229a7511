#!/usr/bin/env bash
# On the GPU machine: teacher games of gpsshogi against itself on the CPU cores
# (scripts/device/teacher_games.sh, with the CPU-only jiriki carried in .carry/bin, so they start at
# once), while the CUDA jiriki builds and then trains networks on the GPU on the teacher games of the
# earlier runs (carried in .carry/data). Prepare .carry here first: scripts/device/prepare.sh.
#
#   run with carry [".carry/data", ".carry/bin", ".carry/debs", ".carry/include", ".carry/lib"]:
#     bash scripts/device/teacher.sh GAME_SECONDS
#
# Environment: NODES, CONC, BOOK_PLIES as teacher_games.sh takes them; NETS ("6x64 10x128": networks to
# train), TRAIN_STEPS (per network, 4000), TEST and EVAL_EVERY (held-out records, see below), STEPS ("teacher train" by default; "selfplay" adds GPU
# self-play of MODEL, default the shipped networks/cpu.jnn, at PLAYOUTS (100) with SP_THREADS (6)
# workers from the end of the build to the end of the teacher games, into $OUT/selfplay: the GPU is
# otherwise idle while gpsshogi plays).
set -uo pipefail
source scripts/device/env.sh
SECS=${1:-360}
NETS=${NETS:-6x64 10x128} TRAIN_STEPS=${TRAIN_STEPS:-4000} STEPS=${STEPS-teacher train}
export CPATH=$PWD/.carry/include
start teacher.log
step "machine"; machine

if [[ " $STEPS " == *" teacher "* ]]; then
  step "teacher games for $SECS s (scripts/device/teacher_games.sh)"
  bash scripts/device/teacher_games.sh "$SECS" .carry/bin/jiriki-cpu &
  TEACHER=$!
fi

step "build (CUDA) beside the teacher games"
JOBS=$([[ -n "${TEACHER:-}" ]] && echo 3 || nproc)  # three cores while gpsshogi plays, else all
nice -n 10 bash -c "source scripts/device/env.sh; configure() { cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCUDNN_INCLUDE_DIR=$CUDNN_INC -DCUDNN_LIBRARY=$CUDNN_LIB -DJIRIKI_TESTS=OFF \
  -DJIRIKI_BOOST_INCLUDE_DIR=$PWD/.carry/include -DJIRIKI_BOOST_FILESYSTEM=$PWD/.carry/lib/libboost_filesystem.a \
  ${NCCL_INC:+-DNCCL_INCLUDE_DIR=$NCCL_INC} ${NCCL_LIB:+-DNCCL_LIBRARY=$NCCL_LIB} | grep -E 'jiriki|Error|error'; }; \
  configure && cmake --build build-device -j $JOBS --target jiriki > $OUT/build.log 2>&1" || { grep -E "error|FAILED" "$OUT/build.log" | head -30; }

if [[ " $STEPS " == *" selfplay "* ]]; then
  LEFT=$((SECS - SECONDS + 5))
  step "self-play of ${MODEL:-networks/cpu.jnn} on the GPU for $LEFT s beside the teacher games"
  JIRIKI_CUDNN_CANDIDATES=4 build-device/jiriki selfplay --backend cuda --model "${MODEL:-networks/cpu.jnn}" \
    --out "$OUT/selfplay" --seconds "$LEFT" --playouts "${PLAYOUTS:-100}" --threads "${SP_THREADS:-6}" \
    --report-seconds 60 --seed "$(date +%s)" 2>&1 | tail -4
  build-device/jiriki records summary "$OUT"/selfplay/*.hcpe3 | head -8
fi

if [[ " $STEPS " == *" train "* ]]; then
  # TEST: held-out records (games none of the training files hold), evaluated every EVAL_EVERY steps
  # (default 2000), so that the log shows where a network starts to memorise the games.
  # The networks train on the games carried in .carry/data, beside this run's teacher games (the GPU
  # would idle while they play); those come back in $OUT for the next run.
  DATA=$(ls .carry/data/*.hcpe3 2>/dev/null | grep -vxF "${TEST:-/none}")
  echo "data: $DATA"
  HELD=()
  [[ -n "${TEST:-}" ]] && HELD=(--test "$TEST" --eval-every "${EVAL_EVERY:-2000}")
  for net in $NETS; do
    step "train $net on the teacher games"
    build-device/jiriki train --data $DATA --backend cuda --blocks ${net%x*} --channels ${net#*x} --batch 256 \
      --steps "$TRAIN_STEPS" --optimizer sgd --lr 0.05 --warmup-steps 200 --val-lambda 0.5 --loader-threads 4 \
      "${HELD[@]}" --log-every 500 --model-out "$OUT/net$net.jnn" --checkpoint "/tmp/net$net.ckpt" \
      --log "$OUT/train$net.jsonl" 2>&1 | grep -E "^test|wrote|error" | tail -40
  done
fi
if [[ -n "${TEACHER:-}" ]]; then
  wait $TEACHER
  build-device/jiriki records summary "$OUT"/teacher-*.hcpe3 | head -8
fi
ls -la "$OUT"
