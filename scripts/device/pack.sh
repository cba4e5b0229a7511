#!/usr/bin/env bash
# On the GPU machine, last: packs everything under $OUT into $OUT/results.tar.xz (what comes back is
# at most 8 files of at most 16 MiB), keeping the logs named on the command line beside it,
# uncompressed. A pack over 15 MB is split into results.tar.xz.part00, part01, ...: join them here
# with `cat results.tar.xz.part* | tar xJ`. Fails, keeping nothing but the named logs, when the
# parts would not come back.
OUT=${OUT:-/tmp/jiriki-out}
cd "$OUT" || exit 1
XZ_OPT="-6 -T0" tar cJf /tmp/results.tar.xz --exclude='results.tar.*' .
find . -mindepth 1 -maxdepth 1 $(printf "! -name %s " "$@") -exec rm -rf {} +
SIZE=$(stat -c %s /tmp/results.tar.xz)
if (( SIZE <= 15000000 )); then
  mv /tmp/results.tar.xz .
else
  split -b 15000000 -d /tmp/results.tar.xz results.tar.xz.part
  rm /tmp/results.tar.xz
  PARTS=$(ls results.tar.xz.part* | wc -l)
  if (( PARTS + $# > 8 )); then
    echo "pack.sh: $SIZE bytes make $PARTS parts, which with $# logs exceed the 8 files that come back" >&2
    rm -f results.tar.xz.part*
    exit 1
  fi
fi
ls -la
