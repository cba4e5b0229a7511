# Sourced first by the scripts in scripts/device/: finds cuDNN on the GPU machine (the system's, else
# the one inside PyTorch's wheel, whose lib holds only libcudnn.so.9) and NCCL, and defines what
# every script begins with:
#   start LOG     sends the script's output to the terminal and to $OUT/LOG
#   step TITLE    a section heading with the time
#   machine       the GPUs, CPU count, cuDNN and NCCL found
#   gpu_count     the GPUs of this machine
#   use_carried_cudnn_choices  JIRIKI_CUDNN_CACHE, started from .carry/cudnn-choices.txt when carried
#   on_gpu I N CMD...  runs CMD (a command or a function) on GPU I alone (CUDA_VISIBLE_DEVICES) and on the I-th of N equal shares
#                 of the CPU cores (taskset): N independent single-GPU runs side by side, each as on a
#                 machine of one GPU and cores/N cores
#   side_by_side N CMD ITEM...  CMD ITEM for each item, N at a time, the k-th of a round on GPU k of N
#                 (on_gpu), each one's output printed whole once its round is done
#   build T...    configures build-device (CUDA; the tests when .carry/catch2 is carried) and
#                 builds the targets (default jiriki: the carried .carry/bin/jiriki when it fits);
#                 on failure prints the errors and exits
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
CUDNN_INC=$(ls -d /usr/include/cudnn.h /usr/local/cuda/include/cudnn.h 2>/dev/null | head -1 | xargs -r dirname)
CUDNN_LIB=$(ls /usr/lib/x86_64-linux-gnu/libcudnn.so.9 /usr/local/cuda/lib64/libcudnn.so.9 2>/dev/null | head -1)
if [[ -z "$CUDNN_INC" || -z "$CUDNN_LIB" ]]; then
  WHEEL=$(python3 -c 'import nvidia.cudnn, os; print(list(nvidia.cudnn.__path__)[0])' 2>/dev/null)
  CUDNN_INC=$WHEEL/include
  CUDNN_LIB=$(ls "$WHEEL"/lib/libcudnn.so.9 2>/dev/null | head -1)
fi
[[ -f "$CUDNN_INC/cudnn.h" && -f "$CUDNN_LIB" ]] || { echo "no cuDNN found (include '$CUDNN_INC', lib '$CUDNN_LIB')"; exit 1; }
export LD_LIBRARY_PATH=$(dirname "$CUDNN_LIB")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# NCCL: the system's, else PyTorch's wheel; a wheel without the header uses the nccl.h carried in
# .carry/nccl (the same 2.28 release).
NCCL_LIB=$(ls /usr/lib/x86_64-linux-gnu/libnccl.so.2 /usr/local/cuda/lib64/libnccl.so.2 2>/dev/null | head -1)
NCCL_INC=$(ls -d /usr/include/nccl.h /usr/local/cuda/include/nccl.h 2>/dev/null | head -1 | xargs -r dirname)
if [[ -z "$NCCL_LIB" ]]; then
  NCCL_WHEEL=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)
  NCCL_LIB=$(ls "$NCCL_WHEEL"/lib/libnccl.so.2 2>/dev/null | head -1)
  [[ -f "$NCCL_WHEEL/include/nccl.h" ]] && NCCL_INC=$NCCL_WHEEL/include
  [[ -n "$NCCL_LIB" ]] && export LD_LIBRARY_PATH=$(dirname "$NCCL_LIB"):$LD_LIBRARY_PATH
fi
[[ -z "$NCCL_INC" && -f .carry/nccl/nccl.h ]] && NCCL_INC=$PWD/.carry/nccl

# Boost (jiriki match) and nlohmann-json: the headers and library scripts/device/prepare.sh carries, when there.
# The headers may travel compressed (.carry/include.tar.xz, 1/8 of the folder's size), leaving room
# under the carry limit for data.
[[ -f .carry/include.tar.xz && ! -d .carry/include ]] && tar xJf .carry/include.tar.xz -C .carry
BOOST_FLAGS=()
if [[ -d .carry/include/boost ]]; then
  export CPATH=$PWD/.carry/include${CPATH:+:$CPATH}
  BOOST_FLAGS=(-DJIRIKI_BOOST_INCLUDE_DIR="$PWD/.carry/include" -DJIRIKI_BOOST_FILESYSTEM="$PWD/.carry/lib/libboost_filesystem.a")
fi

# Catch2 (the tests) when carried: a run that builds only jiriki can leave it behind.
CATCH2_FLAG=-UJIRIKI_CATCH2_INCLUDE_DIR  # (a warm machine's cache may name one from an earlier run)
[[ -f .carry/catch2/catch2/catch.hpp ]] && CATCH2_FLAG=-DJIRIKI_CATCH2_INCLUDE_DIR="$PWD/.carry/catch2"

