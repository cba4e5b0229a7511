#!/usr/bin/env bash
# On the GPU machine's CPU cores, beside other work: runs a libFuzzer harness built here
# (cmake --preset fuzz) as JOBS independent processes (seeds of their own, one shared corpus) at the
# lowest priority for SECONDS, so that they take only the cores the other work leaves idle.
# (libFuzzer's fork mode made about 1.8k execs/s with 12 forks there, a fraction of 12 processes'.)
# The harness and the shared libraries it needs (oneDNN, the OpenMP runtime of clang, OpenCL's
# loader) travel as .carry/fuzzpack.tar.xz, made by
#   scripts/device/fuzzpack.sh NAME...
# The corpus stays in /tmp/fuzz-corpus/NAME while the machine is warm. Log: $OUT/fuzz_NAME.log
# (each process's final statistics and a total); a crashing input: $OUT/crash-NAME-*.
#
#   run with carry [".carry/fuzzpack.tar.xz"]:  bash scripts/device/fuzz.sh NAME SECONDS [JOBS]
set -uo pipefail
NAME=$1 SECS=$2 JOBS=${3:-$(nproc)}
OUT=${OUT:-/tmp/jiriki-out}
SEEDS=$(git rev-parse --show-toplevel 2>/dev/null || pwd)/fuzz/corpus/$NAME
mkdir -p "$OUT" /tmp/fuzz-corpus/"$NAME"
[[ -d /tmp/fzpack ]] || tar xJf .carry/fuzzpack.tar.xz -C /tmp
BASE=$(date +%s)
LOGS=/tmp/fuzz-logs-$BASE  # this run's alone: a warm machine keeps earlier runs' in /tmp
mkdir -p "$LOGS"
END=$((SECONDS + SECS))
# Each process runs in segments of at most 200,000 inputs: under ASan and UBSan, fuzz_usi_engine
# grows by about 2 KB an input (the sanitizers' bookkeeping of the threads each search starts; a
# build without them stays flat) and reached libFuzzer's 2 GB limit after about 870,000.
job() {
  local k=$1 seg=0
  while ((END - SECONDS >= 5)); do  # (-max_total_time=0 would mean no limit)
    (cd /tmp/fzpack && LD_LIBRARY_PATH=/tmp/fzpack/lib ASAN_OPTIONS=detect_leaks=0 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 nice -n 19 ./fuzz_"$NAME" -seed=$((BASE + 1000 * k + seg)) \
      -runs=200000 -max_total_time=$((END - SECONDS)) -timeout=30 -print_final_stats=1 \
      -artifact_prefix="$OUT/crash-$NAME-" /tmp/fuzz-corpus/"$NAME" "$SEEDS") >> "$LOGS/$NAME-$k.log" 2>&1 || break
    seg=$((seg + 1))
  done
}
for k in $(seq 1 "$JOBS"); do job "$k" & done
wait
{
  for k in $(seq 1 "$JOBS"); do
    echo "--- process $k"
    grep -E "^stat::|ERROR|SUMMARY|runtime error" "$LOGS/$NAME-$k.log"
  done
  echo "fuzz_$NAME: $JOBS processes for $SECS s: $(grep -h '^stat::number_of_executed_units' "$LOGS/$NAME"-*.log |
    awk '{s += $2} END {print s}') executions, $(ls "$OUT"/crash-"$NAME"-* 2>/dev/null | wc -l) crashes," \
    "corpus $(ls /tmp/fuzz-corpus/"$NAME" | wc -l) files"
} > "$OUT/fuzz_$NAME.log"
tail -1 "$OUT/fuzz_$NAME.log"
