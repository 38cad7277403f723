"""The trainer-side pipeline: ops after distribute run in this process on what the service delivers
(tf.data's `ds.apply(distribute(...)).map(...).prefetch(...)`)."""

import signal
import threading
import time

import numpy as np
import pytest

import conveyor
from conftest import Cluster


@pytest.fixture(scope="module")
def one_worker():
    # One worker and OFF: the elements arrive in the dataset's order, so orders can be checked.
    c = Cluster(workers=1)
    yield c
    c.stop()


def read(cluster, ds, mode="parallel_epochs", **kwargs):
    return conveyor.distribute(ds, cluster.target, mode, **kwargs)


def ints(it):
    return [int(x) for x in it]


def test_iterating_the_distributed_dataset_is_unchanged(one_worker):
    dd = read(one_worker, conveyor.Dataset.range(5))
    it = iter(dd)
    assert not isinstance(it, conveyor.TrainerIterator)  # the extension's stream, as before
    assert ints(it) == [0, 1, 2, 3, 4]
    assert isinstance(it.job_id, int) or it.job_id is not None


def test_apply_distribute_then_map_batch_prefetch(one_worker):
    ds = conveyor.Dataset.range(10)
    pipeline = (ds.apply(conveyor.distribute(service=one_worker.target,
                                             processing_mode="parallel_epochs"))
                .map(lambda x: x * 2).batch(3).prefetch(2))
    assert isinstance(pipeline, conveyor.TrainerDataset)
    got = [b.tolist() for b in pipeline]
    assert got == [[0, 2, 4], [6, 8, 10], [12, 14, 16], [18]]
    # Each iteration reads the service again, as iterating the DistributedDataset does.
    assert [b.tolist() for b in pipeline] == got


def test_dataset_distribute_shorthand_and_dynamic_mode(cluster):
    got = ints(conveyor.Dataset.range(50).distribute(cluster.target, "distributed_epoch")
               .map(lambda x: x + 1))
    assert sorted(got) == list(range(1, 51))


def test_map_unpacks_tuples_and_batch_keeps_structures(one_worker):
    ds = conveyor.Dataset.from_tensor_slices((np.arange(4, dtype=np.int32), np.arange(4) * 0.5))
    out = list(read(one_worker, ds).map(lambda i, f: {"i": i, "sum": i + f, "name": b"e%d" % i})
               .batch(2))
    assert len(out) == 2
    first = out[0]
    assert sorted(first) == ["i", "name", "sum"]
    assert first["i"].dtype == np.int32 and first["i"].tolist() == [0, 1]
    assert first["sum"].tolist() == [0.0, 1.5]
    assert first["name"].dtype == object and first["name"].tolist() == [b"e0", b"e1"]
    # A tuple element batches per component.
    pairs = list(read(one_worker, ds).batch(3, drop_remainder=True))
    assert len(pairs) == 1 and pairs[0][0].tolist() == [0, 1, 2] and pairs[0][1].tolist() == [0, .5, 1]


def test_filter_and_its_predicate_must_return_a_bool(one_worker):
    got = ints(read(one_worker, conveyor.Dataset.range(10)).filter(lambda x: x % 3 == 0))
    assert got == [0, 3, 6, 9]
    with pytest.raises(TypeError, match="predicate"):
        list(read(one_worker, conveyor.Dataset.range(3)).filter(lambda x: x))


def test_unbatch_gives_back_the_elements(one_worker):
    ds = conveyor.Dataset.range(7).batch(3)
    rows = list(read(one_worker, ds).unbatch())
    assert [int(r) for r in rows] == list(range(7))
    assert all(isinstance(r, np.ndarray) and r.shape == () for r in rows)
    strings = list(read(one_worker, conveyor.Dataset.range(4).map("to_string").batch(2)).unbatch())
    assert strings == [b"0", b"1", b"2", b"3"]  # string scalars are bytes, as the service gives them
    with pytest.raises(ValueError, match="component 0 is a scalar; every component needs a leading"):
        list(read(one_worker, conveyor.Dataset.range(2)).unbatch())


