#!/usr/bin/env bash
# Build and test traceml on the other Pythons it supports (requires-python
# >= 3.10; Colab runs 3.12), without torch, away from the checkout:
#
#   tools/check_pythons.sh              # 3.10, 3.12 and 3.13, found by pyenv
#   CHECK_PYTHONS="3.12" tools/check_pythons.sh
#
# For each version: a fresh venv in a temporary folder with numpy, scipy,
# jsonschema, pytest and hypothesis (no torch: torch==2.13.0 is on local
# disk for 3.11 only); the package compiled and installed from a copy of the
# files git knows (tracked, and untracked but not ignored), so that nothing
# is built into the checkout (its .so is the 3.11 editable install's); then,
# from a copy of tests/ (only the installed traceml is importable there),
# the unit tier (and on 3.12, Colab's, the test files that drive the C
# core too: TESTS below; the modules that need torch skip themselves
# through pytest.importorskip), their fast tests less those named below
# with why, and tools/smoke.py --no-torch.  The rest of the fast tier is pure Python over
# the same core and runs on 3.11 (the README's command).
#
# A version that pyenv does not have is reported and skipped, never a
# failure; a failed build, test or smoke run on a version that is there
# fails the script, after every version has run.  KEEP=1 keeps the
# temporary folder and says where it is.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
versions=${CHECK_PYTHONS:-"3.10 3.12 3.13"}
work=$(mktemp -d "${TMPDIR:-/tmp}/traceml-pythons.XXXXXX")
work=$(cd "$work" && pwd -P)
jobs=()
cleanup() {
    local j
    for j in "${jobs[@]}"; do kill "$j" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ "${KEEP:-0}" = 1 ]; then echo "check_pythons: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

step() { printf 'check_pythons [%3ss] %s\n' "$SECONDS" "$*"; }
# pip, quiet; the local index's notices about missing mirror folders dropped.
pipq() {
    "$@" --quiet --disable-pip-version-check 2>&1 \
        | { grep -v "is ignored: it is neither a file nor a directory" || true; }
}
# The interpreter pyenv has for version $1 (e.g. 3.12 -> 3.12.1), or nothing.
python_for() {
    local top full
    top=$(pyenv root 2>/dev/null) || top=${PYENV_ROOT:-$HOME/.pyenv}
    if command -v pyenv >/dev/null 2>&1; then
        full=$(pyenv latest "$1" 2>/dev/null) || full=""
    else
        full=$(ls "$top/versions" 2>/dev/null | grep -E "^$1\.[0-9]+$" | sort -V | tail -n 1) || full=""
    fi
    if [ -n "$full" ] && [ -x "$top/versions/$full/bin/python$1" ]; then
        echo "$top/versions/$full/bin/python$1"
    fi
}

# What each version runs: the unit tier, and every test file that calls
# into the C core without torch (the sanitizer's quick list, less the files
# that need torch, plus the fault injection, the run-file fuzzing and the
# long-run reference).
# 3.12 (Colab's) runs them all; 3.10 and 3.13 the unit tier and the smoke
# script, which call every reducer and drive the probes, wrap, the store,
# the sampler, fork and the stack sampler (the C-facing files repeat that
# at 2.5x the time: 130 s a version against about 50, 2026-12-04).
TESTS=(tests/unit tests/integration/test_bad_input.py tests/integration/test_leaks.py
       tests/integration/test_recorder.py tests/integration/test_probes.py tests/integration/test_wrap.py tests/integration/test_stacks.py
       tests/integration/test_nvml.py tests/integration/test_faults.py tests/integration/test_runfile_fuzz.py tests/integration/test_io.py
       tests/integration/test_longrun.py tests/integration/test_rooms.py)

# Tests that need torch but do not skip without it (leave them to the 3.11
# run, which has torch):
no_torch=(
    # imports torch in the test body
    "tests/integration/test_cuda_events.py::test_cuda_argument_errors_name_the_argument"
    # traceml/_lerobot.py (the demo's data) imports torch at the top
    "tests/integration/test_rooms.py::test_each_module_imports_alone[_lerobot]"
)
# Tests that fail on 3.12 and later for reasons of the interpreter, not of
# traceml (measured on 3.12.1 and 3.13.0, passing on 3.10 and 3.11):
from_312=(
    # On 3.12+ f_trace_opcodes set in a trace function's call event gives
    # "opcode" events only in code that an earlier settrace had asked them
    # for: the first case of a process counts 0 bytecode boundaries, the
    # next ones fewer than the test needs (3.13.0: 28 for report).
    "tests/integration/test_faults.py::test_reset_from_a_signal_handler_at_every_point_of_the_bookkeeping"
)
# test_longrun's reference (tests/data/longrun_reference.json) was written
# on 3.11 with numpy 2.4 and scipy 1.17, and is compared to the last bit;
# elsewhere the low bits move: 3.10 gets numpy 2.2 and scipy 1.15 (three
# cases' p_value differ in the 14th digit), and 3.12's sum() of floats is
# compensated (report._headline sums the epochs' start-up waits with it:
# all_slow's epoch_start_share is 1 ulp off).  The .venv run checks it.
not_311=(
    "tests/integration/test_longrun.py::test_report_matches_the_reference"
)
# tomllib is 3.11's (the package itself does not use it):
before_311=(
    "tests/integration/test_runfile_fuzz.py::test_schema_ships_as_package_data"
)
# Time: one subprocess import per module, 35 s quiet, 270 s of 3.12's
# 451 s beside the other versions (5-6 s an import, 2026-12-04 CI); the
# module graph is the same on every version, and the 3.11 suite runs it.
everywhere=(
    "tests/integration/test_rooms.py::test_each_module_imports_alone"
)

