#!/usr/bin/env bash
# Run tools/smoke.py under valgrind memcheck against a debug build (-g -O1)
# of traceml._core made in a scratch copy of the working tree.
#
#   tools/memcheck.sh                 # the whole smoke run (DataLoader included)
#   tools/memcheck.sh --quick         # fewer batches
#   tools/memcheck.sh --no-torch      # skip the DataLoader part
#   tools/memcheck.sh --installed     # use traceml/_core*.so as installed
#
# Verdict, per process (the DataLoader workers and the forked child are
# followed too, one log each):
#   * valgrind runs with --error-exitcode=1: any memory error that the
#     suppressions do not cover fails the run;
#   * any error or "definitely lost" block with a frame in traceml._core
#     (the .so or csrc/) fails the run;
#   * definite leaks elsewhere (CPython keeps some objects to exit by
#     design) are counted and shown, not failed on.
#
# Suppressions: CPython's Misc/valgrind-python.supp and the distribution's
# python3.supp where found, plus two kinds of noise of the interpreter
# itself written below: glibc's dynamic loader reading past a strdup()ed
# string (strncmp in is_dst), and uninitialised-value reports raised *inside*
# libpython, its lib-dynload modules, numpy or torch (CPython 3.11 leaves
# the digit of a zero-size int uninitialised in _PyLong_FromByteArray and
# reads it, and so do numpy's int conversions and _json).  Invalid reads,
# writes and frees are never suppressed, nor is anything whose innermost
# frame is in traceml._core.
#
# Environment: PYTHON (default python3), MEMCHECK_DIR (scratch directory;
# kept on failure or with KEEP=1), VALGRIND_OPTS (extra valgrind options).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
py=$(command -v "$py") || { echo "memcheck.sh: no interpreter (set PYTHON)" >&2; exit 2; }
if ! command -v valgrind >/dev/null 2>&1; then
    echo "memcheck.sh: valgrind is not installed (apt-get install valgrind)" >&2
    exit 2
fi

installed=0
smoke_args=()
for a in "$@"; do
    case "$a" in
        --installed) installed=1 ;;
        *) smoke_args+=("$a") ;;
    esac
done

scratch=${MEMCHECK_DIR:-$(mktemp -d -t traceml-memcheck.XXXXXX)}
mkdir -p "$scratch"
keep=${KEEP:-0}
cleanup() {
    local rc=$?
    if [ "$rc" -eq 0 ] && [ "$keep" != 1 ] && [ -z "${MEMCHECK_DIR:-}" ]; then
        rm -rf "$scratch"
    else
        echo "memcheck.sh: logs kept in $scratch" >&2
    fi
}
trap cleanup EXIT

if [ "$installed" = 1 ]; then
    tree=$repo
else
    tree=$scratch/tree
    mkdir -p "$tree"
    if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        (cd "$repo" && git ls-files -z -c -o --exclude-standard \
            | xargs -0 -r -I{} sh -c 'test -e "{}" && printf "%s\0" "{}"' \
            | tar --null -T - -cf -) | tar -C "$tree" -xf -
    else
        (cd "$repo" && tar --exclude=build --exclude='*.so' --exclude='*.o' \
            --exclude=__pycache__ --exclude=.venv -cf - .) | tar -C "$tree" -xf -
    fi
    rm -f "$tree"/traceml/_core*.so
    echo "== building traceml._core with -g -O1 in $tree"
    (cd "$tree" && CFLAGS="-g -O1 -fno-omit-frame-pointer" \
        "$py" setup.py -q build_ext --inplace --build-temp "$scratch/obj" \
        > "$scratch/build.log" 2>&1) || { cat "$scratch/build.log" >&2; exit 2; }
fi