# oneDNN (the CPU backend of the CPU bar's matches) when carried: Debian's .debs unpacked there.
DNNL_FLAGS=()
if compgen -G ".carry/dnnl/libdnnl2_*.deb" > /dev/null; then
  DNNL_ROOT=/tmp/dnnl-root
  for d in .carry/dnnl/*.deb; do dpkg -x "$d" "$DNNL_ROOT"; done
  DNNL_LIBDIR=$DNNL_ROOT/usr/lib/x86_64-linux-gnu
  export LD_LIBRARY_PATH=$DNNL_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  DNNL_FLAGS=(-DDNNL_LIBRARY="$DNNL_LIBDIR/libdnnl.so" -DDNNL_INCLUDE_DIR="$DNNL_ROOT/usr/include")
fi

configure() {
  cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCUDNN_INCLUDE_DIR="$CUDNN_INC" -DCUDNN_LIBRARY="$CUDNN_LIB" \
    "$CATCH2_FLAG" \
    ${NCCL_INC:+-DNCCL_INCLUDE_DIR="$NCCL_INC"} ${NCCL_LIB:+-DNCCL_LIBRARY="$NCCL_LIB"} "${BOOST_FLAGS[@]}" "${DNNL_FLAGS[@]}" \
    | grep -E "jiriki|Error|error"
}

OUT=${OUT:-/tmp/jiriki-out}
mkdir -p "$OUT"

start() { exec > >(tee "$OUT/$1") 2>&1; }

step() { echo; echo "=== $* ($(date +%T))"; }

machine() {
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  echo "CPUs: $(nproc)"
  echo "cuDNN: $CUDNN_INC, $CUDNN_LIB"
  echo "NCCL: ${NCCL_INC:-none}, ${NCCL_LIB:-none}"
}

gpu_count() { nvidia-smi --query-gpu=index --format=csv,noheader | wc -l; }
# cuDNN's tuned choices carried from machine to machine (.carry/cudnn-choices.txt), so that no run
# pays a fresh machine's first tuning; the run's own end up in /tmp/cudnn-choices.txt.
use_carried_cudnn_choices() {
  export JIRIKI_CUDNN_CACHE=/tmp/cudnn-choices.txt
  [[ -f $JIRIKI_CUDNN_CACHE || ! -f .carry/cudnn-choices.txt ]] || cp .carry/cudnn-choices.txt "$JIRIKI_CUDNN_CACHE"
}

on_gpu() {
  local i=$1 n=$2; shift 2
  local share=$(($(nproc) / n))
  (export CUDA_VISIBLE_DEVICES=$i
   taskset -cp "$((i * share))-$(((i + 1) * share - 1))" $BASHPID > /dev/null  # (inherited by what it starts)
   "$@")
}

side_by_side() {
  local n=$1 cmd=$2 k=0 g; shift 2
  local items=("$@") jobs
  rm -f /tmp/side-*.out
  while ((k < ${#items[@]})); do
    jobs=()
    for ((g = 0; g < n && k + g < ${#items[@]}; ++g)); do
      on_gpu "$g" "$n" "$cmd" "${items[k + g]}" > "/tmp/side-$((k + g)).out" 2>&1 &
      jobs+=($!)
    done
    wait "${jobs[@]}"  # (named: a bare wait would also wait for start's tee)
    for ((g = 0; g < n && k + g < ${#items[@]}; ++g)); do cat "/tmp/side-$((k + g)).out"; done
    k=$((k + n))
  done
}

# build: takes .carry/bin/jiriki (scripts/device/prebuild.sh) when only jiriki is asked for and it was
# built from these very sources and runs here; else configures and builds.
source scripts/device/sources.sh
build() {
  if [[ "${*:-jiriki}" == jiriki && -x .carry/bin/jiriki && "$(cat .carry/bin/jiriki.sources 2>/dev/null)" == "$(sources_hash)" ]]; then
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64
    mkdir -p build-device && cp .carry/bin/jiriki build-device/jiriki
    if build-device/jiriki help > /dev/null 2>&1; then echo "build: the carried .carry/bin/jiriki"; return 0; fi
    echo "build: the carried .carry/bin/jiriki does not run here:"; build-device/jiriki help 2>&1 | head -3
    rm -f build-device/jiriki
  fi
  configure || exit 1
  if ! cmake --build build-device -j "$(nproc)" --target "${@:-jiriki}" > "$OUT/build.log" 2>&1; then
    grep -E "error|FAILED" "$OUT/build.log" | head -30
    exit 1
  fi
}
