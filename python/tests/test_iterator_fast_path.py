"""The service iterator's per-element path (issue 34): next() and `for` go through a C++
tp_iternext slot, __next__() through pybind11; both hand out the same elements in order, end
alike, raise the same errors and count what they handed out in the read cursor."""

import gc
import signal
import time

import numpy as np
import pytest

import conveyor
from conftest import Cluster

ROW = 1024  # int64s per element: the 8 KiB elements of the iterator benchmark


@pytest.fixture(scope="module")
def one_worker():
    c = Cluster(workers=1)  # one worker: an OFF read's order is the dataset's
    yield c
    c.stop()


def _rows(n):
    return conveyor.Dataset.range(n * ROW).batch(ROW)


def test_next_for_and_dunder_next_hand_out_the_same_order(one_worker):
    it = iter(conveyor.distribute(_rows(60), one_worker.target, "parallel_epochs"))
    got = [next(it) for _ in range(20)] + [it.__next__() for _ in range(20)]
    got += [x for x in it]
    assert len(got) == 60
    for i, x in enumerate(got):
        assert x.dtype == np.int64 and x.shape == (ROW,)
        assert x[0] == i * ROW and x[-1] == (i + 1) * ROW - 1, i
        assert type(x.base) is conveyor._conveyor._ElementOwner
        assert not x.flags.owndata and x.flags.c_contiguous and x.flags.aligned


def test_the_end_is_stop_iteration_every_time(one_worker):
    it = iter(conveyor.distribute(conveyor.Dataset.range(3), one_worker.target, "parallel_epochs"))
    assert [int(x) for x in it] == [0, 1, 2]
    with pytest.raises(StopIteration):
        next(it)
    with pytest.raises(StopIteration):
        it.__next__()
    assert list(it) == [] and next(it, "end") == "end"


def test_arrays_outlive_their_iterator(one_worker):
    it = iter(conveyor.distribute(_rows(4), one_worker.target, "parallel_epochs"))
    kept = [next(it), it.__next__()]
    view = kept[1][5:9]
    it.close()
    del it, kept[1]
    gc.collect()
    assert kept[0][ROW - 1] == ROW - 1
    assert list(view) == [ROW + 5, ROW + 6, ROW + 7, ROW + 8]
    # Nested elements: a dict of a scalar, a vector and a string, each leaf owned alike.
    strings = np.array([b"x", b"y", b"z"])
    ds = conveyor.Dataset.from_tensor_slices({"a": np.arange(3), "b": (np.ones((3, 2)), strings)})
    got = list(conveyor.distribute(ds, one_worker.target, "parallel_epochs"))
    assert [int(e["a"]) for e in got] == [0, 1, 2]
    assert [e["b"][1] for e in got] == [b"x", b"y", b"z"]
    owner = conveyor._conveyor._ElementOwner
    assert all(e["b"][0].shape == (2,) and type(e["b"][0].base) is owner for e in got)


def test_errors_keep_their_class_and_message_through_next(one_worker):
    ds = conveyor.Dataset.tfrecord("/nonexistent/conveyor-fast-path.tfrecord")
    for take in (next, lambda it: it.__next__()):
        it = iter(conveyor.distribute(ds, one_worker.target, "parallel_epochs"))
        with pytest.raises(conveyor.ConveyorError, match="conveyor-fast-path.tfrecord"):
            take(it)
        it.close()


def test_a_signal_handler_interrupts_a_waiting_next(one_worker):
    class Interrupted(Exception):
        pass

    def handler(signum, frame):
        raise Interrupted()

    slow = conveyor.Dataset.range(2).map(conveyor.Function("sleep_us", us=1_500_000))
    it = iter(conveyor.distribute(slow, one_worker.target, "parallel_epochs"))
    previous = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        start = time.monotonic()
        with pytest.raises(Interrupted):
            next(it)  # waits in 100 ms slices, checking for signals between them
        assert time.monotonic() - start < 3
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        it.close()


def test_the_cursor_counts_what_next_handed_out(cluster):
    ds = conveyor.distribute(conveyor.Dataset.range(400), cluster.target, "distributed_epoch")
    it = iter(ds)
    first = [int(next(it)) for _ in range(25)] + [int(it.__next__()) for _ in range(12)]
    assert it.consumed_total == 37
    state = ds.state_dict()
    it.close()
    again = conveyor.distribute(conveyor.Dataset.range(400), cluster.target, "distributed_epoch")
    again.load_state_dict(state)
    rest = [int(x) for x in again]
    assert sorted(first + rest) == list(range(400))  # each element once: none lost, none twice
