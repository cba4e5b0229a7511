#!/usr/bin/env bash
# Installs the Debian 12 packages jiriki builds against. Idempotent: installs only what is missing
# and says what it installs. CUDA (nvcc, cuDNN, NCCL in /usr/local/cuda) is optional and never
# installed here; the build detects it. gnuplot draws `jiriki loop`'s plots.
set -euo pipefail
# gpsshogi-data: gpsshogi's opening book, which `jiriki book import` converts and its test reads.
# clang-14, libfuzzer-14-dev: the fuzz harnesses (cmake --preset fuzz). clang-format-14: the test
# `format` (scripts/check-format.sh). g++-mingw-w64-x86-64-posix, wine64: jiriki.exe, the Windows
# build (cmake --preset windows), and its test under Wine (docs/windows.md).
pkgs=(build-essential cmake ninja-build ccache catch2 libdnnl-dev nlohmann-json3-dev libopenmpi-dev openmpi-bin
      libboost-dev libboost-filesystem-dev gpsshogi-data gnuplot-nox clang-14 libfuzzer-14-dev
      clang-format-14 g++-mingw-w64-x86-64-posix wine64)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all packages present (${pkgs[*]})"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
