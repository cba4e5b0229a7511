#!/usr/bin/env bash
# On the GPU machine's CPU cores, beside other work: runs a libFuzzer harness built here
# (cmake --preset fuzz) in fork mode at the lowest priority for SECONDS, so that it takes only the
# cores the other work leaves idle. The harness and the shared libraries it needs (oneDNN, the
# OpenMP runtime of clang, OpenCL's loader) travel as .carry/fuzzpack.tar.xz, made by
#   scripts/device/fuzzpack.sh NAME...
# The corpus stays in /tmp/fuzz-corpus/NAME while the machine is warm. Log: $OUT/fuzz_NAME.log;
# a crashing input: $OUT/crash-NAME-*.
#
#   run with carry [".carry/fuzzpack.tar.xz"]:  bash scripts/device/fuzz.sh NAME SECONDS [JOBS]
set -uo pipefail
NAME=$1 SECS=$2 JOBS=${3:-$(nproc)}
OUT=${OUT:-/tmp/jiriki-out}
mkdir -p "$OUT" /tmp/fuzz-corpus/"$NAME"
[[ -d /tmp/fzpack ]] || tar xJf .carry/fuzzpack.tar.xz -C /tmp
cd /tmp/fzpack
LD_LIBRARY_PATH=/tmp/fzpack/lib ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  nice -n 19 ./fuzz_"$NAME" -fork="$JOBS" -max_total_time="$SECS" -timeout=30 -print_final_stats=1 \
  -artifact_prefix="$OUT/crash-$NAME-" /tmp/fuzz-corpus/"$NAME" "$OLDPWD/fuzz/corpus/$NAME" > "$OUT/fuzz_$NAME.log" 2>&1
echo "fuzz_$NAME exit $? after $SECS s; corpus $(ls /tmp/fuzz-corpus/$NAME | wc -l) files" >> "$OUT/fuzz_$NAME.log"
