"""distribute / register_dataset / from_dataset_id against an in-process cluster on loopback."""

import threading

import numpy as np
import pytest

import conveyor


def ints(iterable):
    return [int(x) for x in iterable]


def test_off_every_worker_produces_everything(cluster):
    ds = conveyor.Dataset.range(20).map("square")
    got = ints(conveyor.distribute(ds, service=cluster.target, processing_mode="parallel_epochs"))
    assert sorted(got) == sorted([i * i for i in range(20)] * len(cluster.workers))


def test_dynamic_each_element_once(cluster):
    ds = conveyor.Dataset.range(300)
    got = ints(conveyor.distribute(ds, service=cluster.target, processing_mode="distributed_epoch"))
    assert sorted(got) == list(range(300))


def test_service_accepts_a_dispatch_server_and_policy_names(cluster):
    got = ints(conveyor.distribute(conveyor.Dataset.range(5), service=cluster.dispatcher,
                                   processing_mode="DYNAMIC"))
    assert sorted(got) == list(range(5))


def test_multi_component_elements_are_tuples(cluster):
    ds = conveyor.Dataset.from_tensor_slices((np.arange(6, dtype=np.int32), np.arange(6) * 0.5))
    got = list(conveyor.distribute(ds, cluster.target, "distributed_epoch"))
    assert len(got) == 6
    for a, b in got:
        assert a.dtype == np.int32 and a.shape == () and b.dtype == np.float64
        assert float(b) == int(a) * 0.5


def test_strings_arrive_as_bytes(cluster):
    ds = conveyor.Dataset.range(3).map("to_string")
    got = sorted(conveyor.distribute(ds, cluster.target, "distributed_epoch"))
    assert got == [b"0", b"1", b"2"]


def test_shared_job_two_consumers_split_a_dynamic_epoch(cluster):
    # ~1 s of work (2000 x 1 ms over the workers): both threads join while the job runs. A job ends
    # with its consumers; one joining after that would read the next repetition.
    ds = conveyor.Dataset.range(2000).map(conveyor.Function("sleep_us", us=1000))
    results = [[], []]
    errors = []

    def consume(i):
        try:
            it = iter(conveyor.distribute(ds, cluster.target, "distributed_epoch", job_name="shared-py",
                                          max_outstanding_requests=4))
            results[i] = ints(it)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sorted(results[0] + results[1]) == list(range(2000))  # each element once, across both


def test_named_job_read_again_starts_next_repetition(cluster):
    d = conveyor.distribute(conveyor.Dataset.range(10), cluster.target, "distributed_epoch", job_name="again")
    assert sorted(ints(d)) == list(range(10))
    assert sorted(ints(d)) == list(range(10))


def test_register_dataset_and_from_dataset_id(cluster):
    ds = conveyor.Dataset.range(7).map("square")
    dataset_id = conveyor.register_dataset(cluster.target, ds)
    assert conveyor.register_dataset(cluster.target, ds) == dataset_id  # equal definition, same id
    got = ints(conveyor.from_dataset_id("distributed_epoch", cluster.target, dataset_id))
    assert sorted(got) == [i * i for i in range(7)]
    named = conveyor.register_dataset(cluster.target, ds, dataset_id="py-named")
    assert named == "py-named"
    with pytest.raises(conveyor.AlreadyExistsError):
        conveyor.register_dataset(cluster.target, conveyor.Dataset.range(8), dataset_id="py-named")


def test_unknown_dataset_id_is_not_found(cluster):
    with pytest.raises(LookupError):
        iter(conveyor.from_dataset_id("parallel_epochs", cluster.target, "no-such-id"))


