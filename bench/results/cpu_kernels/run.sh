#!/usr/bin/env bash
# The simd backend (own kernels) against oneDNN on this machine, in one run: `jiriki bench nn` on the
# shipped CPU (6x64) and GPU (10x128) networks with 1 and 2 threads in fp32 and bf16, then `jiriki
# bench search` with 2 threads. The two backends alternate at each setting, so that a change in the
# machine's load touches both alike. Usage: bench/results/cpu_kernels/run.sh BUILD_DIR > LOG
set -u
J=${1:-build}/jiriki
echo "# $(date -u +%FT%TZ) $(uname -srm); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs"
"$J" --version
run() { echo "\$ $*"; "$@" 2>&1; echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg)"; }
for net in cpu gpu; do
  for precision in fp32 bf16; do
    for threads in 1 2; do
      for backend in onednn simd; do
        run "$J" bench nn --model networks/$net.jnn --backend $backend --precision $precision --threads $threads \
          --batch 1,7,16,64 --seconds 2
      done
    done
  done
done
for net in cpu gpu; do
  for precision in fp32 bf16; do
    for backend in onednn simd; do
      run "$J" bench search --model networks/$net.jnn --backend $backend --precision $precision --threads 2 --seconds 10
    done
  done
done
