"""Functions the embedded-interpreter tests (embedded_python_test.cpp) import by name."""

import time


def same(x):
    return x


def swap(a, b):
    return b, a


def slow(x):
    time.sleep(0.5)  # long enough for the test to see the next request queued behind this one
    return x


def plus_one(x):
    return x + 1  # a new array: through the pool, a result block when 64 KiB or more


def slow_plus_one(x):
    time.sleep(0.5)
    return x + 1


kept = []  # results plus_one_kept keeps (a function with state the pool must not corrupt)


def plus_one_kept(x):
    y = x + 1  # made in the result block: the pool process must not let the worker view it there
    if kept:
        kept[-1][:] = 255  # changes the result it returned last time
    kept.append(y)
    return y


def plus_one_keeps_view(x):
    y = x + 1
    if kept:
        kept[-1][:] = 255
    kept.append(y[:16])  # a view of the result's start keeps the result's memory
    return y


def plus_one_kept_then_raise(x):
    kept.append(x + 1)
    raise ValueError("kept an array, then failed")


def release_kept(x):
    kept.clear()
    return x + 1


def plus_one_second_half(x):
    y = x + 1
    return y[len(y) // 2:]  # a view inside the array made in the block, not at its start


def add(a, b):
    return a + b
