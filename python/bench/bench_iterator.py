#!/usr/bin/env python3
"""Python iterator throughput against the C++ ElementStream, in the same run, on the same cluster.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_iterator.py            # 8 B and 1 MiB
    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_iterator.py --sizes 8 --seconds 5

For each element size it reads an endless dataset through the service for --seconds, alternating
(--reps times) between
  C++    : a loop over ElementStream::next in C++ without the GIL (what a C++ trainer runs), and
  Python : `for x in conveyor.distribute(...)`, taking each element as a numpy array (x.nbytes),
(alternating which goes first); --trainer-ops adds trainer-side ops after distribute on the
Python side (the elements stay one per read, so the counts compare), and prints elements/s, MB/s, the ratio Python / C++ (of the medians
and per adjacent run pair), the consuming thread's CPU time per element on each side (robust on a
loaded machine: their difference is the Python per-element overhead), at small sizes the
wall-clock overhead 1/python_rate - 1/cpp_rate, and (Linux) the CPU time per element of the
process's other threads (the in-process worker and the consumer actor: the producer) and the
process's page faults per element during each side's runs: the producer's cost is not the same
under both readers (docs/BENCHMARKS.md). Numeric elements: 8 B = int64 scalars, larger
sizes = int64 vectors, so the Python side gets zero-copy arrays.
"""

import argparse
import os
import statistics
import sys
import threading
import time

try:
    import conveyor
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "python"))
    import conveyor
from conveyor import _conveyor


def dataset_for(size):
    if size == 8:
        return conveyor.Dataset.range(1 << 62)  # endless int64 scalars
    if size % 8:
        raise SystemExit(f"--sizes: {size} is not a multiple of 8 (elements are int64 vectors)")
    n = size // 8
    return conveyor.Dataset.range(n).batch(n, drop_remainder=True).cache().repeat()


def other_threads():
    """(CPU seconds of this process's threads but the calling one, minor page faults of the
    process) from /proc, or None where there is no /proc. The other threads are the producer:
    the consumer actor, and with the in-process cluster the worker."""
    me = threading.get_native_id()
    try:
        tids = os.listdir("/proc/self/task")
        with open("/proc/self/stat") as f:
            stat = f.read()
    except OSError:
        return None
    faults = int(stat[stat.rindex(")") + 2:].split()[7])
    cpu = 0.0
    for tid in tids:
        if int(tid) == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                cpu += int(f.read().split()[0]) / 1e9  # nanoseconds on a CPU
        except (OSError, ValueError, IndexError):
            pass  # the thread ended meanwhile (or no schedstat): its time is not counted
    return cpu, faults


def with_producer_cost(run):
    """run() -> (elements, bytes, seconds, consumer CPU) measured; returns (elements/s, MB/s,
    consumer CPU per element, producer CPU per element, page faults per element). The producer's
    figures span the whole call (warm-up included) at the measured rate: None without /proc."""
    before = other_threads()
    start = time.monotonic()
    n, b, s, c = run()
    wall = time.monotonic() - start
    after = other_threads()
    producer = faults = None
    if before and after:
        elements = n / s * wall
        producer = (after[0] - before[0]) / elements
        faults = (after[1] - before[1]) / elements
    return n / s, b / s / 1e6, c / n, producer, faults


# --trainer-ops: the ops after distribute() on the Python side (trainer.py).
TRAINER_OPS = {
    "none": lambda d: d,
    "shuffle-prefetch": lambda d: d.shuffle(64, seed=1).prefetch(8),
    "map-shuffle-prefetch": lambda d: d.map(lambda x: x).shuffle(64, seed=1).prefetch(8),
}