def test_shuffle_is_seeded_and_reshuffles_per_iteration(one_worker):
    ds = conveyor.Dataset.range(40)
    fixed = read(one_worker, ds).shuffle(16, seed=7, reshuffle_each_iteration=False)
    a, b = ints(fixed), ints(fixed)
    assert sorted(a) == list(range(40)) and a != list(range(40))
    assert a == b
    again = ints(read(one_worker, ds).shuffle(16, seed=7, reshuffle_each_iteration=False))
    assert again == a  # the same seed gives the same order
    reshuffled = read(one_worker, ds).shuffle(16, seed=7)
    c, d = ints(reshuffled), ints(reshuffled)
    assert sorted(c) == sorted(d) == list(range(40)) and c != d
    assert ints(read(one_worker, ds).shuffle(16, seed=7)) == c  # iteration k is reproducible


def test_take_and_skip(one_worker):
    dd = read(one_worker, conveyor.Dataset.range(100))
    assert ints(dd.take(3)) == [0, 1, 2]
    assert ints(dd.skip(97)) == [97, 98, 99]
    assert ints(dd.take(-1).skip(-1)) == []
    assert len(ints(dd.take(-1))) == 100


def test_take_leaves_the_job_when_done(one_worker):
    # An endless dataset: take(5) must end, and leave the job rather than read on.
    it = iter(read(one_worker, conveyor.Dataset.range(10**9)).take(5))
    assert ints(it) == [0, 1, 2, 3, 4]


def test_parallel_map_keeps_order_unless_told_not_to(one_worker):
    def slow(x):
        time.sleep(0.002 * (int(x) % 3))
        return x * 10

    dd = read(one_worker, conveyor.Dataset.range(30))
    assert ints(dd.map(slow, num_parallel_calls=4)) == [x * 10 for x in range(30)]
    assert ints(dd.map(slow, num_parallel_calls=conveyor.AUTOTUNE)) == [x * 10 for x in range(30)]
    loose = ints(dd.map(slow, num_parallel_calls=4, deterministic=False))
    assert sorted(loose) == [x * 10 for x in range(30)]


def test_errors_in_user_functions_arrive_in_order_through_prefetch(one_worker):
    def boom(x):
        if int(x) == 5:
            raise RuntimeError("element five")
        return x

    it = iter(read(one_worker, conveyor.Dataset.range(10)).map(boom).prefetch(4))
    got = []
    with pytest.raises(RuntimeError, match="element five"):
        for x in it:
            got.append(int(x))
    assert got == [0, 1, 2, 3, 4]


def test_close_stops_the_pipeline_and_leaves_the_job(one_worker):
    # The ops run in C++ (LocalPipeline): a prefetch reads ahead on the executor's threads, not
    # on a Python thread of its own.
    before = set(threading.enumerate())
    it = iter(read(one_worker, conveyor.Dataset.range(10**9)).map(lambda x: x).prefetch(4))
    assert int(next(it)) == 0
    assert set(threading.enumerate()) == before
    stream = it._source
    with it:
        pass  # leaving the block closes it
    with pytest.raises(StopIteration):
        next(it)
    with pytest.raises(conveyor.FailedPreconditionError, match="closed"):
        stream.job_id  # the read was closed with it: the job is left


def test_the_end_closes_the_read(one_worker):
    it = iter(read(one_worker, conveyor.Dataset.range(10**9)).take(3))
    assert ints(it) == [0, 1, 2]
    with pytest.raises(conveyor.FailedPreconditionError, match="closed"):
        it.job_id
    with pytest.raises(StopIteration):
        next(it)


def test_a_map_must_return_one_structure(one_worker):
    it = iter(read(one_worker, conveyor.Dataset.range(4)).map(lambda x: (x, x) if int(x) == 2 else x))
    assert int(next(it)) == 0 and int(next(it)) == 1
    with pytest.raises(ValueError, match="returned an element that nests as \\(_, _\\) after one "
                                         "that nested as _"):
        next(it)


def test_batch_of_differing_shapes_names_the_component(one_worker):
    ds = conveyor.Dataset.range(1, 4)
    with pytest.raises(ValueError, match="cannot batch component 0 of shapes \\[1\\] .element 0. and "
                                         "\\[2\\] .element 1."):
        list(read(one_worker, ds).map(lambda x: np.zeros(int(x))).batch(3))


