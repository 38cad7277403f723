"""Arrays from the service iterator view the received batch buffer (issue 34): no copy per
numeric tensor. They keep their bytes alive after the iterator moved on, was closed, or the
cluster is gone; they are writable, and a write changes that array only."""

import gc

import numpy as np
import pytest

import conveyor
from conftest import Cluster

ROW = 1001  # int64s per element (not 1024: malloc's 8 KiB chunks lie 8208 bytes apart too)
# Consecutive [1001] int64 elements of one batch lie this far apart in its buffer (codec.cpp,
# format version 2: an entry prefix and pad of 8 bytes, an element head and pad of 8, the
# payload); copies of them (malloc, 8016-byte chunks) do not.
STRIDE = 8 + 8 + 8 * ROW


@pytest.fixture(scope="module")
def one_worker():
    c = Cluster(workers=1)  # one worker: each element once with parallel_epochs
    yield c
    c.stop()


def _rows(n):
    return conveyor.Dataset.range(n * ROW).batch(ROW)


def _address(x):
    return x.__array_interface__["data"][0]


def _check_row(x, i):
    assert x.dtype == np.int64 and x.shape == (ROW,)
    assert x[0] == i * ROW and x[-1] == (i + 1) * ROW - 1, i


def test_arrays_view_their_batch_and_keep_it_after_the_iterator_and_the_cluster_are_gone():
    cluster = Cluster(workers=1)  # one worker: an OFF read's order is the dataset's
    try:
        it = iter(conveyor.distribute(_rows(200), cluster.target, "parallel_epochs"))
        kept = [next(it) for _ in range(50)]
        # Viewed, not copied: neighbours from one batch sit one entry apart in its buffer.
        steps = [_address(b) - _address(a) for a, b in zip(kept, kept[1:])]
        assert steps.count(STRIDE) >= 40, steps
        assert all(x.flags.aligned and x.flags.c_contiguous for x in kept)
        moved_on = [x for x in it]  # the iterator reads past them: their batches are done
        assert len(moved_on) == 150
        it.close()
        del it
    finally:
        cluster.stop()
    del cluster
    gc.collect()
    for i, x in enumerate(kept + moved_on):
        _check_row(x, i)


def test_a_write_to_an_array_changes_that_array_only(one_worker):
    it = iter(conveyor.distribute(_rows(20), one_worker.target, "parallel_epochs"))
    got = [x for x in it]
    assert len(got) == 20
    first = sorted(got, key=lambda x: int(x[0]))
    assert all(x.flags.writeable for x in first)  # as tf.data's as_numpy_iterator gives
    first[3][:] = -1
    first[3][5] = 7
    for i, x in enumerate(first):
        if i == 3:
            assert x[5] == 7 and (np.delete(x, 5) == -1).all()
        else:
            _check_row(x, i)


@pytest.mark.parametrize("dtype", [np.complex128, np.float32, np.int8, np.uint16, np.float64])
def test_numeric_dtypes_come_back_aligned_and_exact(one_worker, dtype):
    values = (np.arange(4 * 37) * 3).astype(dtype).reshape(4, 37)
    if np.issubdtype(dtype, np.complexfloating):
        values = values + 1j * values
    got = list(conveyor.distribute(conveyor.Dataset.from_tensor_slices(values), one_worker.target,
                                   "parallel_epochs"))
    got.sort(key=lambda x: x.tobytes())
    assert len(got) == 4
    for row, x in zip(sorted(values, key=lambda x: x.tobytes()), got):
        assert x.dtype == dtype and x.flags.aligned
        np.testing.assert_array_equal(x, row)


def test_bfloat16_and_strings(one_worker):
    values = conveyor.bfloat16(np.arange(3 * 40, dtype=np.float32).reshape(3, 40))
    got = list(conveyor.distribute(conveyor.Dataset.from_tensor_slices(values), one_worker.target,
                                   "parallel_epochs"))
    got = sorted(((conveyor.bfloat16_to_float32(x), x) for x in got), key=lambda p: p[0][1])
    assert len(got) == 3
    for i, (as_float, x) in enumerate(got):
        assert conveyor.is_bfloat16(x) and x.flags.aligned
        np.testing.assert_array_equal(as_float, np.arange(40 * i, 40 * (i + 1), dtype=np.float32))
    # Strings stay copies: bytes objects (scalars) and object arrays of bytes.
    strings = np.array([[b"a" * 40, b"b"], [b"c", b"d" * 33]])
    got = list(conveyor.distribute(conveyor.Dataset.from_tensor_slices(strings), one_worker.target,
                                   "parallel_epochs"))
    got.sort(key=lambda x: x[0][:1])
    assert [list(x) for x in got] == [[b"a" * 40, b"b"], [b"c", b"d" * 33]]
    assert all(x.dtype == object and type(x[0]) is bytes for x in got)
    scalars = list(conveyor.distribute(conveyor.Dataset.from_tensor_slices(np.array([b"xy" * 20])),
                                       one_worker.target, "parallel_epochs"))
    assert scalars == [b"xy" * 20]
