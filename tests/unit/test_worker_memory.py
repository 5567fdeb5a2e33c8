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


def test_large_samples_get_the_allocators_experiment():
    # A new 12 MB tensor a sample, nothing kept (helper 32B): the workers'
    # memory grew 1.2 GB, and a plain DataLoader grew alike; glibc's heap
    # kept the freed blocks.  The reading names the experiment that tells
    # the allocator's growth from the dataset's.
    got = worker_memory.memory_findings(_mem(1235 * MB, 1300 * MB), 2, "fork",
                                        sample_bytes=12.6e6)
    ((code, p),) = got
    assert code == "workers_keep_memory" and p["sample_bytes"] == 12.6e6
    words = worker_memory.WORDS[code](p)
    assert "MALLOC_MMAP_THRESHOLD_=131072" in words and "12.6 MB" in words
    # Samples under the threshold's start: the dataset's reading alone.
    (( _, p),) = worker_memory.memory_findings(
        _mem(215 * MB, 261 * MB), 2, "fork",
        sample_bytes=worker_memory.ALLOCATOR_SAMPLE_BYTES - 1)
    assert "sample_bytes" not in p
    assert "MALLOC" not in worker_memory.WORDS["workers_keep_memory"](p)
