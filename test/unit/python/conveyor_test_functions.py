"""Functions the embedded-interpreter tests (embedded_python_test.cpp) import by name."""

import time


def same(x):
    return x


def swap(a, b):
    return b, a


def slow(x):
    time.sleep(0.5)  # long enough for the test to see the next request queued behind this one
    return x
