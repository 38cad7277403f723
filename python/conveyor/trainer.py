"""The trainer-side pipeline: tf.data ops that run in this process on what the service delivers.

tf.data lets a trainer continue a pipeline after `distribute`:
``ds.apply(distribute(...)).map(augment).batch(32).prefetch(2)``: the ops after it run in the
trainer, on the elements read from the workers. Here `DistributedDataset` (what `distribute`
returns) has those methods; each returns a `TrainerDataset`, which has them too. Iterating one
reads through the service (a new job or iteration each time, as iterating the DistributedDataset
does) and applies the ops on the way. Functions are plain Python callables; elements are what the
service's iterator yields (numpy arrays, `bytes` for string scalars, tuples for several
components), and dicts where a function returns them.

A TrainerIterator's state_dict() is the read cursor plus what the ops hold between elements (a
shuffle buffer and its generator, a partial unbatch, prefetched elements, map results in flight,
take/skip counts): a trainer that loads it continues with exactly the elements it had not been
given, none twice.
"""

import concurrent.futures
import os
import queue
import random
import threading
import weakref

import numpy as np

from . import _conveyor
from ._nest import flatten as _flatten, pack as _pack, structure_of as _structure

# The key of the read cursor in a state_dict() (torchdata's Stateful protocol); the service's
# iterators and DistributedDataset use it too (service.py imports it from here).
_STATE_KEY = "conveyor_read_cursor"

AUTOTUNE = _conveyor.AUTOTUNE
# prefetch(AUTOTUNE) keeps this many elements ready: a fixed depth (nothing tunes it), enough to
# hide a service round trip behind a training step.
AUTOTUNE_PREFETCH = 8


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


def _call(fn, element):
    # tf.data's convention: a tuple element is passed as positional arguments.
    return fn(*element) if isinstance(element, tuple) else fn(element)


# ---------------------------------------------------------------- nested elements


def _is_string_leaf(v):
    return isinstance(v, (bytes, str))


def _stack(leaves, component, op):
    """One batched array of a component's values (tf.data's batch of that component)."""
    if all(_is_string_leaf(v) for v in leaves):
        out = np.empty(len(leaves), dtype=object)  # as the service gives string tensors
        out[:] = leaves
        return out
    arrays = [np.asarray(v) for v in leaves]
    first = arrays[0].shape
    for i, a in enumerate(arrays):
        if a.shape != first:
            raise ValueError(f"{op}: cannot batch tensors with different shapes in component "
                             f"{component}. First element had shape {list(first)} and element {i} "
                             f"had shape {list(a.shape)}.")
    return np.stack(arrays)


def _batch(elements, op):
    structure = _structure(elements[0])
    flat = []
    for i, e in enumerate(elements):
        if _structure(e) != structure:
            raise ValueError(f"{op}: element {i} of the batch has another structure than element 0 "
                             f"({_describe(e)} vs {_describe(elements[0])})")
        flat.append(_flatten(e, []))
    return _pack(structure, [_stack([f[c] for f in flat], c, op) for c in range(len(flat[0]))])


def _describe(e):
    if isinstance(e, tuple):
        return "(" + ", ".join(_describe(v) for v in e) + ("," if len(e) == 1 else "") + ")"
    if isinstance(e, dict):
        return "{" + ", ".join(f"{k!r}: {_describe(e[k])}" for k in sorted(e)) + "}"
    return type(e).__name__


def _row(leaf, i):
    if leaf.dtype == object and leaf.ndim == 1:
        return leaf[i]  # a string scalar is `bytes`, as the service yields it
    return leaf[i, ...]  # a 0-d array (a view), not a numpy scalar


def _unbatch(element):
    structure = _structure(element)
    leaves = [v if _is_string_leaf(v) else np.asarray(v) for v in _flatten(element, [])]
    if any(_is_string_leaf(v) or v.ndim == 0 for v in leaves):
        raise ValueError("unbatch: input element must have a non-scalar value in each component, "
                         f"got {_describe(element)} with shapes "
                         f"{[list(np.shape(v)) if not _is_string_leaf(v) else [] for v in leaves]}")
    n = leaves[0].shape[0]
    for c, v in enumerate(leaves):
        if v.shape[0] != n:
            raise ValueError(f"unbatch: every component must have the same first dimension; "
                             f"component 0 has {n}, component {c} has {v.shape[0]}")
    for i in range(n):
        yield _pack(structure, [_row(v, i) for v in leaves])


