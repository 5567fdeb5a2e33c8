#!/usr/bin/env bash
# Rebuild traceml._core in place without truncating a .so that running
# processes have mapped: build elsewhere, then rename over it.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python}
tmp=$(mktemp -d)
"$py" setup.py -q build_ext --build-lib "$tmp" --build-temp "$tmp/obj"
so=$(cd "$tmp/traceml" && ls _core*.so)
cp "$tmp/traceml/$so" "traceml/.$so.new"
mv -f "traceml/.$so.new" "traceml/$so"
rm -rf "$tmp"
