#!/usr/bin/env bash
# Here: picks what of .carry/records travels to the GPU machine, whose carry limit (64 MiB with the
# tree) holds only part of it. Each record folder is compressed once into .carry/xz/NAME.tar.xz
# (kept, remade when the folder changes); .carry/pack/ then gets links to the teacher folders' archives
# and to the newest folders' (by their newest file) until MB megabytes are taken. Carry .carry/pack
# and give gpunet.sh RECORDS=".carry/pack/*.tar.xz".
#
#   bash scripts/device/pack_records.sh MB
set -euo pipefail
MB=${1:?usage: pack_records.sh MB}
mkdir -p .carry/xz
rm -rf .carry/pack && mkdir -p .carry/pack
newest() { find "$1" -type f -printf '%T@\n' | sort -n | tail -1 | cut -d. -f1; }  # seconds
for d in .carry/records/*/; do
  name=$(basename "$d") xz=.carry/xz/$(basename "$d").tar.xz
  if [[ ! -f $xz ]] || (( $(newest "$d") > $(stat -c %Y "$xz") )); then
    tar cf - -C .carry/records "$name" | xz -T0 -6 > "$xz.tmp" && mv "$xz.tmp" "$xz"
  fi
done
budget=$((MB * 1000000)) taken=0
pick() { ln "$1" .carry/pack/; taken=$((taken + $(stat -c %s "$1"))); echo "  $(basename "$1") $(( $(stat -c %s "$1") / 1000 )) kB"; }
echo "packed into .carry/pack:"
for xz in .carry/xz/teacher*.tar.xz; do [[ -f $xz ]] && pick "$xz"; done
for d in $(for d in .carry/records/*/; do echo "$(newest "$d") $(basename "$d")"; done | sort -rn | cut -d' ' -f2); do
  [[ $d == teacher* ]] && continue
  xz=.carry/xz/$d.tar.xz size=$(stat -c %s ".carry/xz/$d.tar.xz")
  (( taken + size <= budget )) && pick "$xz"
done
echo "$((taken / 1000000)) MB of $MB; left behind: $(comm -23 <(ls .carry/xz | sort) <(ls .carry/pack | sort) | tr '\n' ' ')"
