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
from . import _nest

_REGISTERED = {"map": "python", "filter": "python_filter", "flat_map": "python_flat_map"}


def _describe(fn):
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if qualname is None:
        qualname = type(fn).__qualname__ + " instance"
    return f"{module}.{qualname}" if module else qualname


def _trace(fn, sample, name):
    """fn's result on `sample` (zeros shaped like the input's elements), as tf.data traces a
    function once in the client: (its structure, its spec text for the graph, None) or
    (None, None, why not)."""
    try:
        result = fn(*sample) if isinstance(sample, tuple) else fn(sample)
        structure = _nest.structure_of(result)
        return structure, _conveyor._spec_of_result(result, name), None
    except Exception as e:  # noqa: BLE001 - any failure leaves the output structure untraced
        return None, None, f"{type(e).__name__}: {e}"


def python_function(fn, op, processes=0, sample=None):
    """A Function naming the Python code `fn` for the dataset op `op` ("map", ...). `processes`
    (map's num_parallel_calls above 1, or AUTOTUNE) runs it in a pool of interpreter processes on
    the worker: one interpreter runs one call at a time. `sample` (an element of zeros shaped as
    the input's, None when its spec is unknown) gives the input's structure, and for a map is
    traced once to learn the output's structure (a callable only: a "module:function" string
    receives and returns flat components)."""
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
    in_structure = _nest.structure_of(sample) if sample is not None else None
    if _nest.is_flat(in_structure):
        in_structure = None
    out_structure, spec, trace_error = (None, None, "the input's element_spec is unknown")
    if op == "map" and sample is not None:
        out_structure, spec, trace_error = _trace(fn, sample, name)
    if spec:
        extra["spec"] = spec
    wrapped = _nest.NestedFunction(fn, f"Python function `{name}`", in_structure, out_structure,
                                   op, trace_error)
    # _nest travels by value: a worker runs it without the conveyor package.
    cloudpickle.register_pickle_by_value(_nest)
    try:
        payload = cloudpickle.dumps(wrapped)
    except Exception as e:  # noqa: BLE001 - any pickling failure, named
        raise TypeError(f"`{op}`: cannot pickle the function {name}: {type(e).__name__}: {e}") from e
    return _conveyor.Function(registered, pickle=base64.b64encode(payload).decode("ascii"), qualname=name,
                              **extra)
