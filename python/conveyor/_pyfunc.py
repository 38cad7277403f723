"""Python functions for Dataset.map / filter / flat_map, run on the workers.

A callable travels inside the dataset graph: cloudpickle (lambdas, closures, local functions)
serializes it, and the bytes ride base64-encoded as the `pickle` parameter of the registered
functions `python` (map), `python_filter` (filter) and `python_flat_map` (flat_map). A string
"package.module:function" travels as `import` and is imported on each worker. The workers run
them in their embedded interpreter (pipeline/functions/python/); the interpreter must be the same
Python version as this one (pickled functions carry bytecode).
"""

import base64

from . import _conveyor

_REGISTERED = {"map": "python", "filter": "python_filter", "flat_map": "python_flat_map"}


def _describe(fn):
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if qualname is None:
        qualname = type(fn).__qualname__ + " instance"
    return f"{module}.{qualname}" if module else qualname


def python_function(fn, op, processes=0):
    """A Function naming the Python code `fn` for the dataset op `op` ("map", ...). `processes`
    (map's num_parallel_calls above 1, or AUTOTUNE) runs it in a pool of interpreter processes on
    the worker: one interpreter runs one call at a time."""
    registered = _REGISTERED[op]
    extra = {"processes": processes} if processes else {}
    if isinstance(fn, str):
        module, _, attr = fn.partition(":")
        if not module or not attr or " " in fn:
            raise ValueError(f"`{op}`: a Python function string must be \"package.module:function\", "
                             f"got {fn!r}")
        return _conveyor.Function(registered, **{"import": fn, "qualname": fn}, **extra)
    if not callable(fn):
        raise TypeError(f"`{op}` takes a registered function name, a Function, a Python callable or "
                        f"\"package.module:function\"; got {type(fn).__name__}")
    try:
        import cloudpickle
    except ImportError as e:
        raise ImportError("Python functions in datasets need cloudpickle "
                          "(Debian: apt-get install python3-cloudpickle)") from e
    name = _describe(fn)
    try:
        payload = cloudpickle.dumps(fn)
    except Exception as e:  # noqa: BLE001 - any pickling failure, named
        raise TypeError(f"`{op}`: cannot pickle the function {name}: {type(e).__name__}: {e}") from e
    return _conveyor.Function(registered, pickle=base64.b64encode(payload).decode("ascii"), qualname=name,
                              **extra)