@pytest.mark.parametrize("kwargs, exc, text", [
    # Wrong types name the argument (not pybind11's "incompatible function arguments").
    (dict(job_name=5), ValueError, "`job_name` must be a string, but job_name was of type int"),
    (dict(processing_mode=None), ValueError, "`processing_mode` must be a string"),
    (dict(processing_mode=3), ValueError, "processing_mode was of type int"),
    (dict(compression=5), ValueError, "`compression` must be a string"),
    (dict(target_workers=None), ValueError, "`target_workers` must be a string"),
    (dict(on_worker_loss=1), ValueError, "`on_worker_loss` must be a string"),
    (dict(on_worker_loss="ignore"), ValueError,
     'Invalid `on_worker_loss` argument: "ignore". Must be one of ["continue", "fail"].'),
    (dict(max_outstanding_requests=2.5), TypeError,
     "`max_outstanding_requests` must be an int or None, but max_outstanding_requests was of type float"),
    (dict(consumer_index="0", num_consumers=2, job_name="j"), TypeError, "`consumer_index` must be an int"),
    (dict(max_buffered_bytes=1.0), TypeError, "`max_buffered_bytes` must be an int"),
    (dict(request_timeout_ms="5"), TypeError, "`request_timeout_ms` must be an int"),
    (dict(connect_timeout_ms=None), TypeError, "`connect_timeout_ms` must be an int, but"),
])
def test_option_type_errors_name_the_argument(cluster, kwargs, exc, text):
    args = dict(processing_mode="parallel_epochs")
    args.update(kwargs)
    with pytest.raises(exc) as info:
        conveyor.distribute(conveyor.Dataset.range(3), cluster.target, **args)  # at once, not at iter()
    assert text in str(info.value)
    assert "incompatible function arguments" not in str(info.value)


def test_empty_service_and_none_compression(cluster):
    with pytest.raises(ValueError, match="`service` must not be empty"):
        conveyor.distribute(conveyor.Dataset.range(3), "", "parallel_epochs")
    with pytest.raises(ValueError, match="`service` must not be empty"):
        conveyor.register_dataset("", conveyor.Dataset.range(3))
    with pytest.raises(ValueError, match="`dataset_id` must be a string"):
        conveyor.register_dataset(cluster.target, conveyor.Dataset.range(3), dataset_id=7)
    # tf.data: compression=None means no compression.
    ds = conveyor.distribute(conveyor.Dataset.range(3), cluster.target, "distributed_epoch", compression=None)
    assert ds.options["compression"] == "NONE"
    assert sorted(ints(ds)) == [0, 1, 2]
    assert conveyor.register_dataset(cluster.target, conveyor.Dataset.range(4), compression=None)


@pytest.mark.parametrize("kwargs, exc, text", [
    (dict(processing_mode="bogus"), ValueError,
     '`processing_mode`: processing mode should be a ShardingPolicy (OFF, DYNAMIC, FILE, DATA, FILE_OR_DATA, '
     'HINT), "parallel_epochs", or "distributed_epoch". Got "bogus".'),
    (dict(job_name=""), ValueError, "`job_name` must not be empty"),
    (dict(max_outstanding_requests=0), ValueError, "`max_outstanding_requests` must be positive, got 0"),
    (dict(compression="GZIP"), ValueError, "Invalid `compression` argument"),
    (dict(target_workers="SOMEWHERE"), ValueError, "Invalid `target_workers` argument"),
    (dict(on_worker_loss="fail"), ValueError, "`on_worker_loss` applies to the OFF processing mode only"),
    (dict(data_transfer_protocol="http"), ValueError,
     'Invalid `data_transfer_protocol` argument: "http". Must be one of ["grpc", "bulk", "caf"]'),
    (dict(data_transfer_protocol=3), ValueError, "`data_transfer_protocol` must be a string"),
    (dict(external_state_policy="STRICT"), ValueError,
     'Invalid `external_state_policy` argument: "STRICT". Must be one of ["WARN", "IGNORE", "FAIL"]'),
    (dict(consumer_index=0, num_consumers=2), ValueError, "`job_name` must be set when setting `num_consumers`"),
    (dict(num_consumers=2, job_name="j"), ValueError, "Must either set both `consumer_index` and `num_consumers`"),
    (dict(job_name="j", consumer_index=0), ValueError, "consumer_index"),
    # Valid options; the dispatcher refuses coordinated reads of a finite DYNAMIC dataset.
    (dict(job_name="j", consumer_index=0, num_consumers=2), ValueError, "coordinated reads"),
    (dict(job_name="j", consumer_index=0, num_consumers=2, target_workers="LOCAL"), ValueError,
     "Coordinated reads require non-local workers"),
])
def test_option_validation_errors(cluster, kwargs, exc, text):
    args = dict(processing_mode="distributed_epoch")
    args.update(kwargs)
    with pytest.raises(exc) as info:
        iter(conveyor.distribute(conveyor.Dataset.range(3), cluster.target, **args))
    assert text in str(info.value)  # the C++ validator's text, unchanged


@pytest.mark.parametrize("protocol", [None, "grpc", "bulk", "caf"])
def test_data_transfer_protocol_names_conveyors_paths(cluster, protocol):
    ds = conveyor.distribute(conveyor.Dataset.range(5), cluster.target, "distributed_epoch",
                             data_transfer_protocol=protocol)
    assert sorted(ints(ds)) == list(range(5))


