#!/usr/bin/env python3
"""Python functions on the workers: what a Python `map` costs per element, against the same function
in a plain Python loop, in the same run.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_python_map.py
    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_python_map.py --parallel 1,2,4 --work 50000

The pipelines run in this process as a worker runs them (Dataset._collect: the pipeline's threads
call the function, this thread waits without the GIL), so the figures are the function's path, not
the network's. Parts:
  overhead   `lambda x: x + 1` (a new array per element) and the identity (returned unchanged: the
             element's own tensor goes on, no copy) on 8-byte int64 scalars and 1 MiB uint8 arrays,
             in the worker's interpreter (num_parallel_calls=1) and through the pool
             (num_parallel_calls=2); per element, side by side: the same pipeline without the map
             (base), with it (mapped), their difference (the map's time: mapped - base, with the
             spread of the mapped runs) and the plain loop `for x in values: fn(x)` over numpy
             arrays held in memory, and the map's time / the loop's; then the CPU time per mapped
             element of this process and of its pool processes over the runs (what a loaded
             machine disturbs less than the times), and in brackets the part of this process's
             that ran on this thread, the map's (it pulls every element: on many cores a pool
             map cannot go faster than it).
  cpu        a CPU-bound map (a pure-Python loop of --work iterations per element) with
             num_parallel_calls = each of --parallel (1: the worker's interpreter; N > 1: N pool
             processes), elements/s, the ratio to the first and to N; beside each N > 1 what the
             machine allows: N plain interpreter processes running the same loop at once (their
             elements/s together, the same ratios).
  service    (--service) the overhead part read through an in-process dispatcher and worker.
Every run lasts at least --seconds (after a warm-up run, which starts the pool processes, the
element count grows until a run lasts a quarter of it, and is then scaled up; 8-byte base pipelines
stop at MAX_ELEMENTS); each figure is the fastest of --reps runs (the least disturbed by other
load; a slow base run no longer drives the difference negative; base and mapped are printed
side by side with the spread of the mapped runs), and
the load average is printed with each part.
"""

import argparse
import os
import subprocess
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


BIG = 1 << 20
KEPT = 1000
MAX_ELEMENTS = 1 << 26  # 8-byte base pipelines may stop here, short of --seconds


def dataset_for(size, elements):
    if size == 8:
        return conveyor.Dataset.range(elements)
    return conveyor.Dataset.from_tensors(np.zeros(BIG, np.uint8)).repeat(elements)


def values_for(size, elements):
    if size == 8:
        return [np.int64(i) for i in range(elements)]
    return [np.zeros(BIG, np.uint8)] * elements