# ---------------------------------------------------------------- iterators


class _Stage:
    """An iterator over an upstream iterator; close() releases this stage and everything above
    it (down to the service stream, which leaves its job)."""

    def __init__(self, upstream):
        self._upstream = upstream

    def __iter__(self):
        return self

    def close(self):
        up, self._upstream = self._upstream, None
        if up is not None and hasattr(up, "close"):
            up.close()

    # What the stage holds between two next() calls (picklable; None: nothing), and its restore.
    def _state(self):
        return None

    def _restore(self, state):
        if state is not None:
            raise ValueError(f"`state`: {type(self).__name__} holds no state, got {state!r:.80}")


class _MapStage(_Stage):
    def __init__(self, upstream, fn):
        super().__init__(upstream)
        self._fn = fn

    def __next__(self):
        return _call(self._fn, next(self._upstream))


class _ParallelMapStage(_Stage):
    """Up to `calls` map calls in flight on a thread pool (useful when the function releases the
    GIL, as numpy and most I/O do). Inputs are read on the caller's thread, so the order of the
    stream's own errors is kept; deterministic=False yields whichever call finishes first."""

    def __init__(self, upstream, fn, calls, deterministic):
        super().__init__(upstream)
        self._fn = fn
        self._calls = calls
        self._deterministic = deterministic
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=calls,
                                                           thread_name_prefix="conveyor-map")
        self._pending = []  # futures, in input order
        self._ready = []  # restored results, yielded first
        self._input_done = False

    def _fill(self):
        while not self._input_done and len(self._pending) < self._calls:
            try:
                element = next(self._upstream)
            except StopIteration:
                self._input_done = True
                break
            self._pending.append(self._pool.submit(_call, self._fn, element))

    def __next__(self):
        if self._ready:
            return _outcome(self._ready.pop(0))
        if self._upstream is None:
            raise StopIteration
        self._fill()
        if not self._pending:
            raise StopIteration
        if self._deterministic:
            future = self._pending.pop(0)
        else:
            done, _ = concurrent.futures.wait(self._pending,
                                              return_when=concurrent.futures.FIRST_COMPLETED)
            future = next(f for f in self._pending if f in done)
            self._pending.remove(future)
        return future.result()

    def close(self):
        for f in self._pending:
            f.cancel()
        self._pending = []
        self._pool.shutdown(wait=False)
        super().close()

    def _state(self):
        # The calls in flight hold elements taken from upstream: their results are the state
        # (in the order they would be yielded), once they finished.
        outcomes = list(self._ready)
        for f in self._pending:
            try:
                outcomes.append(("value", f.result()))
            except Exception as e:  # noqa: BLE001 - the function's error, raised when its turn comes
                outcomes.append(("error", e))
        return {"results": outcomes, "input_done": self._input_done}

    def _restore(self, state):
        self._ready = list(state["results"])
        self._input_done = state["input_done"]


def _outcome(item):
    kind, value = item
    if kind == "error":
        raise value
    return value


class _FilterStage(_Stage):
    def __init__(self, upstream, predicate):
        super().__init__(upstream)
        self._predicate = predicate

    def __next__(self):
        while True:  # ends with the upstream (StopIteration)
            element = next(self._upstream)
            keep = _call(self._predicate, element)
            if isinstance(keep, np.ndarray) and keep.shape == () and keep.dtype == np.bool_:
                keep = bool(keep)
            if not isinstance(keep, (bool, np.bool_)):
                raise TypeError("filter: `predicate` must return a scalar bool, got "
                                f"{type(keep).__name__}: {keep!r}")
            if keep:
                return element


class _BatchStage(_Stage):
    def __init__(self, upstream, batch_size, drop_remainder):
        super().__init__(upstream)
        self._batch_size = batch_size
        self._drop_remainder = drop_remainder

    def __next__(self):
        elements = []
        for _ in range(self._batch_size):
            try:
                elements.append(next(self._upstream))
            except StopIteration:
                break
        if not elements or (self._drop_remainder and len(elements) < self._batch_size):
            raise StopIteration
        return _batch(elements, "batch")