def test_local_target_workers_read_the_in_process_workers(cluster):
    # The fixture's workers run in this process: LOCAL reads each of them in process (OFF: each
    # produces the whole dataset).
    got = ints(conveyor.distribute(conveyor.Dataset.range(6), cluster.target, "parallel_epochs",
                                   target_workers="LOCAL"))
    assert sorted(got) == sorted(list(range(6)) * len(cluster.workers))


def test_invalid_dataset_is_refused_at_registration(cluster):
    with pytest.raises(conveyor.NotFoundError, match="unknown function `no_such_fn`"):
        iter(conveyor.distribute(conveyor.Dataset.range(3).map("no_such_fn"), cluster.target, "parallel_epochs"))


def test_bad_address_and_unreachable_dispatcher():
    with pytest.raises(ValueError, match="no port"):
        iter(conveyor.distribute(conveyor.Dataset.range(3), "127.0.0.1", "parallel_epochs"))
    # A port nobody listens on: a clear error within the connect timeout, not a hang.
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises((ConnectionError, TimeoutError)):
        iter(conveyor.distribute(conveyor.Dataset.range(3), f"127.0.0.1:{port}", "parallel_epochs",
                                 connect_timeout_ms=2000))


def test_pipeline_failure_on_a_worker_raises_in_the_iterator(cluster):
    ds = conveyor.Dataset.tfrecord("/nonexistent/conveyor-python-test.tfrecord")
    with pytest.raises(conveyor.ConveyorError) as info:
        list(conveyor.distribute(ds, cluster.target, "parallel_epochs"))
    assert "conveyor-python-test.tfrecord" in str(info.value)


def test_stream_stats_and_close(cluster):
    it = iter(conveyor.distribute(conveyor.Dataset.range(10**9), cluster.target, "parallel_epochs"))
    for _ in range(100):
        next(it)
    stats = it.stats()
    assert stats["elements"] >= 100 and stats["bytes"] > 0
    assert stats["lost_tasks"] == 0  # OFF tasks read on without (on_worker_loss "continue")
    assert it.job_id
    it.close()  # leaves the endless job
    it.close()  # idempotent
    # A closed iterator is exhausted, as Python's own (a generator after close()).
    with pytest.raises(StopIteration):
        next(it)
    assert list(it) == []
    with pytest.raises(RuntimeError, match="closed"):
        it.stats()


def test_zero_copy_arrays_share_the_received_buffers(cluster):
    size = 1 << 17  # int64 entries: 1 MiB per element
    ds = conveyor.Dataset.range(size).batch(size, drop_remainder=True).cache().repeat(4)
    import tracemalloc
    tracemalloc.start()
    try:
        kept = list(conveyor.distribute(ds, cluster.target, "parallel_epochs"))
        numpy_allocated, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(kept) == 4 * len(cluster.workers)
    for a in kept:
        assert a.shape == (size,) and a.dtype == np.int64 and a[size - 1] == size - 1
        assert not a.flags.owndata and a.flags.writeable
        # The base is the object that owns the C++ Element the stream received.
        assert type(a.base) is conveyor._conveyor._ElementOwner
        assert not np.shares_memory(a, kept[0]) or a is kept[0]
    # 8 MiB of elements are alive; had they been copied into numpy-allocated arrays,
    # tracemalloc (which numpy reports its data allocations to) would count them.
    assert numpy_allocated < (1 << 20), numpy_allocated
    view = kept[0][10:20]
    del kept
    assert view[0] == 10  # a view keeps the Element alive


def test_gil_is_released_while_waiting(cluster):
    # Each element takes 600 ms to produce; a Python thread must keep running meanwhile.
    ds = conveyor.Dataset.range(4).map(conveyor.Function("sleep_us", us=600_000))
    import time
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.005)

    t = threading.Thread(target=ticker)
    t.start()
    start = time.monotonic()
    try:
        got = ints(conveyor.distribute(ds, cluster.target, "distributed_epoch", max_outstanding_requests=1))
    finally:
        stop.set()
        t.join()
    elapsed = time.monotonic() - start
    assert sorted(got) == [0, 1, 2, 3]
    assert elapsed > 0.6  # we did wait for elements
    during = [x for x in ticks if start <= x <= start + elapsed]
    gaps = [b - a for a, b in zip(during, during[1:])]
    # Holding the GIL during a 600 ms wait would stall the ticker for >= 600 ms.
    assert len(during) > 20 and max(gaps) < 0.45, (len(during), max(gaps, default=None))