supp=$scratch/traceml-python.supp
cat > "$supp" <<'EOF'
{
   glibc-dl-is_dst-strncmp
   Memcheck:Addr8
   fun:strncmp
   fun:is_dst
}
{
   glibc-dl-strncmp-rpath
   Memcheck:Addr8
   fun:strncmp
   ...
   fun:_dl_map_object
}
{
   uninitialised-value8-libpython
   Memcheck:Value8
   obj:*libpython3*
}
{
   uninitialised-value8-lib-dynload
   Memcheck:Value8
   obj:*/lib-dynload/*
}
{
   uninitialised-value8-numpy
   Memcheck:Value8
   obj:*/site-packages/numpy/*
}
{
   uninitialised-value8-torch
   Memcheck:Value8
   obj:*/site-packages/torch/*
}
{
   uninitialised-value4-libpython
   Memcheck:Value4
   obj:*libpython3*
}
{
   uninitialised-value4-lib-dynload
   Memcheck:Value4
   obj:*/lib-dynload/*
}
{
   uninitialised-value4-numpy
   Memcheck:Value4
   obj:*/site-packages/numpy/*
}
{
   uninitialised-value4-torch
   Memcheck:Value4
   obj:*/site-packages/torch/*
}
{
   uninitialised-value2-libpython
   Memcheck:Value2
   obj:*libpython3*
}
{
   uninitialised-value2-lib-dynload
   Memcheck:Value2
   obj:*/lib-dynload/*
}
{
   uninitialised-value2-numpy
   Memcheck:Value2
   obj:*/site-packages/numpy/*
}
{
   uninitialised-value2-torch
   Memcheck:Value2
   obj:*/site-packages/torch/*
}
{
   uninitialised-value1-libpython
   Memcheck:Value1
   obj:*libpython3*
}
{
   uninitialised-value1-lib-dynload
   Memcheck:Value1
   obj:*/lib-dynload/*
}
{
   uninitialised-value1-numpy
   Memcheck:Value1
   obj:*/site-packages/numpy/*
}
{
   uninitialised-value1-torch
   Memcheck:Value1
   obj:*/site-packages/torch/*
}
{
   uninitialised-cond-libpython
   Memcheck:Cond
   obj:*libpython3*
}
{
   uninitialised-cond-lib-dynload
   Memcheck:Cond
   obj:*/lib-dynload/*
}
{
   uninitialised-cond-numpy
   Memcheck:Cond
   obj:*/site-packages/numpy/*
}
{
   uninitialised-cond-torch
   Memcheck:Cond
   obj:*/site-packages/torch/*
}
EOF
supp_args=(--suppressions="$supp")
prefix=$("$py" -c 'import sys; print(sys.base_prefix)')
for f in "$prefix/lib/valgrind/valgrind-python.supp" \
         "$prefix/share/doc/python3/valgrind-python.supp" \
         /usr/lib/valgrind/python3.supp /usr/lib/valgrind/python.supp; do
    [ -f "$f" ] && supp_args+=(--suppressions="$f")
done

logs=$scratch/logs
rm -rf "$logs"
mkdir -p "$logs"
echo "== valgrind memcheck: tools/smoke.py ${smoke_args[*]:-}"
start=$(date +%s)
set +e
(cd "$tree" && PYTHONMALLOC=malloc PYTHONDONTWRITEBYTECODE=1 \
    valgrind --tool=memcheck --error-exitcode=1 --leak-check=full \
        --show-leak-kinds=definite --errors-for-leak-kinds=none \
        --num-callers=40 --log-file="$logs/vg.%p.log" "${supp_args[@]}" \
        ${VALGRIND_OPTS:-} \
        "$py" tools/smoke.py "${smoke_args[@]}")
rc=$?
set -e
echo "== valgrind exit status $rc after $(( $(date +%s) - start )) s"

# Per process: its errors and definite leaks, and which of them have a
# frame in traceml._core.
"$py" - "$logs" "$rc" "$tree/csrc" <<'EOF'
import glob, os, re, sys

logs, rc, csrc = sys.argv[1], int(sys.argv[2]), sys.argv[3]
# A frame is ours when it is in the .so, or (with debug info) in one of the
# csrc/ sources: valgrind prints "fn (store.c:113)".
sources = sorted(os.listdir(csrc)) if os.path.isdir(csrc) else []
ours_pat = re.compile(r"traceml/_core|/csrc/|\bcsrc/"
                      + "".join(r"|\(" + re.escape(f) + r":\d+\)" for f in sources))
fail = rc != 0
for path in sorted(glob.glob(os.path.join(logs, "vg.*.log"))):
    text = open(path, errors="replace").read()
    pid = os.path.basename(path).split(".")[1]
    cmd = re.search(r"Command: (.*)", text)
    blocks, cur = [], []
    for line in text.splitlines():
        body = re.sub(r"^==\d+== ?", "", line)
        if body == "":
            if cur:
                blocks.append(cur)
            cur = []
        else:
            cur.append(body)
    if cur:
        blocks.append(cur)
    errors = [b for b in blocks if re.match(
        r"(Invalid (read|write|free)|Mismatched free|Conditional jump|Use of uninitialised"
        r"|Syscall param|Source and destination overlap|Argument .* of function)", b[0])]
    leaks = [b for b in blocks if "definitely lost in loss record" in b[0]]
    ours_err = [b for b in errors if any(ours_pat.search(l) for l in b)]
    ours_leak = [b for b in leaks if any(ours_pat.search(l) for l in b)]
    summary = re.search(r"ERROR SUMMARY: (.*)", text)
    lost = re.search(r"definitely lost: (.*)", text)
    print(f"-- pid {pid}: {cmd.group(1) if cmd else '?'}")
    print(f"   ERROR SUMMARY: {summary.group(1) if summary else '(none: killed?)'}")
    print(f"   definitely lost: {lost.group(1) if lost else '0 bytes'}"
          f"  ({len(leaks)} records, {len(ours_leak)} with a traceml._core frame)")
    print(f"   errors with a traceml._core frame: {len(ours_err)}")
    for b in (ours_err + ours_leak)[:20]:
        print("   ** " + "\n      ".join(b[:25]))
    if errors and not ours_err:
        for b in errors[:5]:
            print("   (not in traceml._core) " + "\n      ".join(b[:12]))
    if ours_err or ours_leak:
        fail = True
print("memcheck.sh: " + ("FAILED" if fail else
      "clean: no memory errors, no definite leak with a traceml._core frame"))
sys.exit(1 if fail else 0)
EOF