class _UnbatchStage(_Stage):
    def __init__(self, upstream):
        super().__init__(upstream)
        self._rows = iter(())

    def __next__(self):
        while True:  # ends with the upstream (StopIteration)
            row = next(self._rows, _END)
            if row is not _END:
                return row
            self._rows = _unbatch(next(self._upstream))

    def _state(self):
        rows = list(self._rows)  # the rest of the current batch
        self._rows = iter(rows)
        return {"rows": rows}

    def _restore(self, state):
        self._rows = iter(list(state["rows"]))


_END = object()


class _ShuffleStage(_Stage):
    """tf.data's shuffle: a buffer of buffer_size elements; each output is a uniformly chosen
    buffer entry, replaced by the next input."""

    def __init__(self, upstream, buffer_size, rng):
        super().__init__(upstream)
        self._buffer_size = buffer_size
        self._rng = rng
        self._buffer = []
        self._input_done = False

    def __next__(self):
        while not self._input_done and len(self._buffer) < self._buffer_size:
            try:
                self._buffer.append(next(self._upstream))
            except StopIteration:
                self._input_done = True
        if not self._buffer:
            raise StopIteration
        i = self._rng.randrange(len(self._buffer))
        self._buffer[i], self._buffer[-1] = self._buffer[-1], self._buffer[i]
        return self._buffer.pop()

    def close(self):
        self._buffer = []
        super().close()

    def _state(self):
        return {"buffer": list(self._buffer), "rng": self._rng.getstate(),
                "input_done": self._input_done}

    def _restore(self, state):
        self._buffer = list(state["buffer"])
        self._rng.setstate(state["rng"])
        self._input_done = state["input_done"]


class _TakeStage(_Stage):
    def __init__(self, upstream, count):
        super().__init__(upstream)
        self._left = count  # -1: all

    def __next__(self):
        if self._left == 0 or self._upstream is None:
            raise StopIteration
        element = next(self._upstream)
        if self._left > 0:
            self._left -= 1
            if self._left == 0:
                super().close()  # nothing more is read: leave the job now, not when dropped
        return element

    def _state(self):
        return {"left": self._left}

    def _restore(self, state):
        self._left = state["left"]
        if self._left == 0:
            super().close()


class _SkipStage(_Stage):
    def __init__(self, upstream, count):
        super().__init__(upstream)
        self._skip = count  # -1: all

    def __next__(self):
        while self._skip != 0:  # bounded by count, or by the upstream's end (StopIteration)
            next(self._upstream)
            if self._skip > 0:
                self._skip -= 1
        return next(self._upstream)

    def _state(self):
        return {"skip": self._skip}

    def _restore(self, state):
        self._skip = state["skip"]


class _Pause:
    """Stops a prefetch thread between two reads of its upstream, so that a state_dict() sees
    the queue, the element in the thread's hand and everything below as one consistent cut."""

    def __init__(self, stop):
        self._cv = threading.Condition()
        self._stop = stop
        self._wanted = False
        self._paused = False
        self.holding = _END  # an element taken from upstream but not yet queued

    def point(self, holding=_END):
        """Called by the thread where it may stop; blocks while a pause is wanted."""
        with self._cv:
            if not self._wanted:
                return
            self.holding, self._paused = holding, True
            self._cv.notify_all()
            while self._wanted and not self._stop.is_set():
                self._cv.wait(0.1)
            self.holding, self._paused = _END, False

    def request(self, thread):
        with self._cv:
            self._wanted = True
            # Bounded by the thread's current read: it pauses right after it (or ends).
            while not self._paused and thread.is_alive() and not self._stop.is_set():
                self._cv.wait(0.1)

    def release(self):
        with self._cv:
            self._wanted = False
            self._cv.notify_all()


