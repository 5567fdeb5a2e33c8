"""Saved runs as untrusted input: a corpus of crafted run files, each of
which must end in a RunFileError naming the file (within a memory and a
time limit), every key of the summary deleted or retyped in turn, and
hypothesis mutating valid files.  Whatever loads must print, render and
compare without an error."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import corpus
import traceml
from traceml import _core, render
from traceml.result import MAX_JSON_DEPTH, RunFileError, schema
from traceml.findings import stall_threshold

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIELDS = _core.RECORD_DTYPE.names


# --- valid runs ---------------------------------------------------------------------

def _rich_cases():
    """Corpus cases whose reports fill every section: workers and
    attribution, a stuck fetch, a trend, epoch starts, periodic stalls."""
    return [corpus.one_slow_worker(0, 1), corpus.stuck(0, None, 120.0),
            corpus.trend(0, 1.0, 40.0), corpus.epoch_start(1, 2), corpus.lockstep(0, 4),
            corpus.slow_sample(0, 5, 4), corpus.random_stalls(0, 0.1, 100)]


@pytest.fixture(scope="module")
def reports():
    return [corpus.replay(c) for c in _rich_cases()]


@pytest.fixture(scope="module")
def good_file(tmp_path_factory, reports):
    """A saved run of the corpus case with the most sections filled."""
    return reports[0].save(tmp_path_factory.mktemp("good") / "good.traceml")


def _members(path) -> dict:
    with zipfile.ZipFile(path) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def _zip(path, members: dict, compression=zipfile.ZIP_STORED):
    """A zip of ``members`` ({name: bytes}, or {name: (bytes, method)})."""
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            data, method = data if isinstance(data, tuple) else (data, compression)
            z.writestr(zipfile.ZipInfo(name), data, compress_type=method)
    return path


def _npy(arr, allow_pickle=False) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=allow_pickle)
    return buf.getvalue()


def _header(summary: dict, **over) -> bytes:
    return json.dumps({"format": "traceml-run", "format_version": traceml.io.FORMAT_VERSION,
                       "summary": summary, **over}).encode()


def exercise(rep, base) -> None:
    """Everything a user does with a loaded run, minus the plot (slow):
    must not raise."""
    assert str(rep) and repr(rep)
    rep.to_dict()
    render.report_html(rep.summary, None)
    for pair in ((base, rep), (rep, base), (rep, rep)):
        c = traceml.compare(*pair, labels=("a", "b"))
        assert str(c) and c._repr_html_()


def _round_trips(reports, tmp_path):
    for rep in reports:
        path = rep.save(tmp_path / "r.traceml")
        back = traceml.load(path)
        assert back == rep, rep["source"]
        assert str(back) == str(rep)


def test_rich_reports_match_the_schema(tmp_path, reports):
    """The schema admits what the report builder writes."""
    _round_trips(reports, tmp_path)


@pytest.mark.slow
def test_every_corpus_report_matches_the_schema(tmp_path):
    """... for every case of the diagnostic corpus."""
    _round_trips([corpus.replay(case) for case in corpus.corpus()], tmp_path)


def test_schema_is_versioned_with_the_format():
    from traceml.result import READS_VERSIONS

    s = schema()
    assert s["properties"]["format_version"]["enum"] == list(READS_VERSIONS)
    assert traceml.io.FORMAT_VERSION == max(READS_VERSIONS)
    assert s["properties"]["format"] == {"const": traceml.io.FORMAT}

    assert s["$defs"]["stalls"]["properties"]["threshold_s"]["maximum"] == \
        stall_threshold.MAX_THRESHOLD_S


def test_schema_ships_as_package_data():
    """The schema travels in a wheel: pyproject names it as package data."""
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        cfg = tomllib.load(f)
    import fnmatch
    patterns = cfg["tool"]["setuptools"]["package-data"]["traceml"]
    assert any(fnmatch.fnmatch("run_schema.json", p) for p in patterns), patterns
    # Beside the traceml under test: the checkout's, or an installed wheel's
    # (tools/check_dist.sh runs these tests against the wheel).
    assert os.path.exists(os.path.join(os.path.dirname(traceml.__file__), "run_schema.json"))


# --- every key deleted or retyped -------------------------------------------------------

def _paths(obj, prefix=()):
    """Every key path of a JSON object (lists: their first item)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list) and obj:
        yield prefix + (0,)
        yield from _paths(obj[0], prefix + (0,))


