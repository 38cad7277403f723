#!/usr/bin/env python3
"""Python functions on the workers: what a Python `map` costs per element, against the same function
in a plain Python loop, in the same run.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_python_map.py
    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_python_map.py --parallel 1,2,4 --work 50000

The pipelines run in this process as a worker runs them (Dataset._collect: the pipeline's threads
call the function, this thread waits without the GIL), so the figures are the function's path, not
the network's. Parts:
  overhead   `lambda x: x + 1` (a new array per element) and the identity (returned unchanged: the
             element's own tensor goes on, no copy) on 8-byte int64 scalars and 1 MiB arrays
             (int64 vectors: uint8 is not a tensor dtype yet), in the worker's interpreter
             (num_parallel_calls=1) and through the pool (num_parallel_calls=2); per element, the
             map's time (the pipeline minus the same pipeline without the map) and the plain loop
             `for x in values: fn(x)` over numpy arrays held in memory, and their ratio.
  cpu        a CPU-bound map (a pure-Python loop of --work iterations per element) with
             num_parallel_calls = each of --parallel (1: the worker's interpreter; N > 1: N pool
             processes), elements/s, the ratio to the first and to N.
  service    (--service) the overhead part read through an in-process dispatcher and worker.
Each figure is the median of --reps runs after one warm-up run (which starts the pool processes).
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

try:
    import conveyor
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "python"))
    import conveyor


def identity(x):
    return x


def plus_one(x):
    return x + 1


def burn(work):
    def f(x):
        acc = 0
        for i in range(work):
            acc += i * i
        return x + (acc & 1)
    return f


def dataset_for(size, elements):
    if size == 8:
        return conveyor.Dataset.range(elements)
    n = size // 8
    return conveyor.Dataset.range(n).batch(n, drop_remainder=True).cache().repeat(elements)


def values_for(size, elements):
    if size == 8:
        return [np.int64(i) for i in range(elements)]
    one = np.arange(size // 8, dtype=np.int64)
    return [one] * elements


def timed(run):
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def median_of(reps, run):
    run()  # warm-up: pool processes start, functions are unpickled
    return statistics.median(timed(run) for _ in range(reps))


def collect_seconds(ds, elements):
    def run():
        got = len(ds._collect())
        if got != elements:
            raise SystemExit(f"got {got} elements, expected {elements}")
    return run


def service_seconds(target, ds, elements):
    def run():
        got = sum(1 for _ in conveyor.distribute(ds, target, "distributed_epoch"))
        if got != elements:
            raise SystemExit(f"read {got} elements, expected {elements}")
    return run


def overhead(args, runner, label):
    print(f"overhead per element ({label}), median of {args.reps}: map's time / plain loop")
    for size, n in ((8, args.elements), (1 << 20, args.big_elements)):
        base = median_of(args.reps, runner(dataset_for(size, n), n)) / n
        values = values_for(size, n)
        for fn, name in ((plus_one, "x + 1"), (identity, "identity")):
            loop = median_of(args.reps, lambda: [fn(v) for v in values]) / n
            for parallel in (1, 2):
                ds = dataset_for(size, n).map(fn, num_parallel_calls=parallel)
                mapped = median_of(args.reps, runner(ds, n)) / n
                where = "interpreter" if parallel == 1 else "pool of 2  "
                share = mapped - base
                print(f"  {size:>8} B {name:>8} {where}: {share * 1e6:9.2f} us / {loop * 1e6:8.2f} us"
                      f" = {share / loop if loop > 0 else float('nan'):8.2f} x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--elements", type=int, default=20000, help="elements per 8-byte run")
    ap.add_argument("--big-elements", type=int, default=200, help="elements per 1 MiB run")
    ap.add_argument("--cpu-elements", type=int, default=400, help="elements per CPU-bound run")
    ap.add_argument("--work", type=int, default=20000, help="loop iterations per CPU-bound element")
    ap.add_argument("--parallel", default="1,2", help="num_parallel_calls values of the CPU-bound map")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--service", action="store_true", help="also read the overhead part through the service")
    args = ap.parse_args()

    overhead(args, collect_seconds, "the pipeline in this process")

    print(f"CPU-bound map ({args.work} iterations per element), elements/s, median of {args.reps}")
    fn = burn(args.work)
    values = values_for(8, args.cpu_elements)
    loop = median_of(args.reps, lambda: [fn(v) for v in values])
    print(f"  plain loop:             {args.cpu_elements / loop:9.1f}/s")
    base = None
    for p in (int(v) for v in args.parallel.split(",")):
        ds = conveyor.Dataset.range(args.cpu_elements).map(fn, num_parallel_calls=p)
        rate = args.cpu_elements / median_of(args.reps, collect_seconds(ds, args.cpu_elements))
        base = base or rate
        print(f"  num_parallel_calls={p:<3}: {rate:9.1f}/s  ({rate / base:.2f} x the first, "
              f"{rate / base / p:.2f} x N)")

    if args.service:
        dispatcher = conveyor.DispatchServer()
        worker = conveyor.WorkerServer(dispatcher_address=dispatcher.target)
        try:
            overhead(args, lambda ds, n: service_seconds(dispatcher.target, ds, n),
                     "read through an in-process dispatcher and worker")
        finally:
            worker.stop()
            dispatcher.stop()


if __name__ == "__main__":
    main()