def _prefetch_loop(upstream, q, stop, pause):
    # Runs on the prefetch thread; holds no reference to the _PrefetchStage, so dropping the
    # trainer's iterator closes it.
    def put(item):
        while not stop.is_set():  # until the consumer takes it or closes
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                pause.point(item)
        return False

    try:
        while not stop.is_set():  # ends with the upstream (StopIteration) or close()
            pause.point()
            try:
                element = next(upstream)
            except StopIteration:
                put(("end", None))
                return
            if not put(("element", element)):
                return
    except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
        put(("error", e))


class _PrefetchStage(_Stage):
    """A thread reads ahead into a queue of buffer_size elements; errors arrive in order."""

    def __init__(self, upstream, buffer_size):
        super().__init__(upstream)
        self._queue = queue.Queue(maxsize=buffer_size)
        self._stop = threading.Event()
        self._pause = _Pause(self._stop)
        self._restored = []  # (kind, value) items of a restored state, yielded first
        self._done = False
        self._thread = threading.Thread(target=_prefetch_loop,
                                        args=(upstream, self._queue, self._stop, self._pause),
                                        name="conveyor-prefetch", daemon=True)
        self._thread.start()

    def __next__(self):
        if self._restored:
            kind, value = self._restored.pop(0)
            if kind == "element":
                return value
            self._done = True
            raise StopIteration
        if self._done:
            raise StopIteration
        while True:  # a short timeout keeps Ctrl-C working; ends with the thread's last item
            try:
                kind, value = self._queue.get(timeout=0.1)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    self._done = True
                    raise StopIteration from None
        if kind == "element":
            return value
        self._done = True
        if kind == "error":
            raise value
        raise StopIteration

    def close(self):
        self._stop.set()
        self._done = True
        super().close()  # closes the service stream: a next() waiting on the thread returns
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _pause_thread(self):
        self._pause.request(self._thread)

    def _resume_thread(self):
        self._pause.release()

    def _state(self):
        # Called while the thread is paused: the queue and the element in its hand are what
        # this stage read ahead.
        with self._queue.mutex:
            items = list(self._restored) + list(self._queue.queue)
        if self._pause.holding is not _END:
            items.append(self._pause.holding)
        for kind, value in items:
            if kind == "error":
                raise ValueError(f"state_dict(): the pipeline read an error ahead ({value!r}); "
                                 "it is raised by the next element, not saved") from value
        return {"items": [(k, v) for k, v in items]}

    def _restore(self, state):
        self._restored = list(state["items"])


class TrainerIterator:
    """Iterates a TrainerDataset: the ops' iterators over a service stream. close() (or dropping
    it, or leaving a `with` block) stops prefetch threads and leaves the job."""

    def __init__(self, top, source, stages=()):
        self._top = top
        self._source = source  # the service stream (stats(), job_id, state_dict)
        self._stages = list(stages)  # bottom first

    def __iter__(self):
        return self

    def __next__(self):
        if self._top is None:
            raise StopIteration
        return next(self._top)

    def close(self):
        top, self._top = self._top, None
        if top is not None:
            top.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing to report to at collection time
            pass

    @property
    def job_id(self):
        return self._source.job_id

    def stats(self):
        """The service stream's stats (see the DistributedDataset iterator's stats())."""
        return self._source.stats()

    def state_dict(self) -> dict:
        """torchdata's Stateful protocol: the read cursor and what each op holds, taken between
        two next() calls; a TrainerDataset that load_state_dict()s it continues after the last
        element this iterator returned. Prefetch threads pause meanwhile. Needs a resumable read
        (DYNAMIC, private job): otherwise the cursor's error."""
        prefetching = [s for s in reversed(self._stages) if isinstance(s, _PrefetchStage)]
        for stage in prefetching:  # from the top: a paused stage no longer reads the ones below
            stage._pause_thread()
        try:
            cursor = self._source.state_dict()
            ops = [s._state() for s in self._stages]
        finally:
            for stage in prefetching:
                stage._resume_thread()
        return {**cursor, _TRAINER_KEY: {"version": _TRAINER_STATE_VERSION,
                                         "ops": [type(s).__name__ for s in self._stages],
                                         "state": ops}}


# ---------------------------------------------------------------- datasets

# The trainer-side part of a state_dict(), beside the service's read cursor.
_TRAINER_KEY = "conveyor_trainer_ops"
_TRAINER_STATE_VERSION = 1


