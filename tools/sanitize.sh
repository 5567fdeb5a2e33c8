#!/usr/bin/env bash
# Build traceml._core with AddressSanitizer + UndefinedBehaviorSanitizer in a
# scratch copy of the working tree and run the test suite against it.
#
#   tools/sanitize.sh                 # the whole test suite (the default)
#   tools/sanitize.sh --quick         # a fast subset: the C-facing tests
#   tools/sanitize.sh tests/integration/test_x.py -k name   # any pytest arguments
#
# Exit status: 0 clean; 1 when any process (the pytest process, a
# DataLoader worker, a forked child, a subprocess the tests start) wrote a
# sanitizer report -- printed at the end; 3 when tests failed without any
# sanitizer report (some timing tests do not survive ASan's slowdown on a
# loaded machine: up to five such failures are tried once more, alone, and
# pass the run when they pass then); 2 when the build could not be made.
#
# Tests marked xfail that demonstrate a memory bug in a subprocess make
# that subprocess write a report: the run is clean only once they are
# fixed.
#
# The installed extension (traceml/_core*.so in the checkout) is never
# touched: other processes may have it loaded.
#
# Environment:
#   PYTHON        interpreter with numpy, setuptools, pytest (default: python3)
#   SANITIZE_DIR  scratch directory to use (default: a new mktemp -d; kept
#                 only when the run fails or KEEP=1)
#   KEEP=1        keep the scratch copy
#   SANITIZE_TEST_TIMEOUT  seconds one test may run (default 180; the
#                 slowest takes about 20 s) before pytest-timeout fails it:
#                 a hang becomes a failure, tried once more alone like any
#                 other (below), instead of holding the whole run
#   SANITIZE_EXTRA_CFLAGS  appended to the sanitizer flags (for example
#                 -fno-sanitize=nonnull-attribute to look past one finding)
#
# allocator_may_return_null=1: an allocation too large to make returns NULL
# (MemoryError), as without ASan, instead of aborting; tests ask for such
# allocations on purpose.
#
# CPython leaks by design at exit, so leak detection is off here
# (detect_leaks=0); leaks are checked by tools/memcheck.sh and
# tests/integration/test_leaks.py.  PYTHONMALLOC=malloc routes Python's own
# allocations through malloc, so ASan also sees use-after-free of Python
# objects that the extension mishandles.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1; then
    echo "sanitize.sh: no interpreter '$py' (set PYTHON)" >&2
    exit 2
fi
py=$(command -v "$py")

quick_tests=(tests/integration/test_bad_input.py tests/integration/test_leaks.py tests/unit/test_reducers.py tests/integration/test_recorder.py
             tests/integration/test_probes.py tests/integration/test_wrap.py tests/integration/test_processes.py
             tests/integration/test_worker_timing.py tests/integration/test_memory.py tests/integration/test_cuda_events.py
             tests/integration/test_nvml.py tests/integration/test_stacks.py tests/integration/test_slow_code_loader.py)
# Tests of measured proportions that ASan's slowdown moves, left to the
# README's run (without ASan), where they pass: every malloc goes through
# ASan here (PYTHONMALLOC=malloc), so a worker spends 5-7% of its samples
# outside __getitem__ (in collate and pickling; 0.94-0.95 inside it), and
# the 80/20 split's heavy share read 0.69 against 0.8 +- 0.1 in one CI run
# (2026-12-03, passing on its retry).
quick_deselect=(tests/integration/test_slow_code_loader.py::test_a_known_80_20_split_comes_out_within_ten_points)
pytest_args=()
if [ "${1:-}" = "--quick" ]; then
    shift
    for t in "${quick_tests[@]}"; do
        [ -e "$repo/$t" ] && pytest_args+=("$t")
    done
    for t in "${quick_deselect[@]}"; do
        pytest_args+=(--deselect "$t")
    done