def test_plugin_functions_from_python(cluster):
    import glob
    import os
    build = os.environ.get("CONVEYOR_BINARY_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "build")
    plugins = glob.glob(os.path.join(build, "libtest_plugin.so"))
    if not plugins:
        pytest.skip(f"libtest_plugin.so is not built in {build}")
    ds = conveyor.Dataset.range(4).map("plugin_triple")
    with pytest.raises(LookupError, match="plugin_triple"):
        ds.validate()
    conveyor.load_plugin(plugins[0])
    assert "plugin_triple" in conveyor.function_names()
    ds.validate()
    with pytest.raises(conveyor.ConveyorError):
        conveyor.load_plugin("/nonexistent/libnothing.so")
    # The in-process workers share this process's registry.
    assert sorted(int(x) for x in conveyor.distribute(ds, cluster.target, "distributed_epoch")) == [0, 3, 6, 9]


def test_one_iterator_read_from_two_threads(cluster):
    it = iter(conveyor.distribute(conveyor.Dataset.range(5000), cluster.target, "distributed_epoch"))
    parts = [[], []]

    def drain(i):
        for x in it:
            parts[i].append(int(x))

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(parts[0] + parts[1]) == list(range(5000))


def test_close_and_stats_while_another_thread_waits(cluster):
    # A stream whose elements take 5 s: one thread waits in next(); stats() and close() from this
    # thread must neither deadlock (the waiter holds the stream, this thread the GIL) nor wait 5 s.
    import time
    ds = conveyor.Dataset.range(3).map(conveyor.Function("sleep_us", us=5_000_000))
    it = iter(conveyor.distribute(ds, cluster.target, "parallel_epochs"))
    outcome = []

    def waiter():
        try:
            next(it)
            outcome.append("element")
        except StopIteration:
            outcome.append("stopped")
        except Exception as e:
            outcome.append(repr(e))

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.3)
    start = time.monotonic()
    assert it.stats()["elements"] == 0
    it.close()
    t.join(10)
    assert not t.is_alive()
    assert time.monotonic() - start < 3
    assert outcome == ["stopped"]


def test_a_jobs_tenant_and_weight_reach_the_service(cluster):
    ds = conveyor.distribute(conveyor.Dataset.range(5), cluster.target, "distributed_epoch",
                             tenant="team-a", tenant_weight=2)
    assert ds.options["tenant"] == "team-a" and ds.options["tenant_weight"] == 2
    assert sorted(ints(ds)) == list(range(5))


def test_a_bad_tenant_or_weight_is_refused_naming_it():
    ds = conveyor.Dataset.range(3)
    with pytest.raises(ValueError, match="Invalid `tenant` argument: \"a b\""):
        conveyor.distribute(ds, "127.0.0.1:1", "parallel_epochs", tenant="a b")
    with pytest.raises(ValueError, match="`tenant_weight` must be at least 1, got 0"):
        conveyor.distribute(ds, "127.0.0.1:1", "parallel_epochs", tenant_weight=0)
    with pytest.raises(TypeError, match="`tenant_weight` must be an int"):
        conveyor.distribute(ds, "127.0.0.1:1", "parallel_epochs", tenant_weight="3")
    with pytest.raises(ValueError, match="`tenant` must be a string"):
        conveyor.distribute(ds, "127.0.0.1:1", "parallel_epochs", tenant=3)


def test_external_state_policy_for_random(cluster, capfd):
    # tf.data's ExternalStatePolicy: WARN (the default) registers with a warning naming the op,
    # IGNORE silently, FAIL refuses the dataset.
    ds = conveyor.Dataset.random(seed=1).take(3)
    what = "random(seed=1) depends on random seed generator resource."
    capfd.readouterr()
    assert len(ints(conveyor.distribute(ds, cluster.target, "parallel_epochs"))) == 6  # 2 workers
    assert what in capfd.readouterr().err
    assert len(ints(conveyor.distribute(ds, cluster.target, "parallel_epochs",
                                        external_state_policy="IGNORE"))) == 6
    assert what not in capfd.readouterr().err
    with pytest.raises(conveyor.FailedPreconditionError, match="depends on random seed generator"):
        conveyor.register_dataset(cluster.target, ds, external_state_policy="FAIL")
