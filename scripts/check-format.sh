#!/usr/bin/env bash
# Checks that every C++ file git tracks is formatted as .clang-format says (clang-format 14, the
# version Debian 12 ships: other versions format some constructs differently). Prints the files
# that would change and how to fix them; exit 1 when any would. Run by ctest as the test `format`.
#   scripts/check-format.sh          # the whole tree
set -euo pipefail
cd "$(dirname "$0")/.."
CF=$(command -v clang-format-14 || command -v clang-format || true)
if [[ -z $CF ]]; then
  echo "check-format: clang-format not found (scripts/install-deps.sh installs clang-format-14)" >&2
  exit 1
fi
bad=()
while IFS= read -r f; do
  "$CF" --dry-run --Werror "$f" > /dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')
if ((${#bad[@]})); then
  echo "check-format: ${#bad[@]} file(s) differ from .clang-format ($CF):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "fix: $CF -i FILE... (or git clang-format on staged changes)" >&2
  exit 1
fi
echo "check-format: $(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | wc -l) files formatted ($CF)"