fi
pytest_args+=("$@")
# GCC 12's AddressSanitizer does not reset its allocator's locks in a
# forked child: a DataLoader worker forked while another thread of the
# test process holds one waits on it forever (seen in CI, 2026-12-03, and
# here beside a CPU hog: the worker in ASan's size-class mutex under
# CPython's after-fork lock reinit).  tests/conftest.py lets a test's
# threads end before the next test forks; a fork inside one test can still
# meet its own feeder threads, so a hung test is failed and retried.
timeout_args=()
if "$py" -c 'import pytest_timeout' 2>/dev/null; then
    timeout_args=(--timeout="${SANITIZE_TEST_TIMEOUT:-180}" --timeout-method=signal)
else
    echo "sanitize.sh: pytest-timeout not installed; a hung test holds the run" >&2
fi

cc=${CC:-gcc}
asan_rt=$("$cc" -print-file-name=libasan.so)
ubsan_rt=$("$cc" -print-file-name=libubsan.so)
if [ ! -e "$asan_rt" ] || [ ! -e "$ubsan_rt" ]; then
    echo "sanitize.sh: $cc has no libasan/libubsan runtime" >&2
    exit 2
fi

scratch=${SANITIZE_DIR:-$(mktemp -d -t traceml-sanitize.XXXXXX)}
mkdir -p "$scratch"
keep=${KEEP:-0}
cleanup() {
    local rc=$?
    if [ "$rc" -eq 0 ] && [ "$keep" != 1 ] && [ -z "${SANITIZE_DIR:-}" ]; then
        rm -rf "$scratch"
    else
        echo "sanitize.sh: scratch copy kept at $scratch" >&2
    fi
}
trap cleanup EXIT

# The working tree as it stands: tracked and untracked files git does not
# ignore (so no build outputs, no installed .so).
echo "== copying the working tree to $scratch"
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$repo" && git ls-files -z -c -o --exclude-standard \
        | xargs -0 -r -I{} sh -c 'test -e "{}" && printf "%s\0" "{}"' \
        | tar --null -T - -cf -) | tar -C "$scratch" -xf -
else
    (cd "$repo" && tar --exclude=build --exclude='*.so' --exclude='*.o' \
        --exclude=__pycache__ --exclude=.venv -cf - .) | tar -C "$scratch" -xf -
fi
rm -f "$scratch"/traceml/_core*.so

echo "== building traceml._core with -fsanitize=address,undefined"
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g ${SANITIZE_EXTRA_CFLAGS:-}"
(cd "$scratch" && CC="$cc" CFLAGS="$san -O1" LDFLAGS="$san" \
    "$py" setup.py -q build_ext --inplace --build-temp "$scratch/build/obj" \
    > "$scratch/build.log" 2>&1) || { cat "$scratch/build.log" >&2; exit 2; }
so=$(ls "$scratch"/traceml/_core*.so)
if [ "$(nm -D "$so" | grep -c __asan_)" -eq 0 ]; then
    echo "sanitize.sh: $so is not instrumented" >&2
    exit 2
fi

logdir="$scratch/sanitizer-logs"
rm -rf "$logdir"
mkdir -p "$logdir"

# ASan must be the first library loaded: the interpreter is not built with
# it, so preload the runtimes.
export LD_PRELOAD="$asan_rt $ubsan_rt${LD_PRELOAD:+ $LD_PRELOAD}"
export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=0:alloc_dealloc_mismatch=0:log_path=$logdir/asan:log_exe_name=1:exitcode=86"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$logdir/ubsan:log_exe_name=1:exitcode=87"
export PYTHONMALLOC=malloc
export PYTHONDONTWRITEBYTECODE=1
export PYTHONFAULTHANDLER=1
# Keep hypothesis' example database out of the checkout copy's way.
export HYPOTHESIS_STORAGE_DIRECTORY="$scratch/.hypothesis"

