"""Nested elements for the Python functions that run on the workers.

The workers hand a Python function an element's flat components and take flat components back;
`NestedFunction` re-nests them with the dataset's structure before the call (tf.data's
convention: a tuple element is passed as positional arguments, anything else as one argument)
and flattens the result after it, checking it against the structure traced in the client. This
module imports nothing from conveyor, and travels inside the pickled function (cloudpickle by
value), so a worker needs no conveyor package to run it.

A structure is described as: None for a tensor, ("tuple", (s, ...)) and
("dict", ((key, s), ...)) with the keys sorted, as tf.nest flattens a dict.
"""


def structure_of(x):
    if isinstance(x, tuple):
        return ("tuple", tuple(structure_of(v) for v in x))
    if isinstance(x, dict):
        for k in x:
            if not isinstance(k, str):
                raise ValueError(f"dict keys must be strings, got {k!r} of type {type(k).__name__}")
        return ("dict", tuple((k, structure_of(x[k])) for k in sorted(x)))
    return None


def flatten(x, out):
    if isinstance(x, tuple):
        for v in x:
            flatten(v, out)
    elif isinstance(x, dict):
        for k in sorted(x):
            flatten(x[k], out)
    else:
        out.append(x)
    return out


def pack(structure, leaves):
    it = iter(leaves)

    def build(s):
        if s is None:
            return next(it)
        kind, parts = s
        if kind == "tuple":
            return tuple(build(p) for p in parts)
        return {k: build(p) for k, p in parts}

    return build(structure)


def describe(s):
    """The Structure text form of a description: {"a": _, "b": (_, _)}."""
    if s is None:
        return "_"
    kind, parts = s
    if kind == "tuple":
        return "(" + ", ".join(describe(p) for p in parts) + ("," if len(parts) == 1 else "") + ")"
    return "{" + ", ".join(f'"{k}": {describe(p)}' for k, p in parts) + "}"


def is_flat(s):
    return s is None or (s[0] == "tuple" and all(p is None for p in s[1]))


class NestedFunction:
    """fn called with nested elements. `in_structure`: how the input's flat components nest
    (None for flat); `out_structure`: what a map's result must be (the traced structure), or
    None when it could not be traced: then the result must be flat (a tensor or a tuple of
    tensors), never silently flattened."""

    def __init__(self, fn, name, in_structure=None, out_structure=None, op="map", trace_error=None):
        self.fn = fn
        self.name = name
        self.in_structure = in_structure
        self.out_structure = out_structure
        self.op = op
        self.trace_error = trace_error

    def __call__(self, *flat):
        element = pack(self.in_structure, flat) if self.in_structure is not None else (
            flat[0] if len(flat) == 1 else tuple(flat))
        result = self.fn(*element) if isinstance(element, tuple) else self.fn(element)
        if self.op != "map":
            return result
        got = structure_of(result)
        if self.out_structure is not None:
            if got != self.out_structure:
                raise ValueError(f"{self.name} returned {describe(got)}, but its output structure "
                                 f"(traced in the client) is {describe(self.out_structure)}")
        elif not is_flat(got):
            why = f" ({self.trace_error})" if self.trace_error else ""
            raise ValueError(f"{self.name} returned the nested structure {describe(got)}, but its "
                             f"output structure could not be traced in the client{why}; only a "
                             f"tensor or a flat tuple can be returned then")
        if is_flat(got):
            return result
        return tuple(flatten(result, []))
