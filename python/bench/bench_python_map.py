#!/usr/bin/env python3
"""Python functions on the workers: what a Python `map` costs, against the same function in a plain
Python loop, in the same run.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_python_map.py
    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_python_map.py --elements 2000 --parallel 1,2

One in-process dispatcher and worker (the worker runs the functions in this interpreter). Three parts:
  overhead   a trivial map (the identity) over 8-byte int64 scalars and over 1 MiB arrays (int64
             vectors: uint8 is not a tensor dtype yet), in the worker's interpreter
             (num_parallel_calls=1) and through the pool (num_parallel_calls=2), read through the
             service, against the plain loop `for x in values: fn(x)` over numpy arrays held in
             memory, per element. A map-free read of the same dataset is timed too: the map's share
             is the difference.
  cpu        a CPU-bound map (a pure-Python loop of --work iterations per element) with
             num_parallel_calls = each of --parallel (1: the worker's interpreter; N > 1: N pool
             processes), elements/s and the ratio to the first.
Each figure is the median of --reps runs after one warm-up run.
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


def service_seconds(target, ds, elements):
    start = time.perf_counter()
    got = 0
    for _ in conveyor.distribute(ds, target, "distributed_epoch"):
        got += 1
    elapsed = time.perf_counter() - start
    if got != elements:
        raise SystemExit(f"read {got} elements, expected {elements}")
    return elapsed


def loop_seconds(fn, values):
    start = time.perf_counter()
    for v in values:
        fn(v)
    return time.perf_counter() - start


def median_of(reps, run):
    run()  # warm-up: pool processes start, functions are unpickled
    return statistics.median(run() for _ in range(reps))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--elements", type=int, default=5000, help="elements per 8-byte run")
    ap.add_argument("--big-elements", type=int, default=300, help="elements per 1 MiB run")
    ap.add_argument("--cpu-elements", type=int, default=400, help="elements per CPU-bound run")
    ap.add_argument("--work", type=int, default=20000, help="loop iterations per CPU-bound element")
    ap.add_argument("--parallel", default="1,2", help="num_parallel_calls values of the CPU-bound map")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()

    dispatcher = conveyor.DispatchServer()
    worker = conveyor.WorkerServer(dispatcher_address=dispatcher.target)
    try:
        print("overhead of a trivial Python map (per element, median of %d)" % args.reps)
        for size, n in ((8, args.elements), (1 << 20, args.big_elements)):
            plain_ds = dataset_for(size, n)
            values = [np.arange(max(1, size // 8), dtype=np.int64) if size > 8 else np.int64(i)
                      for i in range(min(n, 64))] * (n // min(n, 64) + 1)
            values = values[:n]
            read = median_of(args.reps, lambda: service_seconds(dispatcher.target, plain_ds, n)) / n
            loop = median_of(args.reps, lambda: loop_seconds(identity, values)) / n
            print(f"  {size:>8} B: read alone {read * 1e6:9.2f} us, plain loop {loop * 1e6:8.3f} us")
            for parallel in (1, 2):
                mapped_ds = plain_ds.map(identity, num_parallel_calls=parallel)
                mapped = median_of(args.reps, lambda: service_seconds(dispatcher.target, mapped_ds, n)) / n
                where = "worker's interpreter" if parallel == 1 else "pool of 2 processes "
                print(f"            map in the {where}: read+map {mapped * 1e6:9.2f} us, "
                      f"map's share {(mapped - read) * 1e6:9.2f} us "
                      f"({(mapped - read) / loop if loop > 0 else float('nan'):7.1f} x the plain loop)")

        print(f"CPU-bound map ({args.work} iterations per element), elements/s, median of {args.reps}")
        base = None
        fn = burn(args.work)
        loop = median_of(args.reps, lambda: loop_seconds(fn, [np.int64(i) for i in range(args.cpu_elements)]))
        print(f"  plain loop:             {args.cpu_elements / loop:9.1f}/s")
        for p in (int(v) for v in args.parallel.split(",")):
            ds = conveyor.Dataset.range(args.cpu_elements).map(fn, num_parallel_calls=p)
            t = median_of(args.reps, lambda: service_seconds(dispatcher.target, ds, args.cpu_elements))
            rate = args.cpu_elements / t
            base = base or rate
            print(f"  num_parallel_calls={p:<3}: {rate:9.1f}/s  ({rate / base:.2f} x the first)")
    finally:
        worker.stop()
        dispatcher.stop()


if __name__ == "__main__":
    main()