def plain_loop(fn, size):
    """`for x in values: fn(x)` over n elements: 1000 values held in memory, cycled."""
    chunk = values_for(size, 1000)

    def run(n):
        for _ in range(n // len(chunk)):
            for v in chunk:
                fn(v)
        for v in chunk[:n % len(chunk)]:
            fn(v)
    return run


def load():
    return "load %.2f %.2f %.2f" % os.getloadavg()


def collect(make_ds):
    # _collect holds what it returns: the pipeline keeps every KEPT-th element (shard), so a run of
    # new 1 MiB arrays does not grow this process by a megabyte per element.
    def run(n):
        got = len(make_ds(n).shard(KEPT, 0)._collect())
        if got != (n + KEPT - 1) // KEPT:
            raise SystemExit(f"got {got} of {n} elements, expected every {KEPT}th")
    return run


def through_service(target):
    def runner(make_ds):
        def run(n):
            got = sum(1 for _ in conveyor.distribute(make_ds(n), target, "distributed_epoch"))
            if got != n:
                raise SystemExit(f"read {got} elements, expected {n}")
        return run
    return runner


def cpu_seconds():
    """(this process's CPU seconds, its live children's: the pool processes, this thread's: the
    map's thread, which pulls every element; on many cores the serial limit of a pool map)"""
    me, tick, children = os.getpid(), os.sysconf("SC_CLK_TCK"), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me:
                children += (int(fields[11]) + int(fields[12])) / tick
    return time.process_time(), children, time.thread_time()


def per_element(args, run, start=100, cpu=None):
    """Seconds per element of `run(n)`, one per rep: a warm-up run of `start` elements (it starts the
    pool processes), runs of growing n until one lasts --seconds / 4, then --reps runs of enough
    elements to last --seconds each. `cpu`, a list: gets
    the CPU seconds per element of this process, of its children and of this thread over the reps."""
    run(start)  # warm-up: pool processes start, functions are unpickled (not a measure of n)
    n = start
    while True:
        t0 = time.perf_counter()
        run(n)
        took = time.perf_counter() - t0
        if took >= args.seconds / 4 or n >= MAX_ELEMENTS:
            break
        n *= 4 if took < args.seconds / 16 else 2
    n = min(max(n, int(n * args.seconds / max(took, 1e-9) * 1.1)), MAX_ELEMENTS)
    out = []
    before = cpu_seconds()
    for _ in range(args.reps):
        t0 = time.perf_counter()
        run(n)
        out.append((time.perf_counter() - t0) / n)
    if cpu is not None:
        cpu[:] = [(b - a) / (n * args.reps) for a, b in zip(before, cpu_seconds())]
    return out


def us(x):
    return f"{x * 1e6:9.2f}"


def overhead(args, runner, label):
    print(f"overhead per element ({label}), us, fastest of {args.reps} runs of >= {args.seconds} s; {load()}")
    print(f"  {'':>8}   {'function':>8} {'where':<11}: {'base':>9} {'mapped':>9} {'map':>9} {'spread':>9}"
          f" | {'loop':>9} | map/loop | CPU per mapped element: this process + pool processes"
          f" (of which the map's thread)")
    for size in (8, BIG):
        base = min(per_element(args, runner(lambda n: dataset_for(size, n))))
        for fn, name in ((plus_one, "x + 1"), (identity, "identity")):
            loop = min(per_element(args, plain_loop(fn, size)))
            for parallel in (1, 2):
                used = []
                mapped = per_element(args, runner(
                    lambda n: dataset_for(size, n).map(fn, num_parallel_calls=parallel)), cpu=used)
                where = "interpreter" if parallel == 1 else "pool of 2"
                share = min(mapped) - base
                print(f"  {size:>8} B {name:>8} {where:<11}: {us(base)} {us(min(mapped))} {us(share)}"
                      f" {us(max(mapped) - min(mapped))} | {us(loop)} | {share / loop:8.2f} x |"
                      f" {us(used[0])} + {us(used[1])} ({us(used[2]).strip()})")


# N plain interpreters running the CPU-bound loop at once: what the machine allows N processes.
PLAIN = r"""
import sys, time
import numpy as np
work, n = int(sys.argv[1]), int(sys.argv[2])
def f(x):
    acc = 0
    for i in range(work):
        acc += i * i
    return x + (acc & 1)
values = [np.int64(i) for i in range(n)]
sys.stdout.write("ready\n"); sys.stdout.flush()
sys.stdin.readline()  # all start together
t0 = time.perf_counter()
for v in values:
    f(v)
print(time.perf_counter() - t0)
"""


def plain_processes(args, count, elements):
    """Elements/s of `count` plain interpreter processes each looping over elements/count."""
    each = max(1, elements // count)
    procs = [subprocess.Popen([sys.executable, "-c", PLAIN, str(args.work), str(each)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(count)]
    for p in procs:
        if p.stdout.readline().strip() != "ready":
            raise SystemExit("a plain process did not start")
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    took = max(float(p.communicate()[0]) for p in procs)
    return each * count / took


def cpu(args):
    print(f"CPU-bound map ({args.work} iterations per element), elements/s, fastest of {args.reps} runs"
          f" of >= {args.seconds} s; {load()}")
    print("  (CPU: per element, this process + its pool processes, over the runs; plain: N plain\n"
          "  interpreters looping at once, the most the machine gave them in --reps tries)")
    fn = burn(args.work)
    used = []
    loop = per_element(args, plain_loop(fn, 8), start=10, cpu=used)
    print(f"  plain loop:             {1 / min(loop):9.1f}/s  CPU {us(used[0])} us")
    base = None
    for p in (int(v) for v in args.parallel.split(",")):
        took = per_element(args, collect(
            lambda n: conveyor.Dataset.range(n).map(fn, num_parallel_calls=p)), start=10, cpu=used)
        rate = 1 / min(took)
        base = base or rate
        line = (f"  num_parallel_calls={p:<3}: {rate:9.1f}/s  {rate / base:.2f} x the first, "
                f"{rate / base / p:.2f} x N;  CPU {us(used[0])} + {us(used[1])} us")
        if p > 1:
            elements = int(rate * args.seconds) + p
            plain = max(plain_processes(args, p, elements) for _ in range(args.reps))
            line += (f";  {p} plain: {plain:9.1f}/s ({plain / base / p:.2f} x N; the map "
                     f"{rate / plain:.2f} x theirs)")
        print(line)
    print(f"  ({load()})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=1.0, help="the least duration of one run")
    ap.add_argument("--work", type=int, default=20000, help="loop iterations per CPU-bound element")
    ap.add_argument("--parallel", default="1,2", help="num_parallel_calls values of the CPU-bound map")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--parts", default="overhead,cpu", help="which parts: overhead, cpu (comma-separated)")
    ap.add_argument("--service", action="store_true", help="also read the overhead part through the service")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    if not parts <= {"overhead", "cpu"} or args.reps < 1 or args.seconds <= 0:
        ap.error(f"--parts takes overhead and/or cpu (got {args.parts!r}); --reps >= 1; --seconds > 0")

    if "overhead" in parts:
        overhead(args, collect, "the pipeline in this process")
    if "cpu" in parts:
        cpu(args)

    if args.service:
        dispatcher = conveyor.DispatchServer()
        worker = conveyor.WorkerServer(dispatcher_address=dispatcher.target)
        try:
            overhead(args, through_service(dispatcher.target),
                     "read through an in-process dispatcher and worker")
        finally:
            worker.stop()
            dispatcher.stop()


if __name__ == "__main__":
    main()
