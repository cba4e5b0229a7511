#!/usr/bin/env bash
# On the GPU machine: can its cores stand in for the 2-core machine of the CPU bar? Prints how its
# CPUs map to physical cores, then the CPU network's playouts a second (`jiriki bench search`, 2
# threads, SECONDS each) pinned to two CPUs of one physical core and to two of different cores,
# with oneDNN (carry .carry/dnnl, filled by scripts/device/prepare.sh) and with the own kernels.
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/dnnl"]:
#     bash scripts/device/cpu_speed.sh [SECONDS]
set -uo pipefail
source scripts/device/env.sh
SECS=${1:-5}
start cpu_speed.log
step "machine"; machine
lscpu | grep -E "Model name|Thread|Core|Socket|^CPU\(s\)|MHz"
echo "vector flags: $(grep -m1 -o -E 'avx512[a-z_0-9]*|amx[a-z_0-9]*|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
for c in /sys/devices/system/cpu/cpu[0-9]*; do
  echo "$(basename "$c"): core $(cat "$c/topology/core_id"), siblings $(cat "$c/topology/thread_siblings_list")"
done | sort -V
step "build"; build jiriki
J=$PWD/build-device/jiriki
"$J" version
SIB=$(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list | tr '-' ',')
OTHER=0,$(for c in /sys/devices/system/cpu/cpu[0-9]*; do
  [[ $(cat "$c/topology/core_id") != $(cat /sys/devices/system/cpu/cpu0/topology/core_id) ]] && basename "$c" | tr -d cpu && break
done)
for backend in cpu simd; do
  for cpus in "$SIB" "$OTHER"; do
    [[ $cpus == *,* ]] || continue
    step "$backend, pinned to CPUs $cpus"
    taskset -c "$cpus" "$J" bench search --model networks/cpu.jnn --backend "$backend" --threads 2 --seconds "$SECS" 2>&1 | grep -E "^backend|^playouts|^network calls"
  done
done
