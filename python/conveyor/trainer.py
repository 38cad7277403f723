"""The trainer-side pipeline: tf.data ops that run in this process on what the service delivers.

tf.data lets a trainer continue a pipeline after `distribute`:
``ds.apply(distribute(...)).map(augment).batch(32).prefetch(2)``: the ops after it run in the
trainer, on the elements read from the workers. Here `DistributedDataset` (what `distribute`
returns) has those methods; each returns a `TrainerDataset`, which has them too. Iterating one
reads through the service (a new job or iteration each time, as iterating the DistributedDataset
does) and applies the ops on the way. Functions are plain Python callables; elements are what the
service's iterator yields (numpy arrays, `bytes` for string scalars, tuples for several
components), and dicts where a function returns them.

The ops run in C++: the LocalPipeline that C++ trainers use (consumer/local_pipeline.cpp, through
_conveyor._TrainerPipeline, python/src/trainer_pipeline.cpp), so batch, shuffle, prefetch, take...
are the workers' kernels, and this module only checks arguments and keeps the state_dict().
Python functions of map and filter are called back with the GIL (a parallel map's calls and a
prefetch's reads on the process's executor threads; a fill takes it once for its calls, and the
thread in next() keeps it until the pipeline waits: python/src/gil_lease.hpp); their exceptions
come out of next() as raised, in order. Ctrl-C interrupts a next() that waits (for the service or
for another thread's fill) within 100 ms; the iterator is closed then, as a generator after it
raised.

A TrainerIterator's state_dict() is the read cursor plus the LocalPipeline checkpoint: what the
ops hold between elements (a shuffle buffer and its generator, a partial unbatch, prefetched
elements, finished map calls, take/skip counts), so a trainer that loads it continues with exactly
the elements it had not been given, none twice.
"""

import random
import weakref

import numpy as np

from . import _conveyor

# The key of the read cursor in a state_dict() (torchdata's Stateful protocol); the service's
# iterators and DistributedDataset use it too (service.py imports it from here).
_STATE_KEY = "conveyor_read_cursor"

AUTOTUNE = _conveyor.AUTOTUNE


def _check_count(name, value, minimum, *, allow_autotune=False, op):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{op}: `{name}` must be an int, but {name} was of type "
                        f"{type(value).__name__}: {value!r}")
    value = int(value)
    if allow_autotune and value == AUTOTUNE:
        return value
    if value < minimum:
        raise ValueError(f"{op}: `{name}` must be >= {minimum}"
                         f"{' or AUTOTUNE' if allow_autotune else ''}, got {value}")
    return value


def _check_callable(name, fn, op):
    if not callable(fn):
        raise TypeError(f"{op}: `{name}` must be a callable (a Python function run in this "
                        f"process), got {type(fn).__name__}: {fn!r}")


def _check_bool(name, value, op):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}: `{name}` must be a bool, but {name} was of type "
                        f"{type(value).__name__}: {value!r}")


def _name(fn):
    return getattr(fn, "__qualname__", None) or type(fn).__name__


class _ShuffleSeeds:
    """The seed of each iteration's shuffle: the same every time (reshuffle_each_iteration=False),
    else one per iteration drawn from the base seed (iteration k of a seeded pipeline is
    reproducible). Without a seed the base is drawn once, here."""

    def __init__(self, seed, reshuffle_each_iteration):
        self._base = seed if seed is not None else random.SystemRandom().getrandbits(63)
        self._reshuffle = reshuffle_each_iteration
        self._iteration = 0

    def next(self):
        n = self._iteration
        self._iteration += 1
        if not self._reshuffle:
            return self._base
        return random.Random(f"{self._base}/{n}").getrandbits(63)


# ---------------------------------------------------------------- iterators

# The trainer-side part of a state_dict(), beside the service's read cursor. Version 2: the
# LocalPipeline checkpoint (version 1 held the former Python ops' states).
_TRAINER_KEY = "conveyor_trainer_ops"
_TRAINER_STATE_VERSION = 2


