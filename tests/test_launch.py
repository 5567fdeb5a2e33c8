"""The wrap iterator as torch's iterator to its user, and the launcher
(``python -m traceml run``) on scripts written as users write them.

What iter() of a wrapped DataLoader returns answers len(),
__length_hint__, bool() and the attribute reads it does not define itself
as torch's iterator does, while it holds it: ``tqdm(iter(loader))``,
``range(len(it))`` and reads of torch's private ``_workers`` run unchanged.
"""

import io
import itertools
import operator

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, IterableDataset, TensorDataset  # noqa: E402 - after importorskip("torch")

import traceml  # noqa: E402 - after importorskip("torch")

pytestmark = pytest.mark.filterwarnings(
    "ignore:This DataLoader will create:UserWarning"
)

_names = itertools.count()


def uname(tag="launch"):
    return f"test_launch-{tag}-{next(_names)}"


def tensor_loader(num_workers, n=20, batch_size=4, **kw):
    ds = TensorDataset(torch.arange(float(n)), torch.arange(n))
    return DataLoader(ds, batch_size=batch_size, num_workers=num_workers, **kw)


class Stream(IterableDataset):
    """An iterable dataset without a length."""

    def __iter__(self):
        return iter(range(6))


# --- the wrap iterator, in process -------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 2])
def test_len_and_length_hint_are_torchs(num_workers):
    loader = tensor_loader(num_workers, n=22)
    plain = iter(loader)
    it = iter(traceml.wrap(loader, name=uname()))
    assert len(it) == len(plain) == 6
    assert operator.length_hint(it) == operator.length_hint(plain) == 6
    assert it.__length_hint__() == 6
    assert bool(it) is bool(plain) is True
    del plain
    it.close()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_range_len_loop_as_tqdm_users_write_it(num_workers):
    loader = tensor_loader(num_workers)
    expected = [b[1].tolist() for b in loader]
    it = iter(traceml.wrap(loader, name=(name := uname())))
    got = [next(it)[1].tolist() for _ in range(len(it))]
    assert got == expected
    with pytest.raises(StopIteration):
        next(it)
    assert traceml.report(source=name)["steps"] == len(expected)


def test_tqdm_of_the_iterator_knows_its_total():
    tqdm = pytest.importorskip("tqdm").tqdm
    loader = tensor_loader(0)
    bar = tqdm(iter(traceml.wrap(loader, name=uname())), file=io.StringIO())
    assert bar.total == len(loader) == 5
    assert sum(1 for _ in bar) == 5


def test_private_workers_read_off_torchs_iterator():
    loader = tensor_loader(2)
    it = iter(traceml.wrap(loader, name=uname()))
    inner = it.inner
    assert it._workers is inner._workers
    assert [w.pid for w in it._workers] == [w.pid for w in inner._workers]
    assert it._num_workers == 2
    assert hasattr(it, "_task_info")
    next(it)
    # Its own names first: steps, close, inner are the WrapIter's.
    assert it.steps == 1 and it.inner is inner
    it.close()


def test_missing_attribute_raises_torchs_error():
    loader = tensor_loader(0)
    plain = iter(loader)
    it = iter(traceml.wrap(loader, name=uname()))
    with pytest.raises(AttributeError) as ours:
        it.no_such_thing  # noqa: B018 - the read is the test
    with pytest.raises(AttributeError) as theirs:
        plain.no_such_thing  # noqa: B018 - the read is the test
    assert str(ours.value) == str(theirs.value)


def test_dunders_are_never_forwarded():
    it = iter(traceml.wrap(tensor_loader(0), name=uname()))
    assert hasattr(it.inner, "__dict__")
    assert not hasattr(it, "__dict__")
    with pytest.raises(AttributeError):
        it.__wrapped__  # noqa: B018 - the read is the test


def test_released_iterator_forwards_nothing_and_says_why():
    it = iter(traceml.wrap(tensor_loader(0), name=uname()))
    assert it._num_workers == 0
    assert len(list(it)) == 5
    assert it.inner is None
    with pytest.raises(AttributeError, match="released"):
        it._num_workers  # noqa: B018 - the read is the test
    with pytest.raises(TypeError, match="released"):
        len(it)
    assert operator.length_hint(it) == 0
    assert bool(it) is True
    assert repr(it) == "<traceml wrap of a released iterator>"


def test_no_length_raises_what_torch_raises():
    loader = DataLoader(Stream(), batch_size=2)
    with pytest.raises(TypeError) as theirs:
        len(iter(loader))
    it = iter(traceml.wrap(loader, name=uname()))
    with pytest.raises(TypeError) as ours:
        len(it)
    assert str(ours.value) == str(theirs.value)
    assert [b.tolist() for b in it] == [[0, 1], [2, 3], [4, 5]]


def test_generators_and_lists_as_python_has_them():
    gen = iter(traceml.wrap((i for i in range(3)), name=uname()))
    with pytest.raises(TypeError, match="'generator' has no len"):
        len(gen)
    assert bool(gen) is True
    assert operator.length_hint(gen, 7) == 7   # neither len nor hint: the default
    lst = iter(traceml.wrap([1, 2, 3], name=uname()))
    assert operator.length_hint(lst) == 3
    next(lst)
    assert operator.length_hint(lst) == 2     # list_iterator's own hint
    assert list(lst) == [2, 3]


def test_repr_names_the_inner_iterator():
    loader = tensor_loader(0)
    it = iter(traceml.wrap(loader, name=uname()))
    assert repr(it) == f"<traceml wrap of {it.inner!r}>"
    assert "_SingleProcessDataLoaderIter" in repr(it)


def test_attribute_writes_stay_refused():
    it = iter(traceml.wrap(tensor_loader(0), name=uname()))
    with pytest.raises(AttributeError):
        it._num_workers = 3
    assert it.inner._num_workers == 0
