"""Closing iterators from other threads, interpreter exit and os.fork(): each case runs in a fresh
interpreter with its own in-process cluster, under a timeout, so that a regression (a hang)
fails its test instead of hanging the suite."""

import os
import subprocess
import sys
import textwrap

import pytest

TIMEOUT_S = 60

# Each script starts a dispatcher and a worker in its own process; `endless()` opens a stream of
# an endless job. A thread that hangs makes the script exit 3 (os._exit: no exit-time cleanup
# that could hang as well).
PRELUDE = textwrap.dedent("""
    import gc, os, signal, sys, threading, time
    import conveyor
    d = conveyor.DispatchServer()
    w = conveyor.WorkerServer(dispatcher_address=d.target)

    def endless():
        return iter(conveyor.distribute(conveyor.Dataset.range(10**9), d.target, "parallel_epochs"))

    def in_thread(fn, what, limit=20):
        t = threading.Thread(target=fn, daemon=True)
        t.start()
        t.join(limit)
        if t.is_alive():
            print("HUNG:", what, flush=True)
            os._exit(3)
""")


def run_script(body, timeout=TIMEOUT_S):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    try:
        proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the script hung (killed after {timeout} s); output:\n{e.stdout}\n{e.stderr}")
    out = proc.stdout
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{out}\nstderr:\n{proc.stderr[-4000:]}"
    return out


def test_close_from_another_thread():
    out = run_script("""
        it = endless()
        next(it)
        in_thread(it.close, "close() from another thread")
        in_thread(it.close, "a second close()")
        try:
            next(it)
        except StopIteration:
            print("next after close: StopIteration")
    """)
    assert "next after close: StopIteration" in out


def test_iterator_collected_in_another_thread():
    out = run_script("""
        holder = [endless()]
        kept = next(holder[0])  # an element still alive when the stream goes
        in_thread(lambda: (holder.clear(), gc.collect()), "del + gc.collect() in another thread")
        print("collected", int(kept))
    """)
    assert "collected 0" in out


def test_close_while_the_main_thread_iterates():
    out = run_script("""
        it = endless()
        next(it)
        closed = threading.Event()
        def closer():
            time.sleep(0.3)
            it.close()
            closed.set()
        threading.Thread(target=closer, daemon=True).start()
        n = 0
        for x in it:  # ends (StopIteration) once the other thread closed it
            n += 1
        if not closed.wait(20):
            print("HUNG: close()"); os._exit(3)
        try:
            next(it)
        except StopIteration:
            print("loop ended after", n > 0, "elements; next: StopIteration")
    """)
    assert "loop ended after True elements; next: StopIteration" in out


def test_close_while_another_thread_waits_for_a_slow_element():
    # The reader waits (GIL released, 100 ms slices) for an element that takes 5 s; the main
    # thread closes; the reader gets StopIteration, then so does every later next().
    out = run_script("""
        ds = conveyor.Dataset.range(3).map(conveyor.Function("sleep_us", us=5_000_000))
        it = iter(conveyor.distribute(ds, d.target, "parallel_epochs"))
        outcome = []
        def reader():
            for _ in range(2):
                try:
                    next(it)
                    outcome.append("element")
                except StopIteration:
                    outcome.append("stop")
        t = threading.Thread(target=reader, daemon=True)
        t.start()
        time.sleep(0.3)
        start = time.monotonic()
        in_thread(it.close, "close() while another thread waits")
        t.join(20)
        print("outcome", outcome, "alive", t.is_alive(), "fast", time.monotonic() - start < 3)
    """)
    assert "outcome ['stop', 'stop'] alive False fast True" in out


def test_exit_while_a_daemon_thread_iterates():
    out = run_script("""
        started = threading.Event()
        def reader():
            for x in endless():
                started.set()
        threading.Thread(target=reader, daemon=True).start()
        if not started.wait(20):
            print("HUNG: no element"); os._exit(3)
        time.sleep(0.2)
        print("main returns", flush=True)
    """, timeout=30)
    assert "main returns" in out


FORK_PRELUDE = """
    it = endless()
    first = int(next(it))

    def fork(child):
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)  # a hung child dies of SIGALRM: the parent sees a signal, not exit 0
            try:
                child()
            except BaseException as e:
                print("child raised", type(e).__name__, e, flush=True)
                os._exit(4)
            sys.stdout.flush()
            sys.exit(0)  # a normal exit: atexit handlers and finalization run
        _, status = os.waitpid(pid, 0)
        print("child", "exit %d" % os.WEXITSTATUS(status) if os.WIFEXITED(status)
              else "killed by signal %d" % os.WTERMSIG(status), flush=True)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork")
def test_fork_child_exits_with_parent_stream_and_servers_open():
    out = run_script(FORK_PRELUDE + """
    fork(lambda: print("child runs", flush=True))
    # The parent's stream and servers are unaffected.
    print("parent next", int(next(it)) == first + 1, flush=True)
    it.close(); w.stop(); d.stop()
    """)
    assert "child runs" in out and "child exit 0" in out and "parent next True" in out


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork")
def test_fork_child_cannot_use_the_parents_objects_but_can_make_its_own():
    out = run_script(FORK_PRELUDE + """
    def child():
        try:
            next(it)
            print("child got an element of the parent's stream", flush=True)
        except conveyor.FailedPreconditionError as e:
            print("child next:", e, flush=True)
        try:
            it.stats()
        except RuntimeError as e:
            print("child stats raises", flush=True)
        it.close()  # does nothing: the parent's job is the parent's
        w.stop()
        try:
            d.join()
        except RuntimeError as e:
            print("child join raises", flush=True)
        got = sorted(int(x) for x in conveyor.distribute(conveyor.Dataset.range(5), d.target,
                                                         "distributed_epoch"))
        print("child's own stream", got, flush=True)
    fork(child)
    print("parent next", int(next(it)) == first + 1, flush=True)
    """)
    assert "child got an element" not in out
    assert "child next: this iterator was created in the parent process before os.fork()" in out
    assert "create them in the child" in out
    assert "child stats raises" in out and "child join raises" in out
    assert "child's own stream [0, 1, 2, 3, 4]" in out
    assert "child exit 0" in out and "parent next True" in out
