"""Shared fixtures: an in-process cluster (DispatchServer + 2 WorkerServers on loopback, port 0)."""

import os
import sys

import pytest

# Run from the source tree without PYTHONPATH: fall back to the default build directory.
_build = os.environ.get("CONVEYOR_BINARY_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build")
_pkg = os.path.join(_build, "python")
if os.path.isdir(_pkg) and _pkg not in sys.path:
    sys.path.insert(0, _pkg)

import conveyor  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class Cluster:
    def __init__(self, workers=2):
        self.dispatcher = conveyor.DispatchServer(port=0, worker_timeout_ms=2000)
        self.workers = [conveyor.WorkerServer(dispatcher_address=self.dispatcher.target, port=0,
                                              heartbeat_interval_ms=200)
                        for _ in range(workers)]

    @property
    def target(self):
        return self.dispatcher.target

    def stop(self):
        for w in self.workers:
            w.stop()
        self.dispatcher.stop()


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(workers=2)
    yield c
    c.stop()