def _set(obj, path, value, delete=False):
    for k in path[:-1]:
        obj = obj[k]
    if delete:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value


# Stand-ins of the wrong type: a string, a negative int, a float where an
# int goes, a list, a dict, a bool.
WRONG = ("x", -7, 2.5, [1], {"k": 1}, True, None)


def _summaries(reports):
    return [json.loads(json.dumps(r.summary)) for r in reports]


@pytest.mark.slow
def test_each_key_deleted_or_retyped_is_refused_or_harmless(tmp_path, reports):
    """Deleting each key of a real summary, or giving it a value of each
    wrong type, either raises RunFileError naming the file and the key, or
    loads a run that prints, renders and compares."""
    base = reports[4]
    refused = loaded = 0
    seen = set()
    crashed = []
    for src, summary in zip(reports, _summaries(reports)):
        members = _members(src.save(tmp_path / "src.traceml"))
        for path in _paths(summary):
            shape = tuple("[]" if isinstance(k, int) else k for k in path)
            if shape in seen:
                continue
            seen.add(shape)
            for value in ("<delete>", *WRONG):
                doc = json.loads(json.dumps(summary))
                _set(doc, path, value, delete=value == "<delete>")
                members["summary.json"] = _header(doc)
                rep_path = _zip(tmp_path / "k.traceml", members)
                try:
                    rep = traceml.load(rep_path)
                except RunFileError as exc:
                    refused += 1
                    assert "k.traceml" in str(exc) and "summary.json" in str(exc)
                    continue
                loaded += 1
                try:
                    exercise(rep, base)
                except Exception as exc:  # noqa: BLE001 - each crash is listed
                    crashed.append(f"{'.'.join(map(str, path))} = {value!r}: "
                                   f"{type(exc).__name__}: {exc}")
    assert not crashed, "\n".join(crashed)
    assert refused > 100 and loaded > 100, (refused, loaded)


@pytest.mark.parametrize("key,value,word", [
    ("steps", "many", "summary.steps"),
    ("steps", -1, "summary.steps"),
    ("steps", 10**30, "summary.steps"),
    ("input_wait_s", {"mean": 1.0}, "summary.input_wait_s"),
    ("stalls", None, "summary.stalls"),
    ("diagnosis", "FINE", "summary.diagnosis"),
    ("notes", [1, 2], "summary.notes.0"),
    ("cadence", {"period": "4"}, "summary.cadence"),
])
def test_retyped_key_names_the_key(tmp_path, good_file, key, value, word):
    members = _members(good_file)
    doc = json.loads(members["summary.json"])
    doc["summary"][key] = value
    members["summary.json"] = json.dumps(doc).encode()
    with pytest.raises(RunFileError, match="bad.traceml") as info:
        traceml.load(_zip(tmp_path / "bad.traceml", members))
    assert word in str(info.value) and info.value.key.startswith(word)
    assert info.value.member == "summary.json"


def test_index_past_the_steps_is_refused(tmp_path, good_file):
    members = _members(good_file)
    doc = json.loads(members["summary.json"])
    doc["summary"]["stalls"]["steps"].append(doc["summary"]["steps"])
    members["summary.json"] = json.dumps(doc).encode()
    with pytest.raises(RunFileError, match="summary.stalls.steps"):
        traceml.load(_zip(tmp_path / "idx.traceml", members))


# --- the crafted corpus -------------------------------------------------------------------

def _replace(good, tmp, name, **members):
    """``good`` with members replaced (value bytes, or (bytes, method)), or
    dropped (value None)."""
    out = _members(good)
    for k, v in members.items():
        k = k.replace("__", ".")
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return _zip(tmp / name, out)