export PIP_NO_INPUT=1 MPLCONFIGDIR="$work/home/mpl"
unset PYTHONPATH

# The versions' test runs load the 2 cores together: hypothesis's 200 ms
# deadline per example is no measure here (3.10's percentile property failed
# once on a 299 ms first call beside load average 9).  A plugin on the
# command line, outside the copied tests, loads a profile without it;
# examples and everything else stay as the tests set them.
mkdir "$work/plugins"
cat >"$work/plugins/no_hypothesis_deadline.py" <<'EOF'
"""tools/check_pythons.sh: hypothesis without its per-example deadline."""
from hypothesis import settings

settings.register_profile("check_pythons", deadline=None)
settings.load_profile("check_pythons")
EOF

step "copy the checkout's files (tracked, and untracked but not ignored)"
mkdir "$work/src"
(cd "$root" && git ls-files -z --cached --others --exclude-standard \
    | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
    | tar --null -T - -cf -) | tar -C "$work/src" -xf -

# One version, start to end, in the folder $work/py$1 (log: its log.txt).
check_one() {
    local v=$1 py=$2 here="$work/py$1" E="$work/py$1/env" where
    local -a deselect=()
    local minor=${v#3.}
    local -a skip=("${no_torch[@]}")
    [ "$minor" -ge 11 ] || skip+=("${before_311[@]}")
    [ "$minor" -lt 12 ] || skip+=("${from_312[@]}")
    skip+=("${everywhere[@]}")
    [ "$minor" -eq 11 ] || skip+=("${not_311[@]}")
    for t in "${skip[@]}"; do deselect+=(--deselect "$t"); done
    step "Python $v ($py): venv; numpy scipy jsonschema pytest hypothesis setuptools"
    "$py" -m venv "$E"
    # setuptools >= 77 reads pyproject's SPDX `license = "MIT"` (PEP 639); a
    # 3.10 venv comes with 65.5, which refuses it.
    pipq "$E/bin/pip" install --no-compile numpy scipy jsonschema pytest hypothesis \
        "setuptools>=77"
    step "Python $v: build and install traceml from a copy of the files"
    # pip builds a local folder in place (build/, *.egg-info): a copy of
    # the copy for each version.  The build needs setuptools and numpy,
    # both in the venv already: no isolated build environment to set up.
    cp -R "$work/src" "$here/src"
    "$E/bin/pip" install --no-compile --no-build-isolation --disable-pip-version-check \
        "$here/src" >"$here/build.log" 2>&1 \
        || { tail -n 40 "$here/build.log"; echo "check_pythons: Python $v: the build failed"; return 1; }
    mkdir -p "$here/run/tools"
    cp -R "$work/src/tests" "$work/src/pyproject.toml" "$here/run/"
    cp "$work/src/tools/smoke.py" "$here/run/tools/"
    cd "$here/run"
    where=$("$E/bin/python" -c 'import os, traceml; print(os.path.realpath(traceml.__file__))')
    case "$where" in
        "$E"/*) ;;
        *) echo "check_pythons: Python $v: traceml imports from $where, not from the venv"; return 1 ;;
    esac
    if "$E/bin/python" -c 'import torch' 2>/dev/null; then
        echo "check_pythons: Python $v: torch is importable; this run is meant without it"
        return 1
    fi
    local -a tests=(tests/unit)
    [ "$minor" -ne 12 ] || tests=("${TESTS[@]}")
    step "Python $v: ${tests[*]}, without torch"
    PYTHONPATH="$work/plugins" "$E/bin/python" -m pytest -m "not slow" -q -p no:cacheprovider \
        -p no_hypothesis_deadline "${deselect[@]}" "${tests[@]}" \
        || { echo "check_pythons: Python $v: tests failed"; return 1; }
    step "Python $v: tools/smoke.py --no-torch"
    "$E/bin/python" tools/smoke.py --no-torch \
        || { echo "check_pythons: Python $v: the smoke run failed"; return 1; }
    step "Python $v: ok"
}

ran=()
for v in $versions; do
    py=$(python_for "$v")
    if [ -z "$py" ]; then
        echo "check_pythons: Python $v: not found by pyenv; skipped" >&2
        continue
    fi
    ran+=("$v")
    mkdir "$work/py$v"
    step "Python $v: started (log shown when it ends)"
    check_one "$v" "$py" >"$work/py$v/log.txt" 2>&1 &
    jobs+=($!)
done

failed=()
for i in "${!ran[@]}"; do
    v=${ran[$i]}
    rc=0
    wait "${jobs[$i]}" || rc=$?
    echo "----- Python $v (exit $rc) -----"
    cat "$work/py$v/log.txt"
    [ "$rc" -eq 0 ] || failed+=("$v")
done
jobs=()

if [ "${#failed[@]}" -gt 0 ]; then
    echo "check_pythons: FAIL on Python ${failed[*]}" >&2
    exit 1
fi
if [ "${#ran[@]}" -eq 0 ]; then
    echo "check_pythons: no Python of $versions found; nothing checked" >&2
else
    step "ok: built and tested on Python ${ran[*]}"
fi
