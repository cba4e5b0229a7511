#!/usr/bin/env bash
# Run HERE (Debian 12), before a teacher or loop run on the GPU machine: fills .carry/ (git-ignored)
# with what that machine lacks, so that one `run` with carry [".carry"] has everything:
#   .carry/debs/       gpsshogi 0.7, its data, libosl1v5, tcmalloc and boost 1.74's libraries (Debian
#                      .debs, unpacked there with dpkg -x), and fairy-stockfish
#   .carry/include/    the Boost headers the match runner includes (its -M closure, ~9 MB),
#                      nlohmann-json and Catch2, for the CUDA build there; also as include.tar.xz
#                      (scripts/device/env.sh unpacks it there when the folder is not carried)
#   .carry/lib/        libboost_filesystem (static), for the same build
#   .carry/dnnl/       Debian's oneDNN (libdnnl2, libdnnl-dev and the OpenCL loader it links, .debs, 7 MB): with it carried, the
#                      build there has the oneDNN CPU backend, as the CPU bar's matches need
#   .carry/bin/jiriki-cpu  a CPU-only jiriki built here with no shared dependencies beyond libstdc++
#                      and glibc: the match runner for teacher games, which starts at once there
#                      while the CUDA build compiles
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .carry/debs .carry/include .carry/lib .carry/bin .carry/dnnl
(cd .carry/dnnl && apt-get download libdnnl2 libdnnl-dev ocl-icd-libopencl1 2>/dev/null)
(cd .carry/debs && apt-get download gpsshogi gpsshogi-data libosl1v5 libtcmalloc-minimal4 \
  libboost-program-options1.74.0 libboost-filesystem1.74.0 libboost-serialization1.74.0 \
  libboost-iostreams1.74.0 fairy-stockfish 2>/dev/null)
# Headers: every Boost header that match/ reaches, found by the preprocessor.
for f in match/*.cpp; do g++ -std=c++20 -I. -M "$f"; done | tr ' \\' '\n\n' | grep '^/usr/include/boost/' | sort -u |
  while read -r h; do mkdir -p ".carry/include/$(dirname "${h#/usr/include/}")"; cp "$h" ".carry/include/${h#/usr/include/}"; done
cp -r /usr/include/nlohmann .carry/include/
mkdir -p .carry/include/catch2 && cp /usr/include/catch2/catch.hpp .carry/include/catch2/
cp /usr/lib/x86_64-linux-gnu/libboost_filesystem.a .carry/lib/
tar cJf .carry/include.tar.xz -C .carry include  # the same headers, small enough to travel beside data
# The CPU-only match runner.
cmake -S . -B build-teacher -G Ninja -DCMAKE_BUILD_TYPE=Release -DJIRIKI_CUDA=OFF -DJIRIKI_TESTS=OFF \
  -DJIRIKI_NATIVE_ISA=OFF -DJIRIKI_DNNL=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
  -DBoost_USE_STATIC_LIBS=ON -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" > /dev/null
cmake --build build-teacher --target jiriki
cp build-teacher/jiriki .carry/bin/jiriki-cpu
ldd .carry/bin/jiriki-cpu
du -sh .carry/*