def _patch_central(path, member: str, *, file_size=None, compress_size=None, flags=None,
                   method=None):
    """Rewrite fields of ``member``'s central-directory entry in place."""
    data = bytearray(open(path, "rb").read())
    sig = b"PK\x01\x02"
    at = data.find(sig)
    while at >= 0:
        name_len = struct.unpack_from("<H", data, at + 28)[0]
        name = bytes(data[at + 46:at + 46 + name_len]).decode()
        if name == member:
            if flags is not None:
                struct.pack_into("<H", data, at + 8, flags)
            if method is not None:
                struct.pack_into("<H", data, at + 10, method)
            if compress_size is not None:
                struct.pack_into("<I", data, at + 20, compress_size)
            if file_size is not None:
                struct.pack_into("<I", data, at + 24, file_size)
        at = data.find(sig, at + 4)
    open(path, "wb").write(bytes(data))
    return path


def _bomb(method, size=8 * 2**20) -> tuple:
    return (b"\0" * size, method)


def _deep(depth):
    return ("[" * depth + "]" * depth).encode()


def crafted(good, tmp):
    """(name, path, words the message must hold) of each crafted file."""
    ok = _members(good)
    summary = json.loads(ok["summary.json"])["summary"]
    n = summary["steps"]
    cases = []

    def add(name, path, *words):
        cases.append((name, str(path), words))

    # Zip bombs: by ratio (a deflated member over 1 MiB, 8 MiB of zeros in
    # 8 KB), and by declared size (a directory that claims 2 GB, or 900 MB
    # in each of six members).
    add("bomb-ratio-array", _replace(good, tmp, "bomb1.traceml",
                                     begin_ns__npy=_bomb(zipfile.ZIP_DEFLATED)),
        "begin_ns.npy", "ratio")
    add("bomb-ratio-summary", _replace(good, tmp, "bomb2.traceml",
                                       summary__json=_bomb(zipfile.ZIP_DEFLATED)),
        "summary.json", "ratio")
    p = _patch_central(_replace(good, tmp, "bomb3.traceml"), "end_ns.npy",
                       file_size=2**31, compress_size=2**31)
    add("bomb-declared-member", p, "end_ns.npy", "max_member_bytes")
    p = _replace(good, tmp, "bomb4.traceml")
    for f in FIELDS:
        _patch_central(p, f"{f}.npy", file_size=900 * 2**20, compress_size=900 * 2**20)
    add("bomb-declared-total", p, "max_bytes")
    add("bomb-bzip2", _replace(good, tmp, "bomb5.traceml",
                               begin_ns__npy=_bomb(zipfile.ZIP_BZIP2, 2**20)),
        "begin_ns.npy", "bzip2")
    # Each compression method: truncated and corrupt members.
    for method, tag in ((zipfile.ZIP_STORED, "stored"), (zipfile.ZIP_DEFLATED, "deflate"),
                        (zipfile.ZIP_BZIP2, "bzip2"), (zipfile.ZIP_LZMA, "lzma")):
        p = _zip(tmp / f"{tag}.traceml", ok, compression=method)
        data = open(p, "rb").read()
        cut = tmp / f"{tag}-cut.traceml"
        cut.write_bytes(data[: len(data) * 2 // 3])
        add(f"truncated-{tag}", cut, f"{tag}-cut.traceml")
        # Flip bytes inside the data of end_ns.npy (after its local header).
        with zipfile.ZipFile(p) as z:
            info = z.getinfo("end_ns.npy")
        start = info.header_offset + 30 + len(info.filename) + 140
        bad = bytearray(data)
        for i in range(start, start + 64):
            bad[i] ^= 0x5A
        corrupt = tmp / f"{tag}-corrupt.traceml"
        corrupt.write_bytes(bytes(bad))
        add(f"corrupt-{tag}", corrupt, f"{tag}-corrupt.traceml")
        if tag in ("stored", "deflate"):
            p2 = _zip(tmp / f"{tag}-short.traceml", ok, compression=method)
            _patch_central(p2, "flags.npy", file_size=len(ok["flags.npy"]) + 8)
            add(f"declared-longer-{tag}", p2, "flags.npy")
    add("encrypted", _patch_central(_replace(good, tmp, "enc.traceml"), "epoch.npy",
                                    flags=1), "epoch.npy", "encrypted")
    add("unknown-method", _patch_central(_replace(good, tmp, "m99.traceml"), "epoch.npy",
                                         method=99), "epoch.npy", "method 99")
    # Arrays: NaN, out of range, wrong kind, shape, pickles.
    bad_arrays = {
        "nan": np.full(n, np.nan),
        "float-integral": np.arange(n, dtype=np.float64),
        "uint64-huge": np.full(n, 2**64 - 1, dtype=np.uint64),
        "negative": np.full(n, -5, dtype=np.int64),
        "structured": np.zeros(n, dtype=[("a", "<i4"), ("b", "<i4")]),
        "two-d": np.zeros((n, 1), dtype=np.int64),
        "short": np.zeros(n - 1, dtype=np.int64),
        "int32": np.zeros(n, dtype=np.int32),
        "pickled": np.array([{"run": "code"}] * n, dtype=object),
        "big-endian-huge": np.full(n, 2**63 - 1, dtype=">i8"),
    }
    for tag, arr in bad_arrays.items():
        add(f"array-{tag}", _replace(good, tmp, f"arr-{tag}.traceml",
                                     fetch_done_ns__npy=_npy(arr, allow_pickle=True)),
            "fetch_done_ns.npy")
    add("array-epoch-negative", _replace(good, tmp, "epneg.traceml",
                                         epoch__npy=_npy(np.full(n, -1, np.int32))),
        "epoch.npy")
    huge = bytearray(ok["begin_ns.npy"])
    head = np.lib.format.header_data_from_array_1_0(np.zeros(n, np.int64))
    head["shape"] = (10**12,)
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, head)
    add("array-declared-shape", _replace(good, tmp, "shape.traceml",
                                         begin_ns__npy=buf.getvalue() + bytes(huge[128:])),
        "begin_ns.npy")
    add("array-garbage-header", _replace(good, tmp, "hdr.traceml",
                                         source__npy=b"\x93NUMPY\x01\x00\xff\xff{'descr'"),
        "source.npy")
    add("array-missing", _replace(good, tmp, "miss.traceml", flags__npy=None), "flags")
    # Summary: counts, JSON numbers, nesting, versions, encodings.
    for tag, steps in (("huge", 10**12), ("short", n + 1), ("neg", -1), ("str", "many")):
        s = dict(summary, steps=steps)
        add(f"steps-{tag}", _replace(good, tmp, f"steps-{tag}.traceml",
                                     summary__json=_header(s)), "steps")
    text = _header(summary).decode()
    for tag, literal in (("nan", "NaN"), ("inf", "Infinity"), ("big", "1e999"),
                         ("digits", "9" * 5000)):
        bad = text.replace('"wall_s":', f'"wall_s":{literal},"x_wall":', 1)
        add(f"json-{tag}", _replace(good, tmp, f"json-{tag}.traceml",
                                    summary__json=bad.encode()), "summary.json")
    add("json-deep", _replace(good, tmp, "deep.traceml", summary__json=_deep(100_000)),
        "summary.json", "nested")
    inner = text[:-1] + ',"x":' + _deep(MAX_JSON_DEPTH + 1).decode() + "}"
    add("json-deep-inside", _replace(good, tmp, "deep2.traceml",
                                     summary__json=inner.encode()), "summary.json", "nested")
    add("json-not-utf8", _replace(good, tmp, "latin.traceml",
                                  summary__json=b'{"format": "\xff"}'), "summary.json")
    add("json-list", _replace(good, tmp, "list.traceml", summary__json=b"[1, 2]"),
        "not a traceml run file")
    for v in (0, 4, "3", True, None):
        add(f"version-{v}", _replace(good, tmp, f"v{v}.traceml",
                                     summary__json=_header(summary, format_version=v)),
            "written by format version", "this traceml reads 1, 2 and 3")
    # Format 2's delivery arrays: a float, a 2-D, a short one, values below -1.
    for tag, arr in (("float", np.zeros(n)), ("2d", np.zeros((n, 1), np.int64)),
                     ("short", np.zeros(n - 1, np.int64)),
                     ("below", np.full(n, -2, np.int64)),
                     ("uint64", np.full(n, 2**64 - 1, np.uint64))):
        add(f"delivery-{tag}", _replace(good, tmp, f"dlv-{tag}.traceml",
                                        delivery_ranks__npy=_npy(arr)), "delivery_ranks.npy")
    add("no-summary", _replace(good, tmp, "nosum.traceml", summary__json=None),
        "no summary.json")
    # Paths that are not run files.
    fifo = tmp / "fifo.traceml"
    os.mkfifo(fifo)
    add("fifo", fifo, "FIFO")
    add("dev-zero", "/dev/zero", "device")
    add("directory", tmp, "directory")
    add("missing", tmp / "missing.traceml", "no such file")
    empty = tmp / "empty.traceml"
    empty.write_bytes(b"")
    add("empty", empty, "empty.traceml")
    return cases


_CHILD = r"""
import json, resource, sys, time
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
import traceml
out = []
for name, path in json.load(sys.stdin):
    t = time.monotonic()
    try:
        traceml.load(path)
        out.append([name, "loaded", "", time.monotonic() - t])
    except traceml.RunFileError as exc:
        out.append([name, "RunFileError", str(exc), time.monotonic() - t])
    except BaseException as exc:
        out.append([name, type(exc).__name__, str(exc), time.monotonic() - t])
print(json.dumps(out))
"""

# The address space the child may use: Python, NumPy and traceml take
# about 300-600 MB of it on this machine (thread stacks, the OpenBLAS
# arena); the good run needs little more.  A bomb would need gigabytes.
CHILD_AS_BYTES = 1536 * 2**20


def test_crafted_files_are_refused_within_memory_and_time(tmp_path, good_file):
    cases = crafted(good_file, tmp_path)
    cases.append(("good", str(good_file), ()))
    env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(CHILD_AS_BYTES)],
                          input=json.dumps([[c[0], c[1]] for c in cases]),
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = {name: (kind, msg) for name, kind, msg, _ in json.loads(proc.stdout)}
    assert got["good"][0] == "loaded", got["good"]
    for name, path, words in cases[:-1]:
        kind, msg = got[name]
        assert kind == "RunFileError", (name, kind, msg)
        assert path in msg, (name, msg)
        for w in words:
            assert w in msg, (name, w, msg)


