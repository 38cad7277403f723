"""Python functions on the workers: Dataset.map / filter / flat_map with lambdas, closures and
"module:function" strings, run by the in-process workers (this interpreter) and by a real
`conveyor worker` process (its embedded interpreter)."""

import os
import queue
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import conveyor

BUILD = os.environ.get("CONVEYOR_BINARY_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "build")
CONVEYOR = os.path.join(BUILD, "conveyor")


def ints(iterable):
    return [int(x) for x in iterable]


def read(ds, service, mode="distributed_epoch"):
    return list(conveyor.distribute(ds, service=service, processing_mode=mode))


def with_ignore_errors(ds):
    # Dataset.ignore_errors() in Python is being added beside this work; the text form has it.
    if hasattr(ds, "ignore_errors"):
        return ds.ignore_errors()
    return conveyor.Dataset.from_text(ds.to_text() + ".ignore_errors()")


@pytest.fixture(scope="module")
def module_dir(tmp_path_factory):
    """A directory with a module the client imports and a worker may not."""
    d = tmp_path_factory.mktemp("pyfn_modules")
    (d / "pyfn_user_module.py").write_text(textwrap.dedent("""
        def triple(x):
            return x * 3

        def keep_even(x):
            return x % 2 == 0
    """))
    sys.path.insert(0, str(d))
    yield d
    sys.path.remove(str(d))


# ---------------------------------------------------------------- in-process workers

def test_lambda_map(cluster):
    ds = conveyor.Dataset.range(10).map(lambda x: x * 2)
    ds.validate()
    assert "python(" in ds.to_text()
    assert sorted(ints(read(ds, cluster.target))) == [2 * i for i in range(10)]


def test_python_function_has_external_state(cluster, capfd):
    # Python code is opaque to the service: tf.data counts py_function as stateful, so WARN (the
    # default) registers with a warning naming the op and function, FAIL refuses the dataset.
    ds = conveyor.Dataset.range(3).map(lambda x: x + 1)
    capfd.readouterr()
    assert sorted(ints(conveyor.distribute(ds, cluster.target, "distributed_epoch"))) == [1, 2, 3]
    err = capfd.readouterr().err
    assert "`map` with the Python function" in err and "is stateful" in err, err
    assert sorted(ints(conveyor.distribute(ds, cluster.target, "distributed_epoch",
                                           external_state_policy="IGNORE"))) == [1, 2, 3]
    assert "is stateful" not in capfd.readouterr().err
    with pytest.raises(conveyor.FailedPreconditionError, match="with the Python function"):
        conveyor.register_dataset(cluster.target, ds, external_state_policy="FAIL")


def test_closure_map_and_parallel_calls(cluster):
    offset = np.int64(100)

    def shifted(x):
        return x + offset

    ds = conveyor.Dataset.range(50).map(shifted, num_parallel_calls=4)
    assert sorted(ints(read(ds, cluster.target))) == list(range(100, 150))


def test_module_function_string(cluster, module_dir):
    ds = conveyor.Dataset.range(5).map("pyfn_user_module:triple").filter("pyfn_user_module:keep_even")
    assert sorted(ints(read(ds, cluster.target))) == [0, 6, 12]


def test_filter_and_flat_map(cluster):
    ds = conveyor.Dataset.range(10).filter(lambda x: x % 3 == 0)
    assert sorted(ints(read(ds, cluster.target))) == [0, 3, 6, 9]
    ds = conveyor.Dataset.range(4).flat_map(lambda x: np.arange(x))
    assert sorted(ints(read(ds, cluster.target))) == [0, 0, 0, 1, 1, 2]
    # a generator's items are the rows; a conveyor Dataset is read as itself
    ds = conveyor.Dataset.range(3).flat_map(lambda x: (int(x) * 10 + i for i in range(2)))
    assert sorted(ints(read(ds, cluster.target))) == [0, 1, 10, 11, 20, 21]
    ds = conveyor.Dataset.range(3).flat_map(lambda x: conveyor.Dataset.range(int(x)))
    assert sorted(ints(read(ds, cluster.target))) == [0, 0, 1]


def test_tuples_in_and_out_strings_and_arrays(cluster):
    ds = conveyor.Dataset.from_tensor_slices((np.arange(4, dtype=np.int32), np.arange(4) * 0.5))
    got = read(ds.map(lambda a, b: (b, a, f"n{int(a)}")), cluster.target)
    assert sorted((int(a), float(b), s) for b, a, s in got) == [
        (i, i * 0.5, f"n{i}".encode()) for i in range(4)]
    big = conveyor.Dataset.range(2).map(lambda x: np.full((256, 256), x, dtype=np.float32))
    arrays = read(big, cluster.target)
    assert sorted(float(a[0, 0]) for a in arrays) == [0.0, 1.0]
    assert all(a.shape == (256, 256) and a.dtype == np.float32 for a in arrays)
    # big-endian and strided results are converted to native, contiguous tensors
    odd = conveyor.Dataset.range(2).map(lambda x: (np.arange(3, dtype=">i4") + x, np.eye(3)[:, 0]))
    got = sorted((a.tolist(), b.tolist()) for a, b in read(odd, cluster.target))
    assert got == [([0, 1, 2], [1.0, 0.0, 0.0]), ([1, 2, 3], [1.0, 0.0, 0.0])]


def test_arguments_are_read_only(cluster):
    def writes(x):
        x[0] = 1
        return x

    ds = conveyor.Dataset.from_tensors(np.zeros(3, np.int64)).map(writes)
    with pytest.raises(conveyor.ConveyorError, match="read-only"):
        read(ds, cluster.target, "parallel_epochs")


def failing_on_17(x):
    if x == 17:
        raise ValueError("element 17 is bad")
    return x


def test_exception_on_element_17_fails_the_read_with_the_traceback(cluster):
    # parallel_epochs: each worker runs the whole range, so the map's element 17 is x == 17
    ds = conveyor.Dataset.range(30).map(lambda x: failing_on_17(x))
    with pytest.raises(ValueError) as raised:
        read(ds, cluster.target, "parallel_epochs")
    message = str(raised.value)
    assert "on element 17" in message
    assert "test_exception_on_element_17_fails_the_read_with_the_traceback.<locals>.<lambda>" in message
    assert "raised ValueError: element 17 is bad" in message
    assert "Traceback (most recent call last):" in message
    assert 'raise ValueError("element 17 is bad")' in message  # the source line of the frame


def test_ignore_errors_skips_the_failing_element(cluster):
    ds = with_ignore_errors(conveyor.Dataset.range(30).map(lambda x: failing_on_17(x)))
    got = ints(read(ds, cluster.target, "distributed_epoch"))
    assert sorted(got) == [i for i in range(30) if i != 17]


def test_bad_function_arguments_are_refused_here():
    with pytest.raises(TypeError, match="got int"):
        conveyor.Dataset.range(3).map(42)
    with pytest.raises(ValueError, match="package.module:function"):
        conveyor.Dataset.range(3).map("pyfn_user_module:")
    # a registered name still means the registered function
    assert conveyor.Dataset.range(3).map("square").to_text() == "range(3).map(square)"


def test_unknown_function_names_the_plugin_flag():
    with pytest.raises(LookupError, match="--plugin LIB.so`; plugins loaded here: "):
        conveyor.Dataset.range(3).map("no_such_function_anywhere").validate()


# ---------------------------------------------------------------- the pool of interpreter processes

def pool_processes(parent=None):
    """The children of `parent` (this process) that run the pool program (their command line
    carries it)."""
    parent = parent or os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if ppid == parent and b"conveyor-pool-out" in cmdline:
            found.append(int(entry))
    return found


def test_parallel_map_runs_in_pool_processes(cluster):
    ds = conveyor.Dataset.range(40).map(lambda x: np.int64(os.getpid()), num_parallel_calls=2)
    assert "processes=2" in ds.to_text()
    pids = set(ints(read(ds, cluster.target)))
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert pids <= set(pool_processes())
    for pid in pids:  # only its own socket: none of the worker's connections leak into it
        sockets = [fd for fd in os.listdir(f"/proc/{pid}/fd")
                   if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")]
        assert sockets == ["3"], sockets


def test_pool_moves_tuples_strings_and_large_arrays(cluster):
    ds = conveyor.Dataset.from_tensor_slices((np.arange(6), np.array([b"a", b"bb", b"", b"c", b"d", b"e"])))
    got = read(ds.map(lambda i, s: (s + b"!", np.full((512, 1024), i, np.float64)), num_parallel_calls=2),
               cluster.target)
    assert sorted(s for s, _ in got) == sorted([b"a!", b"bb!", b"!", b"c!", b"d!", b"e!"])
    assert all(a.shape == (512, 1024) and a[0, 0] == a[-1, -1] for _, a in got)
    assert sorted(float(a[0, 0]) for _, a in got) == [float(i) for i in range(6)]
    # arguments returned unchanged come back as the worker's own components
    swapped = read(ds.map(lambda i, s: (s, i), num_parallel_calls=2), cluster.target)
    assert sorted((int(i), s) for s, i in swapped) == list(enumerate([b"a", b"bb", b"", b"c", b"d", b"e"]))


def maps_allocator(pid):
    with open(f"/proc/{pid}/maps") as f:
        return "conveyor_pool_alloc.so" in f.read()


def test_pool_results_made_in_their_blocks_stay_right_when_the_function_keeps_them(cluster):
    # The pool processes load the allocator next to `_conveyor` (numpy then makes a big result in
    # the worker's shared memory); a function that keeps its results and changes the one it kept
    # last does not change the elements already read (the process keeps that memory to itself).
    kept = []

    def keep(x):
        y = np.full(1 << 17, int(x) % 251, np.uint8)
        if kept:
            kept[-1][:] = 255
        kept.append(y)
        return y

    got = read(conveyor.Dataset.range(100).map(keep, num_parallel_calls=2), cluster.target)
    assert sorted(int(o[0]) for o in got) == sorted(i % 251 for i in range(100))
    assert all(o.shape == (1 << 17,) and (o == o[0]).all() for o in got)
    pids = pool_processes()
    assert pids and all(maps_allocator(pid) for pid in pids)


def test_a_forked_child_gets_its_own_pool(cluster):
    # the parent's pool exists (earlier tests); a child's in-process workers start their own
    read(conveyor.Dataset.range(4).map(lambda x: x, num_parallel_calls=2), cluster.target)
    parent_pool = set(pool_processes())
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a fresh cluster, a pool map, its pool processes' parent reported
        code = 1
        try:
            os.close(r)
            d = conveyor.DispatchServer(port=0)
            wk = conveyor.WorkerServer(dispatcher_address=d.target, port=0)
            ds = conveyor.Dataset.range(20).map(lambda x: np.int64(os.getppid()), num_parallel_calls=2)
            parents = set(ints(conveyor.distribute(ds, d.target, "distributed_epoch")))
            os.write(w, repr(sorted(parents)).encode())
            wk.stop()
            d.stop()
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        reported = f.read()
    _, status = os.waitpid(pid, 0)
    assert status == 0, reported
    assert reported == repr([pid])  # the child's pool processes are the child's own children
    assert parent_pool <= set(pool_processes())


def test_pool_exception_carries_the_traceback(cluster):
    ds = conveyor.Dataset.range(30).map(lambda x: failing_on_17(x), num_parallel_calls=2)
    with pytest.raises(ValueError) as raised:
        read(ds, cluster.target, "parallel_epochs")
    message = str(raised.value)
    assert "on element 17" in message and "raised ValueError: element 17 is bad" in message
    assert "Traceback (most recent call last):" in message


def test_sigkill_of_a_pool_process_loses_no_element(cluster):
    import signal

    def slow(x):
        import time as t
        t.sleep(0.005)
        return x

    n = 400
    it = iter(conveyor.distribute(conveyor.Dataset.range(n).map(slow, num_parallel_calls=2),
                                  service=cluster.target, processing_mode="distributed_epoch"))
    got = [int(next(it)) for _ in range(20)]
    victims = pool_processes()
    assert victims, "no pool process found"
    os.kill(victims[0], signal.SIGKILL)
    got += ints(it)
    assert sorted(got) == list(range(n))  # the element it was running ran again elsewhere


def test_sigkill_of_a_pool_process_with_requests_queued_keeps_every_element_once_in_order(tmp_path):
    # A pool process holds two requests (one running, the next queued in its socket): killing the
    # one running element 20 reruns every element it held, once, and the map's order holds.
    import signal

    marker = tmp_path / "element-20"

    def slow(x):
        import os as o
        import time as t
        if int(x) == 20:
            tmp = str(marker) + ".tmp"
            with open(tmp, "w") as f:
                f.write(str(o.getpid()))
            o.rename(tmp, str(marker))  # whole, or not there
        t.sleep(0.005)
        return x

    n = 300
    ds = conveyor.Dataset.range(n).map(slow, num_parallel_calls=2)
    got, failed = [], []

    def collect():
        try:
            got.extend(ds._collect())
        except Exception as e:  # noqa: BLE001 - reported below
            failed.append(e)

    reader = threading.Thread(target=collect)
    reader.start()
    deadline = time.monotonic() + 60
    while not marker.exists() and reader.is_alive() and time.monotonic() < deadline:
        time.sleep(0.001)
    assert marker.exists(), "element 20 never started"
    victim = int(marker.read_text())
    os.kill(victim, signal.SIGKILL)
    reader.join(120)
    assert not reader.is_alive() and not failed, failed
    assert ints(got) == list(range(n))
    assert victim not in pool_processes()


# ---------------------------------------------------------------- a real `conveyor worker` process

class WorkerProcess:
    """`conveyor worker` against an in-process dispatcher; ready once it logs `ready:`."""

    def __init__(self, dispatcher, *flags):
        self.proc = subprocess.Popen(
            [CONVEYOR, "worker", "--dispatcher", dispatcher, "--port", "0", "--host", "127.0.0.1",
             "--heartbeat-interval", "200", "--drain-timeout", "1000", "--log-level", "info", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        deadline = time.monotonic() + 60
        self.output = []
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "worker did not get ready:\n" + "".join(self.output)
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            assert line is not None, "worker exited:\n" + "".join(self.output)
            self.output.append(line)
            if "ready:" in line:
                self.address = line.rsplit(" ", 1)[-1].strip()
                return

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def drain_output(self):
        """What the worker logged after it got ready (once it has stopped)."""
        out = []
        while True:
            try:
                line = self.lines.get(timeout=10)
            except queue.Empty:
                break
            if line is None:
                break
            out.append(line)
        return "".join(out)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture
def dispatcher():
    d = conveyor.DispatchServer(port=0, worker_timeout_ms=2000)
    yield d
    d.stop()


needs_binary = pytest.mark.skipif(not os.path.exists(CONVEYOR), reason=f"{CONVEYOR} is not built")


@needs_binary
def test_worker_process_runs_lambdas_closures_and_module_functions(dispatcher, module_dir):
    worker = WorkerProcess(dispatcher.target, "--python-path", str(module_dir))
    try:
        k = 7
        ds = (conveyor.Dataset.range(40)
              .map(lambda x: x + k)
              .filter("pyfn_user_module:keep_even")
              .flat_map(lambda x: [x, -x]))
        got = ints(read(ds, dispatcher.target))
        expected = [s * v for v in range(7, 47) if v % 2 == 0 for s in (1, -1)]
        assert sorted(got) == sorted(expected)
    finally:
        worker.stop()


@needs_binary
def test_worker_process_flat_map_returning_a_dataset(dispatcher):
    # the function builds a conveyor.Dataset on the worker: the package must be on its path
    worker = WorkerProcess(dispatcher.target, "--python-path", os.path.join(BUILD, "python"))
    try:
        ds = conveyor.Dataset.range(4).flat_map(lambda x: conveyor.Dataset.range(int(x)).map("square"))
        assert sorted(ints(read(ds, dispatcher.target))) == [0, 0, 0, 1, 1, 4]
    finally:
        worker.stop()


@needs_binary
def test_worker_process_exception_carries_the_traceback(dispatcher):
    worker = WorkerProcess(dispatcher.target)
    try:
        ds = conveyor.Dataset.range(30).map(lambda x: 1 // int(x - 17))
        with pytest.raises(ValueError) as raised:
            read(ds, dispatcher.target)
        message = str(raised.value)
        assert "on element 17" in message and "raised ZeroDivisionError" in message
        assert "Traceback (most recent call last):" in message
    finally:
        worker.stop()


@needs_binary
def test_worker_process_names_the_module_it_cannot_import(dispatcher, module_dir):
    import pyfn_user_module  # importable here, not on the worker (no --python-path)

    worker = WorkerProcess(dispatcher.target)
    try:
        # cloudpickle pickles an importable module's function by reference: the worker imports it
        ds = conveyor.Dataset.range(3).map(pyfn_user_module.triple)
        with pytest.raises(LookupError) as raised:
            read(ds, dispatcher.target)
        message = str(raised.value)
        assert f"cannot import module `pyfn_user_module` on worker {worker.address}" in message
        assert "--python-path" in message
    finally:
        worker.stop()


@needs_binary
def test_worker_process_pool(dispatcher, module_dir):
    worker = WorkerProcess(dispatcher.target, "--python-path", str(module_dir))
    try:
        ds = conveyor.Dataset.range(30).map("pyfn_user_module:triple", num_parallel_calls=2)
        assert sorted(ints(read(ds, dispatcher.target))) == [3 * i for i in range(30)]
        # its pool processes load the allocator next to `conveyor`
        pool = pool_processes(worker.proc.pid)
        assert pool and all(maps_allocator(pid) for pid in pool)
        ds = conveyor.Dataset.range(30).map(lambda x: 1 // int(x - 17), num_parallel_calls=2)
        with pytest.raises(ValueError, match="on element 17"):
            read(ds, dispatcher.target)
    finally:
        worker.stop()


@needs_binary
def test_worker_process_pool_survives_sigkill_of_a_pool_process(dispatcher):
    import signal

    worker = WorkerProcess(dispatcher.target)
    try:
        def slow(x):
            import time as t
            t.sleep(0.005)
            return x * 2

        n = 300
        it = iter(conveyor.distribute(conveyor.Dataset.range(n).map(slow, num_parallel_calls=2),
                                      service=dispatcher.target, processing_mode="distributed_epoch"))
        got = [int(next(it)) for _ in range(20)]
        victims = pool_processes(worker.proc.pid)
        assert victims, "the worker started no pool process"
        os.kill(victims[0], signal.SIGKILL)
        got += ints(it)
        assert sorted(got) == [2 * i for i in range(n)]
    finally:
        worker.stop()
    assert "running the element again" in "".join(worker.output) + worker.drain_output()


@needs_binary
def test_python_path_must_be_a_directory(dispatcher):
    proc = subprocess.run([CONVEYOR, "worker", "--dispatcher", dispatcher.target, "--port", "0",
                           "--python-path", "/nonexistent/conveyor-dir"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "--python-path `/nonexistent/conveyor-dir` is not a directory" in proc.stderr


@needs_binary
def test_inspect_lists_functions_with_their_parameters():
    out = subprocess.run([CONVEYOR, "inspect", "--functions"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert "scale(factor: float = 2" in out
    assert ('python(pickle: string = "", import: string = "", qualname: string = "", processes: int = 0, '
            'spec: string = "")  [built in]') in out
    assert "plugins loaded: 0" in out


def test_new_result_arrays_are_adopted_and_released_kept_ones_copied():
    # A map's result array that nothing else refers to becomes the element's storage (no copy)
    # and is released once the element goes; one the function also keeps is copied, so changing
    # it afterwards does not change the element. (builtins: the in-process map's own
    # interpreter, which a pickled function's globals would not share.)
    import builtins
    import gc
    import weakref

    builtins._conveyor_test_refs = []
    builtins._conveyor_test_kept = []

    def fresh(x):
        import builtins
        import weakref
        a = np.full(1 << 17, int(x) % 251, np.uint8)
        builtins._conveyor_test_refs.append(weakref.ref(a))
        return a

    def keep(x):
        import builtins
        a = np.full(1 << 17, int(x) % 251, np.uint8)
        builtins._conveyor_test_kept.append(a)
        return a

    try:
        refs = builtins._conveyor_test_refs
        out = conveyor.Dataset.range(50).map(fresh)._collect()
        assert [int(o[0]) for o in out] == [i % 251 for i in range(50)]
        assert all(o.shape == (1 << 17,) and (o == o[0]).all() for o in out)
        assert sum(r() is not None for r in refs) >= 50  # they are the elements' storage
        kept_out = conveyor.Dataset.range(50).map(keep)._collect()
        for a in builtins._conveyor_test_kept:
            a[:] = 255
        assert all((o == i % 251).all() for i, o in enumerate(kept_out))
        del out
        gc.collect()
        deadline = time.monotonic() + 10
        while any(r() is not None for r in refs) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not any(r() is not None for r in refs), "adopted arrays were not released"
    finally:
        del builtins._conveyor_test_refs
        del builtins._conveyor_test_kept


def test_pool_results_kept_keep_their_bytes_while_later_ones_reuse_the_blocks():
    # Through the pool, results of 64 KiB or more are viewed in the pool process's result blocks
    # (no copy out); a block is reused only once nothing views it, so results kept here keep their
    # bytes while later maps run, and more kept than the blocks are copied, not lost.
    def big(x):
        return np.full(1 << 17, int(x) % 251, np.uint8)

    first = conveyor.Dataset.range(150).map(big, num_parallel_calls=2)._collect()
    second = conveyor.Dataset.range(100, 400).map(big, num_parallel_calls=2)._collect()
    assert [int(o[0]) for o in first] == [i % 251 for i in range(150)]
    assert all(o.shape == (1 << 17,) and (o == o[0]).all() for o in first)
    assert [int(o[0]) for o in second] == [i % 251 for i in range(100, 400)]
    assert all((o == o[0]).all() for o in second)
    del second
    third = conveyor.Dataset.range(200).map(lambda x: np.full(1 << 17, 250 - int(x) % 251, np.uint8),
                                            num_parallel_calls=2)._collect()
    assert all((o == 250 - i % 251).all() for i, o in enumerate(third))
    assert all((o == i % 251).all() for i, o in enumerate(first))


def test_pool_maps_dropped_with_calls_in_flight_leave_the_pool_right():
    # take(k) drops the map with calls in flight: some queued in the worker (not copied yet), some
    # sent, one running. The queued ones are withdrawn and the sent ones' replies read and dropped,
    # so the next map's calls get their own replies.
    rows = (np.arange(40, dtype=np.uint8)[:, None] + np.zeros(1 << 20, np.uint8)) * 3  # 1 MiB each
    ds = conveyor.Dataset.from_tensor_slices(rows).map(lambda x: x + 1, num_parallel_calls=2)
    for k in (1, 2, 3, 5, 8):
        got = ds.take(k)._collect()
        assert len(got) == k
        assert all(np.array_equal(o, rows[i] + 1) for i, o in enumerate(got))
    got = ds._collect()
    assert len(got) == 40 and all(np.array_equal(o, rows[i] + 1) for i, o in enumerate(got))


def test_two_pool_maps_zipped_share_the_pool_and_both_finish():
    # One thread reads both maps; each keeps 3 calls per pool process in flight, finished by that
    # thread. While one map's calls hold every process, the other's wait for room on the same
    # thread, which first hands the first map's calls to the executor's threads.
    rows = np.arange(60, dtype=np.uint8)[:, None] + np.zeros(1 << 18, np.uint8)  # 256 KiB each
    a = conveyor.Dataset.from_tensor_slices(rows).map(lambda x: x + 1, num_parallel_calls=2)
    b = conveyor.Dataset.range(60).map(lambda x: -x, num_parallel_calls=2)
    got = conveyor.Dataset.zip((a, b))._collect()
    assert len(got) == 60
    for i, (x, y) in enumerate(got):
        assert np.array_equal(x, rows[i] + 1) and int(y) == -i
    for k in (1, 4, 7):  # dropped with calls of both in flight
        assert len(conveyor.Dataset.zip((a, b)).take(k)._collect()) == k


def test_pool_arguments_with_the_same_layout_are_fresh_views_of_each_element():
    # A pool process reuses its views of a slot's input while the elements' layout stays the same
    # (no parsing per call): each call still sees its own element's values, and a function that
    # sets its argument's shape in place does not change the next call's.
    def f(x):
        shape = x.shape
        x.shape = (1, 2)
        return np.array([x.sum(), len(shape), shape[0]], np.int64)

    got = conveyor.Dataset.from_tensor_slices(np.arange(80).reshape(40, 2)).map(
        f, num_parallel_calls=2)._collect()
    assert [list(o) for o in got] == [[4 * i + 1, 1, 2] for i in range(40)]


def test_big_arrays_in_shared_memory_cross_a_fork_as_the_childs_own():
    # Tensors of 64 KiB or more live in the shared arena, memory the pool processes map to read
    # arguments in place. A forked child gets its own copy of what lives at the fork: the parent
    # reusing that memory afterwards does not change the child's arrays, and the child's own
    # pool maps work.
    rows = np.arange(8, dtype=np.uint8)[:, None] + np.zeros(1 << 20, np.uint8)
    held = conveyor.Dataset.from_tensor_slices(rows)._collect()  # views of one arena tensor
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(go_w)
            os.read(go_r, 1)  # the parent has freed `held` and written over its memory by now
            same = all(np.array_equal(o, rows[i]) for i, o in enumerate(held))
            mapped = conveyor.Dataset.from_tensor_slices(rows).map(
                lambda x: x + 2, num_parallel_calls=2)._collect()
            code = 0 if same and all(np.array_equal(o, rows[i] + 2) for i, o in enumerate(mapped)) else 3
        finally:
            os._exit(code)
    os.close(go_r)
    where = held[0].__array_interface__["data"][0]
    del held
    inverted = conveyor.Dataset.from_tensor_slices(255 - rows)._collect()  # the same memory again
    os.write(go_w, b"x")
    os.close(go_w)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert all(np.array_equal(o, 255 - rows[i]) for i, o in enumerate(inverted))
    assert inverted[0].__array_interface__["data"][0] == where  # (so the child's copy was needed)


def test_a_python_pipeline_run_again_reads_its_cache_file(tmp_path):
    # A lambda's cloudpickle differs from run to run (classes pickled by value get a random id):
    # the cache file records the input's fingerprint without pickles, so the same script run
    # again reads its file instead of failing with "written by another pipeline".
    calls = tmp_path / "calls"
    script = textwrap.dedent(f"""
        import conveyor
        def note(x):
            with open({str(calls)!r}, "a") as f:
                f.write("x\\n")
            return x * 2
        ds = conveyor.Dataset.range(10).map(lambda x: note(x)).cache({str(tmp_path / "c")!r})
        print(sorted(int(v) for v in ds._collect()))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    runs = []
    for _ in range(2):
        before = calls.read_text().count("x") if calls.exists() else 0
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == str([2 * i for i in range(10)])
        runs.append(calls.read_text().count("x") - before)
    # The first run calls the function for every element (and maybe once to trace it); the second
    # reads the file (at most the trace).
    assert runs[0] >= 10
    assert runs[1] <= 1, runs
