"""Snapshots from Python: save / distributed_save, then Dataset.load read through the service."""

import concurrent.futures
import os

import pytest

import conveyor


@pytest.fixture
def snap_cluster(tmp_path):
    """A cluster whose nodes may read and list the test's directory."""
    root = str(tmp_path)
    dispatcher = conveyor.DispatchServer(port=0, worker_timeout_ms=2000, allowed_paths=[root])
    workers = [conveyor.WorkerServer(dispatcher_address=dispatcher.target, port=0,
                                     heartbeat_interval_ms=200, allowed_paths=[root])
               for _ in range(2)]
    yield dispatcher
    for w in workers:
        w.stop()
    dispatcher.stop()


def read_ints(dispatcher, path, mode="distributed_epoch"):
    ds = conveyor.Dataset.load(path)
    return sorted(int(x) for x in conveyor.distribute(ds, dispatcher.target, mode))


def test_save_then_load_through_the_service(snap_cluster, tmp_path):
    path = str(tmp_path / "s")
    ds = conveyor.Dataset.range(500).map("square")
    result = conveyor.save(ds, path, chunk_bytes=512)
    assert result["elements"] == 500 and result["chunks"] > 3
    assert conveyor.Dataset.load(path).element_spec == ds.element_spec
    assert read_ints(snap_cluster, path) == [i * i for i in range(500)]
    # OFF: each of the 2 workers reads the whole snapshot.
    assert read_ints(snap_cluster, path, "parallel_epochs") == sorted([i * i for i in range(500)] * 2)


def test_distributed_save_writes_what_the_workers_produce(snap_cluster, tmp_path):
    path = str(tmp_path / "d")
    result = conveyor.distributed_save(conveyor.Dataset.range(300), path, snap_cluster,
                                       compression=None)
    assert result["elements"] == 300
    assert read_ints(snap_cluster, path) == list(range(300))


def test_distributed_save_of_several_sources_is_refused_naming_the_op(snap_cluster, tmp_path):
    # The workers read a save's splits from one provider: a dataset with several splittable
    # sources has no single split sequence to write, so the save is refused, naming the op.
    zipped = conveyor.Dataset.zip((conveyor.Dataset.range(3), conveyor.Dataset.range(3)))
    with pytest.raises(conveyor.InvalidArgumentError, match="`zip` reads several splittable sources"):
        conveyor.distributed_save(zipped, str(tmp_path / "z"), snap_cluster)
    joined = conveyor.Dataset.range(3).concatenate(conveyor.Dataset.range(2))
    with pytest.raises(conveyor.InvalidArgumentError, match="`concatenate` reads several"):
        conveyor.distributed_save(joined, str(tmp_path / "c"), snap_cluster)


def test_save_errors_name_the_argument(tmp_path):
    ds = conveyor.Dataset.range(3)
    with pytest.raises(ValueError, match="`compression`"):
        conveyor.save(ds, str(tmp_path / "a"), compression="gzip")
    with pytest.raises(ValueError, match="`chunk_bytes`"):
        conveyor.save(ds, str(tmp_path / "a"), chunk_bytes=0)
    with pytest.raises(TypeError, match="`dataset`"):
        conveyor.save([1, 2], str(tmp_path / "a"))
    conveyor.save(ds, str(tmp_path / "a"))
    with pytest.raises(conveyor.AlreadyExistsError, match="written once"):
        conveyor.save(ds, str(tmp_path / "a"))
    with pytest.raises(conveyor.InvalidArgumentError, match="infinite"):
        conveyor.save(ds.repeat(), str(tmp_path / "b"))