class TrainerIterator(_conveyor._TrainerPipeline):
    """Iterates a TrainerDataset: the C++ pipeline over a service stream. close() (or dropping
    it, or leaving a `with` block, or its end) stops the pipeline and leaves the job."""

    def __init__(self, stream, ops, names, seeds):
        super().__init__(stream, ops)
        self._source = stream  # the service stream (stats(), job_id)
        self._names = names
        self._seeds = seeds

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def job_id(self):
        return self._source.job_id

    def stats(self):
        """The service stream's stats (see the DistributedDataset iterator's stats())."""
        return self._source.stats()

    def state_dict(self) -> dict:
        """torchdata's Stateful protocol: the read cursor and what the ops hold, taken between
        two next() calls; a TrainerDataset that load_state_dict()s it continues after the last
        element this iterator returned. Needs a resumable read (DYNAMIC, private job):
        otherwise the cursor's error."""
        blob, cursor, structures = self._checkpoint()
        return {_STATE_KEY: cursor,
                _TRAINER_KEY: {"version": _TRAINER_STATE_VERSION, "ops": list(self._names),
                               "seeds": list(self._seeds), "structures": structures,
                               "checkpoint": blob}}


# next(it) and `for` go straight to the C++ next(), not through __next__'s lookup and dispatch.
_conveyor._fast_iternext(TrainerIterator)


def _check_trainer_state(state, names):
    part = state.get(_TRAINER_KEY) if isinstance(state, dict) else None
    if not isinstance(part, dict) or part.get("version") != _TRAINER_STATE_VERSION:
        raise ValueError(f"`state` must be a state_dict() of a TrainerIterator (a dict with "
                         f"\"{_TRAINER_KEY}\" of version {_TRAINER_STATE_VERSION}), got {state!r:.80}")
    if part.get("ops") != names:
        raise ValueError(f"`state` was saved by a pipeline of other ops ({part.get('ops')}); this one "
                         f"runs {names}")
    return part


# ---------------------------------------------------------------- datasets


class TrainerOps:
    """tf.data's transformations, run in this process (a mix-in of DistributedDataset and
    TrainerDataset)."""

    def map(self, map_func, num_parallel_calls=None, deterministic=None):
        """map_func(element) (or map_func(*element) for a tuple) on each element, in this process.
        num_parallel_calls: None = one call at a time; n or AUTOTUNE (the CPU count) = that many
        calls in flight on the executor's threads (useful when the function releases the GIL, as
        numpy and most I/O do); deterministic=False then yields results as they finish. Every
        result must nest the same way (one structure per pipeline, as tf.data's element_spec)."""
        _check_callable("map_func", map_func, "map")
        if num_parallel_calls is not None:
            num_parallel_calls = _check_count("num_parallel_calls", num_parallel_calls, 1,
                                              allow_autotune=True, op="map")
        if deterministic is not None and not isinstance(deterministic, bool):
            raise TypeError(f"map: `deterministic` must be a bool or None, got {deterministic!r}")
        op = ("map", map_func, _name(map_func), num_parallel_calls or 1, deterministic is not False)
        if num_parallel_calls is None:
            return TrainerDataset(self, op, f"map({_name(map_func)})")
        return TrainerDataset(self, op,
                              f"map({_name(map_func)}, num_parallel_calls={num_parallel_calls})")

    def filter(self, predicate):
        """Keeps the elements for which predicate(element) is True (a bool or 0-d bool array)."""
        _check_callable("predicate", predicate, "filter")
        return TrainerDataset(self, ("filter", predicate, _name(predicate)),
                              f"filter({_name(predicate)})")

    def batch(self, batch_size, drop_remainder=False):
        """Stacks batch_size consecutive elements per component (string scalars into an object
        array of bytes). Every element of a batch must have the same shapes."""
        batch_size = _check_count("batch_size", batch_size, 1, op="batch")
        _check_bool("drop_remainder", drop_remainder, "batch")
        return TrainerDataset(self, ("batch", batch_size, bool(drop_remainder)),
                              f"batch({batch_size}, drop_remainder={drop_remainder})")

    def unbatch(self):
        """Splits each element along its first dimension (every component's must agree)."""
        return TrainerDataset(self, ("unbatch",), "unbatch()")

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True):
        """tf.data's shuffle over a buffer of buffer_size elements. With a seed the order is
        reproducible; reshuffle_each_iteration=True gives each iteration (each iter()) another
        order, False the same order every time (without a seed: one drawn now)."""
        buffer_size = _check_count("buffer_size", buffer_size, 1, op="shuffle")
        if seed is not None:
            seed = _check_count("seed", seed, 0, op="shuffle")
        _check_bool("reshuffle_each_iteration", reshuffle_each_iteration, "shuffle")
        seeds = _ShuffleSeeds(seed, bool(reshuffle_each_iteration))
        return TrainerDataset(self, ("shuffle", buffer_size, seeds), f"shuffle({buffer_size}, seed={seed})")

    def prefetch(self, buffer_size=AUTOTUNE):
        """Reads up to buffer_size elements ahead on the process's executor threads (AUTOTUNE: the
        prefetch kernel's fixed 8; 0: none)."""
        buffer_size = _check_count("buffer_size", buffer_size, 0, allow_autotune=True, op="prefetch")
        if buffer_size == 0:
            return TrainerDataset(self, None, "prefetch(0)")
        return TrainerDataset(self, ("prefetch", buffer_size), f"prefetch({buffer_size})")

    def take(self, count):
        """The first count elements (-1: all). The job is left once the iterator ends."""
        count = _check_count("count", count, -1, op="take")
        return TrainerDataset(self, ("take", count), f"take({count})")

    def skip(self, count):
        """All but the first count elements (-1: none)."""
        count = _check_count("count", count, -1, op="skip")
        return TrainerDataset(self, ("skip", count), f"skip({count})")

    def apply(self, transformation_func):
        """transformation_func(self), as tf.data's apply."""
        _check_callable("transformation_func", transformation_func, "apply")
        return transformation_func(self)


