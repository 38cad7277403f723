"""Functions the embedded-interpreter tests (embedded_python_test.cpp) import by name."""


def same(x):
    return x


def swap(a, b):
    return b, a