def test_distributed_save_without_workers_fails_after_its_stall_timeout(tmp_path):
    dispatcher = conveyor.DispatchServer(port=0, allowed_paths=[str(tmp_path)])
    try:
        with pytest.raises(ValueError, match="`stall_timeout_ms`"):
            conveyor.distributed_save(conveyor.Dataset.range(5), str(tmp_path / "x"), dispatcher,
                                      stall_timeout_ms=-1)
        path = str(tmp_path / "s")
        with pytest.raises(conveyor.DeadlineExceededError, match="no element arrived for"):
            conveyor.distributed_save(conveyor.Dataset.range(5), path, dispatcher,
                                      stall_timeout_ms=1000)
        with pytest.raises(conveyor.ConveyorError, match="no element arrived for"):
            conveyor.save(conveyor.Dataset.load(path), str(tmp_path / "copy"))  # runs the load here
    finally:
        dispatcher.stop()


def test_a_dispatcher_with_snapshot_reuse_reads_the_saved_output(tmp_path):
    lines = tmp_path / "lines.txt"
    lines.write_text("old0\nold1\n")
    ds = conveyor.Dataset.text_lines(str(lines))
    conveyor.save(ds, str(tmp_path / "snaps" / "one"))
    lines.write_text("new0\nnew1\n")  # running the pipeline now would read "new"
    root = str(tmp_path)
    dispatcher = conveyor.DispatchServer(port=0, allowed_paths=[root],
                                         snapshot_reuse=[str(tmp_path / "snaps")])
    worker = conveyor.WorkerServer(dispatcher_address=dispatcher.target, port=0,
                                   allowed_paths=[root])
    try:
        got = sorted(bytes(x).decode() if not isinstance(x, str) else x
                     for x in conveyor.distribute(ds, dispatcher.target, "parallel_epochs"))
        assert got == ["old0", "old1"]
    finally:
        worker.stop()
        dispatcher.stop()


def _chunk_times(path):
    """(first, last) commit time in ns of the snapshot's chunk files (st_mtime_ns)."""
    chunks = os.path.join(path, "chunks")
    times = [os.stat(os.path.join(chunks, n)).st_mtime_ns for n in os.listdir(chunks)
             if n.startswith("chunk-")]
    return min(times), max(times), len(times)


@pytest.mark.parametrize("limit", [1, None])
def test_worker_max_concurrent_snapshots_writes_one_stream_at_a_time(tmp_path, limit):
    root = str(tmp_path)
    dispatcher = conveyor.DispatchServer(port=0, range_split_size=4, allowed_paths=[root])
    worker = conveyor.WorkerServer(dispatcher_address=dispatcher.target, port=0,
                                   heartbeat_interval_ms=100, allowed_paths=[root],
                                   max_concurrent_snapshots=limit)
    try:
        assert worker.config.max_concurrent_snapshots == limit
        ds = conveyor.Dataset.range(40).map(conveyor.Function("sleep_us", us=10000))
        paths = [str(tmp_path / f"s{i}") for i in range(3)]
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            saves = [pool.submit(conveyor.distributed_save, ds, p, dispatcher, compression=None,
                                 chunk_bytes=1, stall_timeout_ms=30000) for p in paths]
            results = [s.result(timeout=120) for s in saves]
        assert [r["elements"] for r in results] == [40, 40, 40]
        for p in paths:
            assert read_ints(dispatcher, p) == list(range(40))
        spans = sorted(_chunk_times(p) for p in paths)
        assert all(n >= 5 for _, _, n in spans), spans
        # Limit 1: one snapshot's chunks are all committed before the next one's first (its
        # stream starts only once the worker reported the last one done); no limit: they
        # interleave, which is what makes this check able to fail.
        apart = all(spans[i][1] < spans[i + 1][0] for i in range(len(spans) - 1))
        assert apart == (limit == 1), spans
    finally:
        worker.stop()
        dispatcher.stop()


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_worker_max_concurrent_snapshots_must_be_positive(bad):
    with pytest.raises(ValueError, match="`max_concurrent_snapshots` must be a positive integer"):
        conveyor.WorkerServer(dispatcher_address="127.0.0.1:1", max_concurrent_snapshots=bad,
                              start=False)