class TrainerDataset(TrainerOps):
    """Ops run in this process after a read through the service (see the module docstring).
    Iterating it reads the service again (as iterating its DistributedDataset does) and returns a
    TrainerIterator."""

    def __init__(self, input_dataset, op, description):
        self._input = input_dataset
        # A _TrainerPipeline op tuple (a shuffle's holds its _ShuffleSeeds); None adds no op.
        self._op = op
        self._description = description
        self._resume = None  # a state_dict() for the next iter()
        self._last = None  # weakref to the latest TrainerIterator

    def _chain(self):
        """The TrainerDatasets from the one next to the DistributedDataset up to this one."""
        chain = []
        d = self
        while isinstance(d, TrainerDataset):
            chain.append(d)
            d = d._input
        return list(reversed(chain))

    def _op_names(self):
        return [d._description for d in self._chain() if d._op is not None]

    def __iter__(self):
        resume, self._resume = self._resume, None
        chain = [d for d in self._chain() if d._op is not None]
        names = [d._description for d in chain]
        if resume is not None:
            part = _check_trainer_state(resume, names)
            seeds = list(part["seeds"])
            self.distributed_dataset.load_state_dict({_STATE_KEY: resume[_STATE_KEY]})
        else:
            seeds = [d._op[2].next() for d in chain if d._op[0] == "shuffle"]
        ops = []
        shuffle_seeds = iter(seeds)
        for d in chain:
            ops.append(("shuffle", d._op[1], next(shuffle_seeds)) if d._op[0] == "shuffle" else d._op)
        stream = iter(self.distributed_dataset)  # a DistributedDataset: joins or creates a job
        try:
            it = TrainerIterator(stream, ops, names, seeds)
            if resume is not None:
                it._restore(part["checkpoint"], part["structures"])
        except BaseException:
            stream.close()
            raise
        self._last = weakref.ref(it)
        return it

    # torchdata's Stateful protocol, as DistributedDataset's: the latest iterator's state.
    def state_dict(self) -> dict:
        """The state_dict() of the latest iterator (or the state loaded and not used yet)."""
        it = self._last() if self._last is not None else None
        if it is not None:
            return it.state_dict()
        if self._resume is not None:
            return self._resume
        raise ValueError("state_dict(): no iterator of this pipeline was made yet")

    def load_state_dict(self, state: dict) -> None:
        """The next iter() continues from `state` (a TrainerIterator's state_dict()): the read
        resumes from its cursor and the ops get back what they held."""
        if not isinstance(state, dict) or _STATE_KEY not in state:
            raise ValueError(f"`state` must be a state_dict() of a TrainerIterator (a dict with "
                             f"\"{_STATE_KEY}\" and \"{_TRAINER_KEY}\"), got {state!r:.80}")
        _check_trainer_state(state, self._op_names())
        self._resume = state
        self._last = None

    @property
    def distributed_dataset(self):
        """The DistributedDataset this pipeline reads from."""
        d = self
        while isinstance(d, TrainerDataset):
            d = d._input
        return d

    def __repr__(self):
        return f"{self.distributed_dataset!r}." + ".".join(d._description for d in self._chain())
