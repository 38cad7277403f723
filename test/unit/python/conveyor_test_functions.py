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
