"""Snapshots: a dataset's output saved once as chunk files and loaded many times with
``conveyor.Dataset.load(path, wait=False)`` (as tf.data's ``Dataset.save`` / ``distributed_save``
and ``Dataset.load``). The layout is documented in docs/USER_GUIDE.md ("Snapshots")."""

import numbers

from . import _conveyor
from .service import _service_address

Dataset = _conveyor.Dataset


def _options(dataset, path, compression, chunk_bytes, stall_timeout_ms=0):
    if not isinstance(dataset, Dataset):
        raise TypeError(f"`dataset` must be a conveyor.Dataset, got {type(dataset).__name__}")
    if not isinstance(path, str) or not path:
        raise ValueError(f"`path` must be a non-empty directory name, got {path!r}")
    if compression is None:
        compression = "none"
    if compression not in ("lz4", "none"):
        raise ValueError(f"`compression` must be \"lz4\", \"none\" or None, got {compression!r}")
    if isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, numbers.Integral) or chunk_bytes < 1:
        raise ValueError(f"`chunk_bytes` must be a positive int, got {chunk_bytes!r}")
    if (isinstance(stall_timeout_ms, bool) or not isinstance(stall_timeout_ms, numbers.Integral)
            or stall_timeout_ms < 0):
        raise ValueError(f"`stall_timeout_ms` must be an int >= 0 (0: wait as long as it takes), "
                         f"got {stall_timeout_ms!r}")
    return _conveyor._SaveOptions(compression, int(chunk_bytes), int(stall_timeout_ms))


def save(dataset, path, compression="lz4", *, chunk_bytes=32 << 20) -> dict:
    """Runs ``dataset`` in this process and writes its output as a snapshot directory ``path``
    (which must not hold one yet). Returns ``{"chunks", "elements", "bytes"}``. On failure the
    snapshot is marked failed with the cause (loading it raises that cause) and the error is raised."""
    return _conveyor._save(dataset, path, _options(dataset, path, compression, chunk_bytes))


def distributed_save(dataset, path, service, compression="lz4", *, chunk_bytes=32 << 20,
                     connect_timeout_ms=5000, stall_timeout_ms=0) -> dict:
    """The same written by the service's workers (tf.data's ``distributed_save``): the dispatcher
    journals the snapshot and its workers write its streams from DYNAMIC splits, surviving the
    loss of a worker and a dispatcher restart with its work dir; this process only waits for the
    end (the dispatcher and the workers need ``path`` in their ``allowed_paths``). ``bytes`` is
    the chunk files' size. ``stall_timeout_ms`` > 0 fails the save (and marks the snapshot
    failed) when no element was committed for that long, e.g. without workers; 0 waits as long
    as it takes, logging a warning every 30 s."""
    options = _options(dataset, path, compression, chunk_bytes, stall_timeout_ms)
    return _conveyor._distributed_save(_service_address(service), dataset, path, options,
                                       connect_timeout_ms)
