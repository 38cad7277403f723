"""Image ops that run on the workers, in C++: each returns a `conveyor.Function` for `Dataset.map`.

    ds = (conveyor.Dataset.from_tensor_slices(jpeg_bytes)
          .map(conveyor.image.decode(channels=3))
          .map(conveyor.image.random_resized_crop(224, seed=1))
          .map(conveyor.image.random_flip_left_right(seed=2))
          .map(conveyor.image.normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
                                        scale=1 / 255))
          .batch(64))

Every op acts on the element's only component, or on `index=N` of a tuple (image, label).
Random ops draw from a stream seeded by `seed` and a hash of the element's bytes, so an element
gets the same crop and flip on any worker (docs/USER_GUIDE.md "Image ops").
"""

from . import _conveyor

__all__ = ["decode", "resize", "center_crop", "random_crop", "random_resized_crop",
           "random_flip_left_right", "normalize", "to_chw"]


def _target(params, key, index):
    if key is not None:
        params["key"] = key
    if index is not None:
        params["index"] = index
    return params


def _floats(name, value):
    """mean/std: a number or a sequence of numbers, sent as the text form's "a,b,c"."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(float(value))
    if isinstance(value, (str, bytes)):  # iterating it would give characters
        raise TypeError(f"`{name}` must be a number or a sequence of numbers, got "
                        f"{type(value).__name__} {value!r}")
    try:
        values = [float(v) for v in value]
    except (TypeError, ValueError):
        raise TypeError(f"`{name}` must be a number or a sequence of numbers, got "
                        f"{type(value).__name__}") from None
    if not values:
        raise ValueError(f"`{name}` must not be empty")
    return ",".join(repr(v) for v in values)


def decode(channels=0, key=None, index=None):
    """JPEG/PNG/WebP bytes -> uint8 [height, width, channels], as tf.io.decode_image."""
    return _conveyor.Function("decode_image", **_target({"channels": channels}, key, index))


def _antialias(method, antialias):
    # None = what the method does; a value contradicting it is refused by the op.
    return method != "nearest" if antialias is None else antialias


def resize(height, width, method="bilinear", antialias=None, dtype="float32", key=None,
           index=None):
    """tf.image.resize (half-pixel centers): float32 out, or uint8 with dtype="uint8"."""
    return _conveyor.Function("resize", **_target(
        {"height": height, "width": width, "method": method,
         "antialias": _antialias(method, antialias),
         "dtype": dtype}, key, index))


def center_crop(height, width, key=None, index=None):
    return _conveyor.Function("center_crop",
                              **_target({"height": height, "width": width}, key, index))


def random_crop(height, width, seed=0, key=None, index=None):
    return _conveyor.Function("random_crop", **_target(
        {"height": height, "width": width, "seed": seed}, key, index))


def random_resized_crop(size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), seed=0,
                        method="bilinear", antialias=None, dtype="float32", key=None, index=None):
    """torchvision's RandomResizedCrop to [size, size] (size: an int)."""
    return _conveyor.Function("random_resized_crop", **_target(
        {"size": size, "scale_min": float(scale[0]), "scale_max": float(scale[1]),
         "ratio_min": float(ratio[0]), "ratio_max": float(ratio[1]), "seed": seed,
         "method": method, "antialias": _antialias(method, antialias), "dtype": dtype},
        key, index))


def random_flip_left_right(seed=0, key=None, index=None):
    return _conveyor.Function("random_flip_left_right", **_target({"seed": seed}, key, index))


def normalize(mean=0.0, std=1.0, scale=1.0, dtype="float32", key=None, index=None):
    """(x * scale - mean) / std per channel; float32 or float16 out."""
    return _conveyor.Function("normalize", **_target(
        {"mean": _floats("mean", mean), "std": _floats("std", std), "scale": float(scale),
         "dtype": dtype}, key, index))


def to_chw(key=None, index=None):
    """[height, width, channels] -> [channels, height, width] (PyTorch's layout)."""
    return _conveyor.Function("to_chw", **_target({}, key, index))
