#!/usr/bin/env bash
# Makes the Windows release in one command: build-windows/jiriki-VERSION-windows-x86-64.zip, holding
# jiriki.exe (cross-compiled with MinGW-w64: cmake --preset windows; static, no DLLs, x86-64-v3) and
# README.txt, how to register the engine in ShogiGUI, Shogidokoro and ShogiHome (README.md's section
# "Playing in a GUI", with CRLF line ends for Notepad).
#   usage: scripts/windows-release.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset windows >/dev/null
cmake --build --preset windows
version=$(git describe --tags --always --dirty 2>/dev/null || echo unknown)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp build-windows/jiriki.exe "$stage/jiriki.exe"
{
  echo "jiriki $version for Windows x86-64 (any processor with AVX2: Intel Haswell, AMD Zen or later)"
  echo
  echo "jiriki.exe is the whole engine, both networks inside: put it in any folder and register it in"
  echo "your shogi GUI as a USI engine. It plays on the CPU. Wherever the text below says build/jiriki,"
  echo "choose jiriki.exe."
  echo
  # The section of README.md between its heading and the next one.
  sed -n '/^## Playing in a GUI/,/^## /p' README.md | sed '$d'
} | sed 's/$/\r/' >"$stage/README.txt"
out="build-windows/jiriki-$version-windows-x86-64.zip"
rm -f "$out"
(cd "$stage" && python3 -m zipfile -c "$OLDPWD/$out" jiriki.exe README.txt)
echo "windows-release: $out"
python3 -m zipfile -l "$out"