def python_run(target, ds, opts, warmup, seconds, trainer_ops="none"):
    it = iter(TRAINER_OPS[trainer_ops](conveyor.distribute(ds, target, **opts)))
    try:
        end = time.monotonic() + warmup
        while time.monotonic() < end:
            for _ in range(64):
                next(it)
        elements = nbytes = 0
        cpu0 = time.thread_time()
        start = time.monotonic()
        end = start + seconds
        while time.monotonic() < end:
            for _ in range(64):
                x = next(it)
                elements += 1
                nbytes += x.nbytes
        return elements, nbytes, time.monotonic() - start, time.thread_time() - cpu0
    finally:
        it.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dispatcher", help="a running dispatcher (default: one dispatcher + --workers in-process)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--sizes", default="8,1048576", help="element sizes in bytes (default 8,1048576)")
    p.add_argument("--seconds", type=float, default=3.0, help="measured seconds per run (default 3)")
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--reps", type=int, default=3, help="C++/Python run pairs per size (default 3)")
    p.add_argument("--mode", default="parallel_epochs")
    p.add_argument("--trainer-ops", default="none", choices=sorted(TRAINER_OPS),
                   help="trainer-side ops after distribute on the Python side (default none)")
    args = p.parse_args()
    if args.seconds <= 0 or args.seconds > 120 or args.reps < 1 or args.reps > 20:
        p.error("--seconds must be in (0, 120] and --reps in [1, 20]")

    servers = []
    target = args.dispatcher
    if not target:
        dispatcher = conveyor.DispatchServer()
        servers = [conveyor.WorkerServer(dispatcher_address=dispatcher.target) for _ in range(args.workers)]
        servers.append(dispatcher)
        target = dispatcher.target
    opts = dict(processing_mode=args.mode, compression="NONE")
    print(f"bench iterator: {target}, {args.workers if not args.dispatcher else '?'} worker(s), "
          f"{args.mode}, compression NONE, trainer ops {args.trainer_ops}, {args.reps} x {args.seconds:.1f} s per side and size", flush=True)
    try:
        for size in [int(s) for s in args.sizes.split(",")]:
            ds = dataset_for(size)
            options = _conveyor._make_options(processing_mode=args.mode, job_name=None, consumer_index=None,
                                              num_consumers=None, max_outstanding_requests=None,
                                              compression="NONE", target_workers="AUTO",
                                              max_buffered_bytes=None, request_timeout_ms=None)
            cpp, py = [], []
            for rep in range(args.reps):
                # Alternate which side goes first, so that drifting load favours neither.
                order = ("cpp", "py") if rep % 2 == 0 else ("py", "cpp")
                for side in order:
                    if side == "cpp":
                        cpp.append(with_producer_cost(lambda: _conveyor._bench_cpp_stream(
                            target, ds, options, args.warmup, args.seconds)))
                    else:
                        py.append(with_producer_cost(lambda: python_run(
                            target, ds, opts, args.warmup, args.seconds, args.trainer_ops)))
            pair_ratios = [p[0] / c[0] for p, c in zip(py, cpp)]
            c_el = statistics.median(r[0] for r in cpp)
            p_el = statistics.median(r[0] for r in py)
            c_mb = statistics.median(r[1] for r in cpp)
            p_mb = statistics.median(r[1] for r in py)
            print(f"size {size} B:")
            print(f"  C++ ElementStream : {c_el:12.0f} elements/s {c_mb:10.1f} MB/s  runs: "
                  + ", ".join(f"{r[0]:.0f}" for r in cpp))
            print(f"  Python iterator   : {p_el:12.0f} elements/s {p_mb:10.1f} MB/s  runs: "
                  + ", ".join(f"{r[0]:.0f}" for r in py))
            print(f"  ratio Python/C++  : {p_el / c_el:.2f} (medians); per run pair: "
                  + ", ".join(f"{r:.2f}" for r in pair_ratios)
                  + f"; median {statistics.median(pair_ratios):.2f}")
            c_cpu = statistics.median(r[2] for r in cpp)
            p_cpu = statistics.median(r[2] for r in py)
            print(f"  consuming thread CPU per element: C++ {c_cpu * 1e6:.3f} us, Python {p_cpu * 1e6:.3f} us "
                  f"-> Python overhead {(p_cpu - c_cpu) * 1e6:.3f} us per element")
            if all(r[3] is not None for r in cpp + py):
                who = "consumer actor; the workers run elsewhere" if args.dispatcher else "producer"
                print(f"  other threads ({who}) CPU per element: C++ run {statistics.median(r[3] for r in cpp) * 1e6:.3f} us, "
                      f"Python run {statistics.median(r[3] for r in py) * 1e6:.3f} us; page faults per element: "
                      f"C++ run {statistics.median(r[4] for r in cpp):.3f}, Python run {statistics.median(r[4] for r in py):.3f}")
            if size <= 4096:
                print(f"  Python overhead (wall, 1/python_rate - 1/cpp_rate): "
                      f"{(1 / p_el - 1 / c_el) * 1e6:.2f} us per element")
            sys.stdout.flush()
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    main()