def test_missing_file_is_also_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        traceml.load(tmp_path / "nope.traceml")
    assert isinstance(info.value, RunFileError) and info.value.path.endswith("nope.traceml")


def test_what_already_held_still_holds(tmp_path, good_file, reports):
    """Unknown members and path-traversal names are ignored unread; a
    pickled array is refused without unpickling it."""
    members = _members(good_file)
    members["../../evil.npy"] = _npy(np.array([os.system], dtype=object),
                                     allow_pickle=True)
    members["/abs/x"] = b"junk"
    members["notes.txt"] = _bomb(zipfile.ZIP_BZIP2, 2**20)
    back = traceml.load(_zip(tmp_path / "extra.traceml", members))
    assert back == reports[0]
    members = _members(good_file)
    members["flags.npy"] = _npy(np.array([os.system] * reports[0]["steps"], dtype=object),
                                allow_pickle=True)
    with pytest.raises(RunFileError, match="pickle"):
        traceml.load(_zip(tmp_path / "pickle.traceml", members))


def test_limits_can_be_raised_and_are_checked(tmp_path, good_file, reports):
    with pytest.raises(RunFileError, match="max_member_bytes=100"):
        traceml.load(good_file, max_member_bytes=100)
    with pytest.raises(RunFileError, match="max_bytes=1000"):
        traceml.load(good_file, max_bytes=1000)
    # A deflated member over 1 MiB at about 1000:1: refused, then read when raised.
    rep = reports[0]
    members = _members(good_file)
    doc = json.loads(members["summary.json"])
    doc["padding"] = " " * (2 * 2**20)
    members["summary.json"] = (json.dumps(doc).encode(), zipfile.ZIP_DEFLATED)
    path = _zip(tmp_path / "padded.traceml", members)
    with pytest.raises(RunFileError, match="ratio"):
        traceml.load(path)
    assert traceml.load(path, max_ratio=2000) == rep
    for bad, exc in ((0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(exc, match="max_ratio"):
            traceml.load(good_file, max_ratio=bad)


def test_arrays_of_other_byte_order_and_signedness_load(tmp_path, good_file, reports):
    """A plain integer array of the right size in either byte order, or
    unsigned within range, is read as its values."""
    rep = reports[0]
    members = _members(good_file)
    members["begin_ns.npy"] = _npy(rep.steps["begin_ns"].astype(">i8"))
    members["end_ns.npy"] = _npy(rep.steps["end_ns"].astype("<u8"))
    assert traceml.load(_zip(tmp_path / "order.traceml", members)) == rep


def _write_format_1(rep, path):
    """A run file as traceml wrote format 1 (up to db9e29d): deflated
    members, summary.json indented, the delivery lists inside it."""
    header = {"format": "traceml-run", "format_version": 1, "summary": rep.to_dict()}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("summary.json", json.dumps(header, indent=1))
        for field in rep.steps.dtype.names:
            z.writestr(f"{field}.npy", _npy(np.ascontiguousarray(rep.steps[field])))
    return path


def test_format_1_files_still_load(tmp_path, reports):
    for rep in reports:
        assert traceml.load(_write_format_1(rep, tmp_path / "v1.traceml")) == rep


def test_delivery_lists_travel_as_arrays(tmp_path, reports):
    """Format 2 keeps the per-step delivery lists out of summary.json, in
    int64 members (-1 for None), and load gives the lists back."""
    rep = traceml.Report(reports[0].to_dict(), reports[0].steps)
    d = rep["delivery"]
    d["ranks"][3] = d["workers"][5] = None  # unknown, as a reset() mid-epoch leaves
    assert len(d["ranks"]) == rep["steps"]
    path = rep.save(tmp_path / "d.traceml")
    with zipfile.ZipFile(path) as z:
        header = json.loads(z.read("summary.json"))
    assert "ranks" not in header["summary"]["delivery"]
    assert header["summary"]["delivery"]["known"] == d["known"]
    with np.load(path) as arrays:
        want = [-1 if r is None else r for r in d["ranks"]]
        np.testing.assert_array_equal(arrays["delivery_ranks"], want)
        assert arrays["delivery_workers"].dtype == np.int64
    back = traceml.load(path)
    assert back["delivery"] == d and back == rep
    # Workers all unknown (num_workers=0), and lists that are not whole
    # numbers, which stay in the JSON for the schema to judge.
    none = traceml.Report(rep.to_dict(), rep.steps)
    none.summary["delivery"]["workers"] = [None] * rep["steps"]
    assert traceml.load(none.save(tmp_path / "none.traceml")) == none
    floats = traceml.Report(rep.to_dict(), rep.steps)
    floats.summary["delivery"]["ranks"] = [None, 1.5] * (rep["steps"] // 2)
    with pytest.raises(RunFileError, match="summary.delivery.ranks"):
        traceml.load(floats.save(tmp_path / "floats.traceml"))
    # A summary whose lists are not one int or None per step keeps them.
    odd = traceml.Report(rep.to_dict(), rep.steps)
    odd.summary["delivery"]["ranks"] = d["ranks"][:-1]
    assert traceml.load(odd.save(tmp_path / "odd.traceml")) == odd


def test_json_depth_counts_brackets_outside_strings():
    from traceml.result import _json_depth

    for text, depth in (('{"a": [1, {"b": []}]}', 4), ('"[[[["', 0),
                        ('["\\"[[", []]', 2), ('["\\\\", [[]]]', 3), ("", 0),
                        ('{"a": "}}}]]]"}', 1), ('["\\\\\\"[", [[]]]', 3),
                        ('[[["\\\\\\\\"]]]', 3), ("[1, 2]", 1), ("3", 0)):
        assert _json_depth(text.encode()) == depth, text
    assert _json_depth(_deep(30)) == 30


@pytest.mark.parametrize("seed", range(5))
def test_json_depth_agrees_with_the_parser(seed):
    """On random nested JSON with strings full of brackets, quotes and
    backslashes, the depth is that of the parsed object."""
    from traceml.result import _json_depth

    rng = np.random.default_rng(seed)

    def make(d):
        if d == 0 or rng.random() < 0.3:
            return "".join(rng.choice(list('[]{}"\\ab'), size=int(rng.integers(0, 6))))
        kids = [make(d - 1) for _ in range(int(rng.integers(0, 3)))]
        return kids if rng.random() < 0.5 else {str(i): k for i, k in enumerate(kids)}

    def depth(o):
        if isinstance(o, list):
            return 1 + max((depth(x) for x in o), default=0)
        if isinstance(o, dict):
            return 1 + max((depth(x) for x in o.values()), default=0)
        return 0

    for _ in range(50):
        obj = make(6)
        assert _json_depth(json.dumps(obj).encode()) == depth(obj)


# --- mutation: hypothesis --------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402 - the hypothesis tests start here
from hypothesis import strategies as st  # noqa: E402 - the hypothesis tests start here

_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5),
                    st.lists(st.integers(-3, 300), max_size=3),
                    st.dictionaries(st.sampled_from(["0", "1", "label", "x"]),
                                    st.integers(-3, 3), max_size=2))


def _check_mutant(path, base):
    try:
        rep = traceml.load(path)
    except RunFileError as exc:
        assert str(path) in str(exc)
        return
    exercise(rep, base)


def _flips(good_file, tmp, data):
    raw = bytearray(open(good_file, "rb").read())
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    path = tmp / "flipped.traceml"
    path.write_bytes(bytes(raw))
    return path


def _key_mutant(reports, tmp, data):
    rep = data.draw(st.sampled_from(reports))
    doc = json.loads(json.dumps(rep.summary))
    for _ in range(data.draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        if not paths:
            break
        path = data.draw(st.sampled_from(paths))
        if data.draw(st.booleans()):
            _set(doc, path, None, delete=True)
        else:
            _set(doc, path, data.draw(_VALUES))
    members = _members(rep.save(tmp / "src.traceml"))
    members["summary.json"] = _header(doc)
    return _zip(tmp / "mutant.traceml", members)


def _mutation_test(examples):
    @settings(max_examples=examples, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow])
    @given(data=st.data())
    def run(tmp_path, good_file, reports, data):
        base = reports[4]
        if data.draw(st.booleans()):
            _check_mutant(_flips(good_file, tmp_path, data), base)
        else:
            _check_mutant(_key_mutant(reports, tmp_path, data), base)
    return run


test_mutated_files_load_or_raise_run_file_error = _mutation_test(40)
test_mutated_files_load_or_raise_run_file_error_long = pytest.mark.slow(_mutation_test(600))


@pytest.mark.slow
def test_retyped_keys_also_plot(tmp_path, reports):
    """The plot reads stall and epoch-start indices: any loaded mutant plots."""
    pytest.importorskip("matplotlib")
    for summary, rep in zip(_summaries(reports), reports):
        for key in (("stalls", "steps"), ("epoch_start", "steps"), ("stalls", "threshold_s")):
            for value in ([0, 1], [], 0.5, [rep["steps"] - 1]):
                doc = json.loads(json.dumps(summary))
                doc[key[0]][key[1]] = value
                members = _members(rep.save(tmp_path / "src.traceml"))
                members["summary.json"] = _header(doc)
                try:
                    back = traceml.load(_zip(tmp_path / "p.traceml", members))
                except RunFileError:
                    continue
                back.plot()


def test_validator_schema_has_every_reference_inlined():
    """The validator runs without the reference resolver: every $ref of
    run_schema.json is a bare local one that _inlined replaces."""
    from traceml.result import _inlined

    assert '"$ref"' in json.dumps(schema())
    assert '"$ref"' not in json.dumps(_inlined(schema()))