def _check_trainer_state(state, names):
    part = state.get(_TRAINER_KEY) if isinstance(state, dict) else None
    if not isinstance(part, dict) or part.get("version") != _TRAINER_STATE_VERSION:
        raise ValueError(f"`state` must be a state_dict() of a TrainerIterator (a dict with "
                         f"\"{_TRAINER_KEY}\" of version {_TRAINER_STATE_VERSION}), got {state!r:.80}")
    if part.get("ops") != names:
        raise ValueError(f"`state` was saved by a pipeline of other ops ({part.get('ops')}); this one "
                         f"runs {names}")
    return part["state"]


class TrainerOps:
    """tf.data's transformations, run in this process (a mix-in of DistributedDataset and
    TrainerDataset)."""

    def map(self, map_func, num_parallel_calls=None, deterministic=None):
        """map_func(element) (or map_func(*element) for a tuple) on each element, in this process.
        num_parallel_calls: None = one call at a time; n or AUTOTUNE (the CPU count) = that many
        calls in flight on a thread pool; deterministic=False then yields results as they finish."""
        _check_callable("map_func", map_func, "map")
        if num_parallel_calls is not None:
            num_parallel_calls = _check_count("num_parallel_calls", num_parallel_calls, 1,
                                              allow_autotune=True, op="map")
        if deterministic is not None and not isinstance(deterministic, bool):
            raise TypeError(f"map: `deterministic` must be a bool or None, got {deterministic!r}")
        if num_parallel_calls is None:
            return TrainerDataset(self, lambda up: _MapStage(up, map_func), f"map({_name(map_func)})",
                                  _MapStage)
        calls = (os.cpu_count() or 1) if num_parallel_calls == AUTOTUNE else num_parallel_calls
        det = deterministic is not False
        return TrainerDataset(self, lambda up: _ParallelMapStage(up, map_func, calls, det),
                              f"map({_name(map_func)}, num_parallel_calls={num_parallel_calls})",
                              _ParallelMapStage)

    def filter(self, predicate):
        """Keeps the elements for which predicate(element) is True (a bool or 0-d bool array)."""
        _check_callable("predicate", predicate, "filter")
        return TrainerDataset(self, lambda up: _FilterStage(up, predicate), f"filter({_name(predicate)})",
                              _FilterStage)

    def batch(self, batch_size, drop_remainder=False):
        """Stacks batch_size consecutive elements per component (np.stack; string scalars into an
        object array of bytes). Every element of a batch must have the same structure and shapes."""
        batch_size = _check_count("batch_size", batch_size, 1, op="batch")
        _check_bool("drop_remainder", drop_remainder, "batch")
        return TrainerDataset(self, lambda up: _BatchStage(up, batch_size, drop_remainder),
                              f"batch({batch_size}, drop_remainder={drop_remainder})", _BatchStage)

    def unbatch(self):
        """Splits each element along its first dimension (every component's must agree)."""
        return TrainerDataset(self, _UnbatchStage, "unbatch()", _UnbatchStage)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True):
        """tf.data's shuffle over a buffer of buffer_size elements. With a seed the order is
        reproducible; reshuffle_each_iteration=True gives each iteration (each iter()) another
        order, False the same order every time (without a seed: one drawn now)."""
        buffer_size = _check_count("buffer_size", buffer_size, 1, op="shuffle")
        if seed is not None:
            seed = _check_count("seed", seed, 0, op="shuffle")
        _check_bool("reshuffle_each_iteration", reshuffle_each_iteration, "shuffle")
        base = seed if seed is not None else random.SystemRandom().getrandbits(63)
        iteration = [0]

        def make(up):
            n = iteration[0]
            iteration[0] += 1
            rng = random.Random(f"{base}/{n}" if reshuffle_each_iteration else f"{base}")
            return _ShuffleStage(up, buffer_size, rng)

        return TrainerDataset(self, make, f"shuffle({buffer_size}, seed={seed})", _ShuffleStage)

    def prefetch(self, buffer_size=AUTOTUNE):
        """Reads up to buffer_size elements ahead on a thread (AUTOTUNE: a fixed 8; 0: none)."""
        buffer_size = _check_count("buffer_size", buffer_size, 0, allow_autotune=True, op="prefetch")
        depth = AUTOTUNE_PREFETCH if buffer_size == AUTOTUNE else buffer_size
        if depth == 0:
            return TrainerDataset(self, lambda up: up, "prefetch(0)", None)
        return TrainerDataset(self, lambda up: _PrefetchStage(up, depth), f"prefetch({buffer_size})",
                              _PrefetchStage)

    def take(self, count):
        """The first count elements (-1: all). The job is left as soon as the count is read."""
        count = _check_count("count", count, -1, op="take")
        return TrainerDataset(self, lambda up: _TakeStage(up, count), f"take({count})", _TakeStage)

    def skip(self, count):
        """All but the first count elements (-1: none)."""
        count = _check_count("count", count, -1, op="skip")
        return TrainerDataset(self, lambda up: _SkipStage(up, count), f"skip({count})", _SkipStage)

    def apply(self, transformation_func):
        """transformation_func(self), as tf.data's apply."""
        _check_callable("transformation_func", transformation_func, "apply")
        return transformation_func(self)