# The instrumented module must be the one the tests import.
(cd "$scratch" && "$py" -c '
import sys, os
sys.path.insert(0, os.getcwd())
import traceml._core as c
assert c.__file__.startswith(os.getcwd()), c.__file__
print("== testing", c.__file__)
')

# UBSan (GCC's standalone runtime) ignores log_path and writes to the
# process's stderr, so pytest captures only sys.stdout/sys.stderr
# (--capture=sys): a report written to fd 2 by the C code of the pytest
# process or of a child that shares its stderr lands in pytest.log.
run_pytest() {  # run_pytest LOG ARGS...: the exit status of pytest
    local log=$1
    shift
    set +e
    (cd "$scratch" && "$py" -m pytest -p no:cacheprovider --capture=sys -q \
        ${timeout_args[@]+"${timeout_args[@]}"} "$@") \
        2>&1 | tee "$log"
    local status=${PIPESTATUS[0]}
    set -e
    return "$status"
}

pattern='runtime error:|ERROR: AddressSanitizer|ERROR: LeakSanitizer|UndefinedBehaviorSanitizer|SUMMARY: AddressSanitizer'
check_reports() {  # check_reports LOG: exit 1 on any sanitizer report
    local log=$1 reports inline f
    # A log file holding only warnings (an allocation too large to make,
    # refused as asked by allocator_may_return_null) is not a report.
    reports=$(grep -E -l "$pattern" -r "$logdir" | sort || true)
    for f in $(find "$logdir" -type f | sort); do
        if [ "$(printf '%s\n' "$reports" | grep -c -x -F "$f")" -eq 0 ]; then
            echo "== sanitizer warning, not an error ($f):"
            head -c 400 "$f"
        fi
    done
    inline=$(grep -E -c "$pattern" "$log" || true)
    if [ -n "$reports" ] || [ "$inline" -gt 0 ]; then
        echo "== sanitizer reports:" >&2
        for f in $reports; do
            echo "---- $f" >&2
            cat "$f" >&2
        done
        if [ "$inline" -gt 0 ]; then
            echo "---- in the test output ($log):" >&2
            grep -E -A 12 "$pattern" "$log" >&2 || true
        fi
        echo "sanitize.sh: FAILED: sanitizer report(s): $(echo "$reports" | grep -c . || true) log file(s), $inline line(s) in the test output" >&2
        exit 1
    fi
}

start=$(date +%s)
rc=0
run_pytest "$scratch/pytest.log" "${pytest_args[@]}" || rc=$?
echo "== pytest exit status $rc after $(( $(date +%s) - start )) s"
check_reports "$scratch/pytest.log"

# A test that failed with no sanitizer report is tried once more, alone:
# under ASan every allocation of the interpreter and of torch goes through
# the sanitizer's allocator (PYTHONMALLOC=malloc), which slows the Python
# side of a DataLoader worker several times over, and a test of timing
# shape can miss its bound (seen in CI, 2026-11-30: workers busy 48% of the
# time where 70-90% is usual).  The memory checks are what this run is for;
# a failure that repeats, or any report on the second try, still fails it.
if [ "$rc" -eq 1 ]; then
    mapfile -t failed < <(grep -E '^FAILED ' "$scratch/pytest.log" | awk '{print $2}' | sort -u)
    if [ "${#failed[@]}" -gt 0 ] && [ "${#failed[@]}" -le 5 ]; then
        echo "== trying the ${#failed[@]} failed test(s) once more: ${failed[*]}"
        rc=0
        run_pytest "$scratch/pytest-retry.log" "${failed[@]}" || rc=$?
        echo "== pytest exit status $rc on the second try"
        check_reports "$scratch/pytest-retry.log"
        if [ "$rc" -eq 0 ]; then
            echo "sanitize.sh: note: ${failed[*]} failed once and passed on the second try"
        fi
    fi
fi
if [ "$rc" -ne 0 ]; then
    echo "sanitize.sh: FAILED: pytest exit status $rc, but no sanitizer report" \
         "(timing tests can fail under ASan's slowdown: see $scratch/pytest.log)" >&2
    exit 3
fi
echo "sanitize.sh: clean (ASan + UBSan, no reports, tests passed)"
