"""DispatchServer / WorkerServer: tf.data service's start / join / stop semantics and errors."""

import os
import socket
import subprocess
import threading
import time

import pytest

import conveyor


def test_start_false_then_start_is_idempotent():
    d = conveyor.DispatchServer(start=False)
    d.start()
    d.start()  # as tf.data's: starting a started server is fine
    assert d.target.startswith("127.0.0.1:") and d.port > 0 and d.target.endswith(str(d.port))
    d.stop()
    d.stop()  # idempotent
    with pytest.raises(RuntimeError, match="stopped"):
        d.start()


def test_join_returns_after_stop_from_another_thread():
    d = conveyor.DispatchServer()
    threading.Timer(0.3, d.stop).start()
    t = time.monotonic()
    d.join()
    assert time.monotonic() - t >= 0.25


def test_config_objects_and_unknown_arguments():
    config = conveyor.DispatcherConfig(port=0, worker_timeout_ms=1000)
    with conveyor.DispatchServer(config) as d:
        with conveyor.WorkerServer(conveyor.WorkerConfig(dispatcher_address=d.target)) as w:
            assert w.worker_address.startswith("127.0.0.1:")
    with pytest.raises(TypeError, match="unknown argument `protocol`"):
        conveyor.DispatchServer(protocol="grpc")
    with pytest.raises(TypeError, match="DispatcherConfig"):
        conveyor.DispatchServer(config={"port": 0})


def test_port_in_use_is_an_error_naming_it():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    try:
        with pytest.raises(conveyor.ConveyorError, match=str(port)):
            conveyor.DispatchServer(port=port)
    finally:
        s.close()


def test_worker_without_a_reachable_dispatcher_fails_within_its_timeout():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    t = time.monotonic()
    with pytest.raises((ConnectionError, TimeoutError)):
        conveyor.WorkerServer(dispatcher_address=f"127.0.0.1:{port}", dispatcher_timeout_ms=1000)
    assert time.monotonic() - t < 10
    with pytest.raises(ValueError, match="address"):
        conveyor.WorkerServer(dispatcher_address="")


def test_worker_advertised_address():
    with conveyor.DispatchServer() as d:
        with conveyor.WorkerServer(dispatcher_address=d, worker_address="localhost:%port%") as w:
            assert w.worker_address == f"localhost:{w.port}"


def test_worker_tags_reach_the_dispatcher_and_bad_tags_are_refused():
    build = os.environ.get("CONVEYOR_BINARY_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "build")
    with conveyor.DispatchServer() as d:
        with conveyor.WorkerServer(dispatcher_address=d, worker_tags=["COLOCATED", "zone-a"]):
            status = subprocess.run([os.path.join(build, "conveyor"), "status", "--dispatcher", d.target],
                                    capture_output=True, text=True, timeout=60)
            assert status.returncode == 0, status.stderr
            assert "COLOCATED,zone-a" in status.stdout
        with pytest.raises(ValueError, match="worker_tags"):
            conveyor.WorkerServer(dispatcher_address=d, worker_tags=["a\tb"])


def test_tenant_caps_cap_a_tenants_workers_and_bad_caps_are_refused():
    # tenant_max_workers={"small": 1}: an OFF ("parallel_epochs") job of "small" runs on one of
    # the two workers, so it reads the dataset once; another tenant's job reads it on both.
    config = conveyor.DispatcherConfig(tenant_max_workers={"small": 1},
                                       tenant_max_buffer_bytes={"small": 4096})
    with conveyor.DispatchServer(config) as d:
        with conveyor.WorkerServer(dispatcher_address=d.target), \
                conveyor.WorkerServer(dispatcher_address=d.target):
            ds = conveyor.Dataset.range(200)
            small = conveyor.distribute(ds, d.target, "parallel_epochs", tenant="small")
            assert sorted(int(x) for x in small) == list(range(200))
            big = conveyor.distribute(ds, d.target, "parallel_epochs", tenant="big")
            assert sorted(int(x) for x in big) == sorted(list(range(200)) * 2)
    with pytest.raises(ValueError, match="`tenant_max_workers`: the cap of tenant \"a\" must be at least 1"):
        conveyor.DispatchServer(tenant_max_workers={"a": 0})
    with pytest.raises(ValueError, match="`tenant_max_buffer_bytes`: Invalid `tenant` argument"):
        conveyor.DispatchServer(tenant_max_buffer_bytes={"a b": 10})