def test_argument_errors_name_the_argument(one_worker):
    dd = read(one_worker, conveyor.Dataset.range(3))
    with pytest.raises(ValueError, match="`batch_size` must be >= 1"):
        dd.batch(0)
    with pytest.raises(TypeError, match="`batch_size` must be an int"):
        dd.batch("2")
    with pytest.raises(TypeError, match="`drop_remainder` must be a bool"):
        dd.batch(2, drop_remainder=None)
    with pytest.raises(TypeError, match="`map_func` must be a callable"):
        dd.map("square")  # registered functions run on the workers: Dataset.map
    with pytest.raises(ValueError, match="`num_parallel_calls` must be >= 1 or AUTOTUNE"):
        dd.map(abs, num_parallel_calls=0)
    with pytest.raises(ValueError, match="`buffer_size` must be >= 1"):
        dd.shuffle(0)
    with pytest.raises(ValueError, match="`buffer_size` must be >= 0 or AUTOTUNE"):
        dd.prefetch(-5)
    with pytest.raises(ValueError, match="`count` must be >= -1"):
        dd.take(-2)
    with pytest.raises(TypeError, match="missing required argument `service`"):
        conveyor.distribute(processing_mode="parallel_epochs")
    # The transformation form checks the options at once, as distribute(dataset, ...) does.
    with pytest.raises(ValueError, match="processing_mode"):
        conveyor.distribute(service=one_worker.target, processing_mode=3)
    with pytest.raises(TypeError, match="conveyor.Dataset"):
        conveyor.distribute(service=one_worker.target, processing_mode="parallel_epochs")([1, 2])


def test_repr_shows_the_pipeline(one_worker):
    p = read(one_worker, conveyor.Dataset.range(3)).batch(2).prefetch(1)
    assert repr(p).endswith(".batch(2, drop_remainder=False).prefetch(1)")
    assert p.distributed_dataset.dataset == conveyor.Dataset.range(3)


def test_a_signal_handler_interrupts_a_waiting_next(one_worker):
    # The C++ pipeline waits for the stream in 100 ms slices; between them the main thread runs
    # Python's signal handlers, whose exception ends the wait and comes out of next().
    class Interrupted(Exception):
        pass

    def handler(signum, frame):
        raise Interrupted()

    slow = conveyor.Dataset.range(2).map(conveyor.Function("sleep_us", us=2_000_000))
    it = iter(read(one_worker, slow).map(lambda x: x).batch(1))
    previous = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        start = time.monotonic()
        with pytest.raises(Interrupted):
            next(it)
        assert time.monotonic() - start < 1.5  # not when the element arrives (2 s)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        it.close()


def test_a_signal_interrupts_a_next_waiting_behind_a_prefetch_fill(one_worker):
    # next() waits for a prefetch's fill running on an executor thread (a map call blocked
    # there): the wait checks for signals every 100 ms, the handler's exception comes out of
    # next(), and the iterator is closed then (as a generator after raising).
    class Interrupted(Exception):
        pass

    def handler(signum, frame):
        raise Interrupted()

    release = threading.Event()

    def blocks_off_the_main_thread(x):
        # A fill the consumer runs itself returns at once; one on an executor thread blocks.
        if threading.current_thread() is not threading.main_thread():
            release.wait(10)
        return x

    it = iter(read(one_worker, conveyor.Dataset.range(10**9)).map(blocks_off_the_main_thread)
              .prefetch(2))
    previous = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        start = time.monotonic()
        with pytest.raises(Interrupted):
            for _ in range(10**6):  # until a fill lands on an executor thread and next() waits
                next(it)
        waited = time.monotonic() - start
        assert waited < 3, f"the interrupt took {waited:.1f} s (the blocked call's 10 s?)"
        with pytest.raises(StopIteration):
            next(it)
        with pytest.raises(conveyor.FailedPreconditionError, match="closed"):
            it.state_dict()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        release.set()
        it.close()


def test_parallel_map_errors_keep_their_class(one_worker):
    class Odd(Exception):
        pass

    def check(x):
        if int(x) == 7:
            raise Odd(f"odd element {int(x)}")
        return x

    it = iter(read(one_worker, conveyor.Dataset.range(20)).map(check, num_parallel_calls=3).prefetch(2))
    got = []
    with pytest.raises(Odd, match="odd element 7"):
        for x in it:
            got.append(int(x))
    assert got == list(range(7))


def test_a_map_returning_its_input_hands_the_tensor_back_without_a_copy(one_worker):
    inputs = []

    def keep(x):
        inputs.append(x)
        return x

    out = list(read(one_worker, conveyor.Dataset.range(8).batch(4)).map(keep))
    assert [o.tolist() for o in out] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert all(np.shares_memory(i, o) for i, o in zip(inputs, out))
