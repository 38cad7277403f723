"""bfloat16 in numpy, which has no bfloat16 dtype.

conveyor carries bfloat16 tensors as their 16-bit patterns. In numpy they are uint16 arrays whose
dtype is ``bfloat16_dtype``: ``np.dtype(np.uint16)`` with the metadata
``{"conveyor_dtype": "bfloat16"}``. Arrays of that dtype go into datasets as bfloat16 tensors, and
bfloat16 tensors come out of iterators as such arrays (views of the received buffers, no copy).
Arithmetic on them is uint16 arithmetic on the bits: convert with ``bfloat16_to_float32`` first.
``conveyor.torch.to_torch`` turns them into ``torch.bfloat16`` tensors without a copy. Where the
ml_dtypes package is installed its ``ml_dtypes.bfloat16`` arrays are accepted as bfloat16 too.

    bits = conveyor.bfloat16(np.array([1.0, -2.5], np.float32))   # rounded to nearest even
    ds = conveyor.Dataset.from_tensor_slices(bits)                # a bfloat16 dataset
    conveyor.bfloat16_to_float32(next(iter(ds)))                  # back to float32 values

numpy's metadata survives views and slices but not every operation (``a + 1`` is plain
uint16): mark a result again with ``conveyor.bfloat16(a, bits=True)``.
"""

import numpy as np

bfloat16_dtype = np.dtype(np.uint16, metadata={"conveyor_dtype": "bfloat16"})


def is_bfloat16(array):
    """Whether `array` is a bfloat16 array (conveyor's marked uint16, or ml_dtypes.bfloat16)."""
    dt = getattr(array, "dtype", None)
    if dt is None:
        return False
    if dt.itemsize == 2 and dt.kind in "ui" and (dt.metadata or {}).get("conveyor_dtype") == "bfloat16":
        return True
    return dt.kind == "V" and dt.itemsize == 2 and dt.name == "bfloat16"


def bfloat16(values, bits=False):
    """A bfloat16 array (dtype ``bfloat16_dtype``).

    From floats (any float or int array, or a list) the values are rounded to nearest even, as
    torch and TensorFlow round; NaN stays NaN. With ``bits=True``, `values` are the 16-bit patterns
    themselves (a uint16 or int16 array): the result is a view of them, no copy."""
    a = np.asarray(values)
    if bits or is_bfloat16(a):
        if a.dtype.itemsize != 2:
            raise ValueError(f"bfloat16(bits=True) needs 16-bit patterns (uint16 or int16), got {a.dtype}")
        return a.view(bfloat16_dtype)
    if a.dtype.kind not in "biuf":
        raise ValueError(f"bfloat16: cannot convert an array of dtype {a.dtype} (expected numbers)")
    x = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = ((x + np.uint32(0x7FFF) + ((x >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))
    out = rounded.astype(np.uint16)
    nan = np.isnan(a.astype(np.float32))
    if nan.any():  # truncate NaNs instead of rounding, keeping them NaN (rounding may carry to inf)
        out[nan] = ((x[nan] >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16)
    return out.view(bfloat16_dtype)


def bfloat16_to_float32(array):
    """The float32 values of a bfloat16 array (exact: a bfloat16 is the upper half of a float32)."""
    a = np.asarray(array)
    if not is_bfloat16(a):
        raise ValueError(f"bfloat16_to_float32: expected a bfloat16 array, got dtype {a.dtype}")
    return (a.view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)
