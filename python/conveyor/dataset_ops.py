"""Dataset methods whose arguments take tf.data's Python forms (padded_batch, parse_example) and
tf.io's feature specs; the extension (python/src/dataset_ops.cpp) builds the nodes. Installed on
conveyor.Dataset when the package is imported.

    ds.padded_batch(4, padded_shapes=([None], []), padding_values=(-1, 0))
    ds.parse_example({"label": conveyor.FixedLenFeature([], "int64"),
                      "tags": conveyor.VarLenFeature("string")})
"""

import collections
import numbers

import numpy as np

from . import _conveyor

Dataset = _conveyor.Dataset


class FixedLenFeature(collections.namedtuple("FixedLenFeature", ["shape", "dtype", "default_value"])):
    """tf.io.FixedLenFeature: a tensor of `shape` (`[]`: a scalar); without a default the feature
    is required, with one a missing feature takes it (a scalar, repeated, or product(shape) values).
    dtype: "int64", "float32" or "string" (numpy's int64 / float32 / bytes work too)."""

    __slots__ = ()

    def __new__(cls, shape, dtype, default_value=None):
        return super().__new__(cls, shape, dtype, default_value)


class VarLenFeature(collections.namedtuple("VarLenFeature", ["dtype"])):
    """tf.io.VarLenFeature: the record's values as a rank-1 tensor of varying length (the values of
    tf.data's SparseTensor for one example; padded_batch pads a batch of them)."""

    __slots__ = ()


def _feature_dtype(dtype, name):
    if isinstance(dtype, str):
        return {"float": "float32", "bytes": "string", "str": "string"}.get(dtype, dtype)
    if dtype in (bytes, str, object, np.bytes_, np.str_, np.object_):
        return "string"
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"parse_example: feature {name!r}: `dtype` must be a dtype name or a numpy "
                        f"dtype, got {type(dtype).__name__}: {dtype!r}") from None
    if d == np.int64:
        return "int64"
    if d == np.float32:
        return "float32"
    raise ValueError(f"parse_example: feature {name!r}: `dtype` must be int64, float32 or string "
                     f"(tf.train.Example's Int64List, FloatList, BytesList), got {d}")


def _feature_shape(shape, name):
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = [shape]
    if not isinstance(shape, (list, tuple)):
        raise TypeError(f"parse_example: feature {name!r}: `shape` must be a list of ints ([] for a "
                        f"scalar), got {type(shape).__name__}: {shape!r}")
    out = []
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, numbers.Integral):
            raise TypeError(f"parse_example: feature {name!r}: `shape` entries must be ints, got "
                            f"{d!r} in {shape!r}")
        if d < 0:
            raise ValueError(f"parse_example: feature {name!r}: `shape` entries must be >= 0 (a "
                             f"fixed-length feature has a known shape), got {list(shape)}")
        out.append(int(d))
    return out


def _parse_example(self, features):
    """tf.train.Example records (scalar strings) to one component per feature: `features` maps
    names to FixedLenFeature / VarLenFeature (the components come in sorted name order, as tf.nest
    flattens a dict), or is the text form "label: int64; tags: var(string)" (in its order)."""
    if isinstance(features, str):
        return self._parse_example_text(features)
    if not isinstance(features, dict):
        raise TypeError("parse_example: `features` must be a dict of FixedLenFeature / VarLenFeature "
                        f"or the text form (a str), got {type(features).__name__}")
    if not features:
        raise ValueError("parse_example: `features` must name at least one feature")
    args = []
    for name in sorted(features, key=lambda k: (not isinstance(k, str), str(k))):
        if not isinstance(name, str):
            raise TypeError(f"parse_example: `features` keys must be str, got {name!r}")
        f = features[name]
        if isinstance(f, VarLenFeature):
            args.append((name, _feature_dtype(f.dtype, name), True, [], None))
        elif isinstance(f, FixedLenFeature):
            args.append((name, _feature_dtype(f.dtype, name), False, _feature_shape(f.shape, name),
                         f.default_value))
        else:
            raise TypeError(f"parse_example: feature {name!r} must be a conveyor.FixedLenFeature or "
                            f"conveyor.VarLenFeature, got {type(f).__name__}")
    return self._parse_example(args)


def parse_example_dataset(features):
    """tf.data.experimental.parse_example_dataset: ``ds.apply(parse_example_dataset(features))``."""
    return lambda dataset: dataset.parse_example(features)


def _is_shape_entry(d):
    return d is None or (isinstance(d, numbers.Integral) and not isinstance(d, bool))


def _one_shape(shape, component):
    if hasattr(shape, "as_list"):  # a TensorShape-like object
        shape = shape.as_list()
    where = "" if component is None else f" (component {component})"
    if not isinstance(shape, (list, tuple)) or not all(_is_shape_entry(d) for d in shape):
        raise TypeError(f"padded_batch: `padded_shapes`{where} must be a list of ints or None "
                        f"(None or -1: pad to the longest in the batch), got {shape!r}")
    return [-1 if d is None else int(d) for d in shape]


def _padded_shapes(padded_shapes):
    # Nested like the element (tf.data's form): a dict of shapes for a dict element (flattened in
    # sorted key order, as the components are), a tuple of shapes for a tuple; a shape is a list
    # of dims. A single shape is the one component's.
    if padded_shapes is None:
        return None
    out = []

    def walk(x, path):
        if isinstance(x, dict):
            for k in sorted(x):
                walk(x[k], f"{path}[{k!r}]")
        elif isinstance(x, (list, tuple)) and x and all(
                isinstance(v, (list, tuple, dict)) or hasattr(v, "as_list") for v in x):
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]")
        else:
            out.append(_one_shape(x, path or None))  # raises when it is not a shape

    walk(padded_shapes, "")
    return out


def _padding_values(padding_values):
    # The same nesting as padded_shapes; a leaf is a value, or None for the dtype's zero.
    if padding_values is None:
        return None
    out = []

    def walk(x):
        if isinstance(x, dict):
            for k in sorted(x):
                walk(x[k])
        elif isinstance(x, tuple):
            for v in x:
                walk(v)
        else:
            out.append(x)

    walk(padding_values)
    return out


def _padded_batch(self, batch_size, padded_shapes=None, padding_values=None, drop_remainder=False):
    """tf.data's padded_batch: padded_shapes per component (None / -1: the batch's longest; unset:
    every dimension), padding_values per component (unset or None: 0, False or b""); both nest
    like the element (a dict for a dict element, tuples for tuples)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral):
        raise TypeError(f"padded_batch: `batch_size` must be an int, got "
                        f"{type(batch_size).__name__}: {batch_size!r}")
    if not isinstance(drop_remainder, (bool, np.bool_)):
        raise TypeError(f"padded_batch: `drop_remainder` must be a bool, got "
                        f"{type(drop_remainder).__name__}: {drop_remainder!r}")
    return self._padded_batch(int(batch_size), _padded_shapes(padded_shapes),
                              _padding_values(padding_values), bool(drop_remainder))


Dataset.padded_batch = _padded_batch
Dataset.parse_example = _parse_example