def _check_bool(name, value, op):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}: `{name}` must be a bool, but {name} was of type "
                        f"{type(value).__name__}: {value!r}")


def _name(fn):
    return getattr(fn, "__qualname__", None) or type(fn).__name__


class TrainerDataset(TrainerOps):
    """Ops run in this process after a read through the service (see the module docstring).
    Iterating it reads the service again (as iterating its DistributedDataset does) and returns a
    TrainerIterator."""

    def __init__(self, input_dataset, make_stage, description, stage):
        self._input = input_dataset
        self._make_stage = make_stage
        self._description = description
        self._stage = stage  # the class make_stage makes (None: it adds no stage)
        self._resume = None  # a state_dict() for the next iter()
        self._last = None  # weakref to the latest TrainerIterator

    def _open(self, stages, restore=None):
        """(top iterator, the service stream under it); appends each stage made to `stages`.
        `restore` (the saved states, bottom first) is given to each stage as it is made, before
        the stage above exists: a prefetch thread starts reading at once, and must read restored
        stages."""
        if isinstance(self._input, TrainerDataset):
            upstream, source = self._input._open(stages, restore)
        else:
            upstream = iter(self._input)  # a DistributedDataset: joins or creates a job
            source = upstream
        try:
            stage = self._make_stage(upstream)
            if stage is not upstream:  # prefetch(0) adds no stage
                if restore is not None:
                    stage._restore(restore[len(stages)])
                stages.append(stage)
        except BaseException:
            upstream.close()
            raise
        return stage, source

    def __iter__(self):
        resume, self._resume = self._resume, None
        restore = None
        if resume is not None:
            restore = _check_trainer_state(resume, self._stage_names())
            self.distributed_dataset.load_state_dict({_STATE_KEY: resume[_STATE_KEY]})
        stages = []
        top, source = self._open(stages, restore)
        it = TrainerIterator(top, source, stages)
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
        resumes from its cursor and each op gets back what it held."""
        if not isinstance(state, dict) or _STATE_KEY not in state:
            raise ValueError(f"`state` must be a state_dict() of a TrainerIterator (a dict with "
                             f"\"{_STATE_KEY}\" and \"{_TRAINER_KEY}\"), got {state!r:.80}")
        _check_trainer_state(state, self._stage_names())
        self._resume = state
        self._last = None

    def _stage_names(self):
        """The class names of the stages an iterator of this pipeline has, bottom first."""
        names = []
        d = self
        while isinstance(d, TrainerDataset):
            if d._stage is not None:
                names.append(d._stage.__name__)
            d = d._input
        return list(reversed(names))

    @property
    def distributed_dataset(self):
        """The DistributedDataset this pipeline reads from."""
        d = self
        while isinstance(d, TrainerDataset):
            d = d._input
        return d

    def __repr__(self):
        parts = []
        d = self
        while isinstance(d, TrainerDataset):
            parts.append(d._description)
            d = d._input
        return f"{d!r}." + ".".join(reversed(parts))

