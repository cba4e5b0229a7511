#!/usr/bin/env bash
# On the GPU machine, last: packs everything under $OUT into $OUT/results.tar.gz (what comes back is
# at most 8 files), keeping the logs named on the command line beside it, uncompressed.
OUT=${OUT:-/tmp/jiriki-out}
cd "$OUT" || exit 1
tar czf /tmp/results.tar.gz --exclude=results.tar.gz . && mv /tmp/results.tar.gz .
find . -mindepth 1 -maxdepth 1 ! -name results.tar.gz $(printf "! -name %s " "$@") -exec rm -rf {} +
ls -la
