"""worker_memory: copy-on-read grows a worker's unshared memory with its
resident memory flat; memory the worker allocates and keeps grows both."""

from traceml.findings import worker_memory

MB = 2**20


def _mem(uss_growth, rss_growth):
    return {"available": True, "worker_uss_growth": uss_growth,
            "worker_rss_growth": rss_growth, "epoch_jumps": []}


def test_flat_resident_memory_is_copy_on_read():
    # 3 million strings read at random: USS +233 MB, RSS flat.
    got = worker_memory.memory_findings(_mem(233 * MB, 2 * MB), 2, "fork")
    assert [c for c, _ in got] == ["copy_on_read"]


def test_resident_memory_growing_with_it_is_memory_the_workers_keep():
    # A list that grows 1 MB a sample: USS +215 MB, RSS +261 MB.
    got = worker_memory.memory_findings(_mem(215 * MB, 261 * MB), 2, "fork")
    assert [c for c, _ in got] == ["workers_keep_memory"]
    words = worker_memory.WORDS["workers_keep_memory"](got[0][1])
    assert "not copy-on-read" in words and "225.4 MB" in words


def test_without_an_rss_reading_the_growth_reads_as_before():
    got = worker_memory.memory_findings(_mem(64 * MB, None), 4, None)
    assert [c for c, _ in got] == ["copy_on_read"]
    assert worker_memory.memory_findings(_mem(8 * MB, 8 * MB), 4, "fork") == []
