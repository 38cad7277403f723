"""A process that reads a stream or starts a server keeps freed batch memory instead of giving it
back to the kernel at once (pipeline/runtime/malloc_tuning.cpp): the reader's free of each batch
buffer no longer trims the worker thread's heap, which the next batch faulted back in page by page
(docs/BENCHMARKS.md, the Python iterator). Each case runs in a fresh interpreter: the tuning is
made once per process."""

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import Cluster

TIMEOUT_S = 60

# mmapped_growth(): how many bytes of fresh mmaps an 8 MiB malloc made (glibc's mallinfo2);
# glibc's default serves it with an mmap, the tuned thresholds from the heap.
PRELUDE = textwrap.dedent("""
    import ctypes, sys
    import conveyor
    from conveyor import _conveyor

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                     "uordblks", "fordblks", "keepcost")]
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = MallInfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]

    def mmapped_growth():
        before = libc.mallinfo2().hblkhd
        p = libc.malloc(8 << 20)
        grown = libc.mallinfo2().hblkhd - before
        libc.free(p)
        return grown
""")


def run_script(body, **env_changes):
    env = {k: v for k, v in os.environ.items()
           if k not in ("GLIBC_TUNABLES", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")}
    env.update(env_changes)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def cluster_elsewhere():
    c = Cluster(workers=1)  # in the test process: the scripts only read from it
    yield c
    c.stop()


def test_importing_changes_nothing_a_server_tunes():
    out = run_script("""
        assert _conveyor._malloc_tuning() is None
        assert mmapped_growth() >= 8 << 20  # glibc's default: a fresh mmap
        d = conveyor.DispatchServer()
        assert _conveyor._malloc_tuning() == "applied"
        assert mmapped_growth() == 0, "an 8 MiB block still came from a fresh mmap"
        d.stop()
        print("ok")
    """)
    assert out.strip() == "ok"


def test_a_reading_process_tunes(cluster_elsewhere):
    out = run_script(f"""
        assert _conveyor._malloc_tuning() is None
        it = iter(conveyor.distribute(conveyor.Dataset.range(4), "{cluster_elsewhere.target}",
                                      "parallel_epochs"))
        assert _conveyor._malloc_tuning() == "applied"
        assert sorted(int(x) for x in it) == [0, 1, 2, 3]
        assert mmapped_growth() == 0
        print("ok")
    """)
    assert out.strip() == "ok"


def test_the_environments_setting_wins():
    out = run_script("""
        w = conveyor.DispatchServer()
        assert _conveyor._malloc_tuning() == "environment"
        assert mmapped_growth() >= 8 << 20  # MALLOC_MMAP_THRESHOLD_ below: still an mmap
        w.stop()
        print("ok")
    """, MALLOC_MMAP_THRESHOLD_="131072")
    assert out.strip() == "ok"
