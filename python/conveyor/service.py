"""tf.data service's Python API over conveyor's C++ client and servers.

    dispatcher = conveyor.DispatchServer()                         # port 0: a free port
    worker = conveyor.WorkerServer(dispatcher_address=dispatcher.target)
    ds = conveyor.Dataset.range(10).map("square")
    for x in conveyor.distribute(ds, service=dispatcher.target, processing_mode="distributed_epoch"):
        ...                                                        # numpy arrays, no copy
"""

import atexit
import dataclasses
import numbers
import os
import threading
import weakref
from typing import Mapping, Optional, Sequence

from . import _conveyor
from .trainer import _STATE_KEY, _TRAINER_KEY, TrainerOps

Dataset = _conveyor.Dataset

_live_servers = weakref.WeakSet()
_live_streams = weakref.WeakSet()


@dataclasses.dataclass
class DispatcherConfig:
    """The dispatcher's settings (tf.data.experimental.service.DispatcherConfig's names where they
    exist). ``port=0`` picks a free port; ``target`` then says which. ``allowed_paths``: the
    directories under which the file patterns of "distributed_epoch" file sources may be listed
    (none: such jobs are refused, as `conveyor dispatcher` without --allow-path).
    ``snapshot_reuse``: directories of finished snapshots (``conveyor.save``) a registered dataset
    of the same fingerprint is read from instead of running (as `--snapshot-reuse`; each must
    lie under ``allowed_paths``). ``tenant_max_workers`` and ``tenant_max_buffer_bytes``: per-tenant
    caps, {tenant: n} (as `--tenant-max-workers` and `--tenant-max-buffer-bytes`; ValueError
    naming the field for a bad tenant or a cap below 1)."""

    port: int = 0
    bind_host: str = "127.0.0.1"
    work_dir: Optional[str] = None
    worker_timeout_ms: int = 5000
    job_gc_timeout_ms: int = 60000
    range_split_size: int = 64
    allowed_paths: Sequence[str] = ()
    snapshot_reuse: Sequence[str] = ()
    tenant_max_workers: Mapping[str, int] = dataclasses.field(default_factory=dict)
    tenant_max_buffer_bytes: Mapping[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class WorkerConfig:
    """A worker's settings (tf.data.experimental.service.WorkerConfig's names where they exist).
    ``worker_address`` is the address consumers use ("host:port", "%port%" = the bound port);
    unset = bind_host:bound port. ``dispatcher_timeout_ms`` bounds the registration in start().
    ``allowed_paths``: the directories datasets may read and write files under (none: no file
    access, as `conveyor worker` without --allow-path); ``job_memory_limit``: bytes per job (0 = none).
    ``worker_tags``: tags the dispatcher shows and consumers see (tf.data's name); "COLOCATED"
    marks a worker that runs beside a trainer, which AUTO readers of other processes leave alone.
    ``max_concurrent_snapshots``: how many snapshot streams (distributed_save, one per snapshot)
    the worker writes at once (`--worker-max-concurrent-snapshots`); None = no limit."""

    dispatcher_address: str = ""
    port: int = 0
    bind_host: str = "127.0.0.1"
    worker_address: Optional[str] = None
    heartbeat_interval_ms: int = 500
    dispatcher_timeout_ms: int = 5000
    plugins: Sequence[str] = ()
    task_buffer_elements: int = 65536
    task_buffer_bytes: int = 32 << 20
    allowed_paths: Sequence[str] = ()
    job_memory_limit: int = 0
    worker_tags: Sequence[str] = ()
    max_concurrent_snapshots: Optional[int] = None


def _max_concurrent_snapshots(value) -> int:
    """The C++ form of WorkerConfig.max_concurrent_snapshots (0 = no limit)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError("WorkerServer: `max_concurrent_snapshots` must be a positive integer "
                         f"(or None for no limit), got {value!r}")
    return value


def _make_config(cls, config, overrides, server):
    if config is not None and not isinstance(config, cls):
        raise TypeError(f"{server}: `config` must be a {cls.__name__}, got {type(config).__name__}")
    config = dataclasses.replace(config) if config is not None else cls()
    names = {f.name for f in dataclasses.fields(cls)}
    for key, value in overrides.items():
        if key not in names:
            raise TypeError(f"{server}: unknown argument `{key}`; expected one of {sorted(names)}")
        setattr(config, key, value)
    return config


class _Server:
    """start/join/stop as in tf.data service: start() is idempotent, join() blocks until stop()
    (interruptible with Ctrl-C), stop() is idempotent and also runs at interpreter exit."""

    def __init__(self, impl, start):
        self._impl = impl
        self._started = False
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        _live_servers.add(self)
        if start:
            self.start()

    def start(self):
        with self._lock:
            if self._stopped.is_set():
                raise RuntimeError(f"{type(self).__name__} was stopped; start a new one")
            if not self._started:
                self._impl.start()
                self._started = True

    def join(self):
        """Blocks until stop() is called (from another thread)."""
        while not self._stopped.wait(0.2):
            pass
        self._impl.join()

    def stop(self):
        with self._lock:
            self._stopped.set()
            self._impl.stop()

    _stop = stop  # tf.data's tests call _stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


class DispatchServer(_Server):
    """The dispatcher, in this process: ``DispatchServer(port=0)`` or
    ``DispatchServer(DispatcherConfig(...), start=False)``."""

    def __init__(self, config: Optional[DispatcherConfig] = None, start: bool = True, **kwargs):
        self.config = _make_config(DispatcherConfig, config, kwargs, "DispatchServer")
        c = self.config
        impl = _conveyor._DispatchServer(
            port=c.port, bind_host=c.bind_host, work_dir=c.work_dir or "",
            worker_timeout_ms=c.worker_timeout_ms, job_gc_timeout_ms=c.job_gc_timeout_ms,
            range_split_size=c.range_split_size, allowed_paths=list(c.allowed_paths),
            snapshot_reuse=list(c.snapshot_reuse),
            tenant_max_workers=dict(c.tenant_max_workers),
            tenant_max_buffer_bytes=dict(c.tenant_max_buffer_bytes))
        super().__init__(impl, start)

    @property
    def target(self) -> str:
        """"host:port" for workers and consumers (after start())."""
        return self._impl.target

    @property
    def port(self) -> int:
        return self._impl.bound_port

    def __repr__(self):
        return f"DispatchServer(target={self.target!r})"


class WorkerServer(_Server):
    """A worker, in this process: ``WorkerServer(dispatcher_address=dispatcher.target)``."""

    def __init__(self, config: Optional[WorkerConfig] = None, start: bool = True, **kwargs):
        self.config = _make_config(WorkerConfig, config, kwargs, "WorkerServer")
        c = self.config
        impl = _conveyor._WorkerServer(
            dispatcher_address=_service_address(c.dispatcher_address, "dispatcher_address"),
            port=c.port, bind_host=c.bind_host, advertised_address=c.worker_address or "",
            heartbeat_interval_ms=c.heartbeat_interval_ms, plugins=list(c.plugins),
            task_buffer_elements=c.task_buffer_elements, task_buffer_bytes=c.task_buffer_bytes,
            connect_timeout_ms=c.dispatcher_timeout_ms, allowed_paths=list(c.allowed_paths),
            job_memory_limit=c.job_memory_limit, worker_tags=list(c.worker_tags),
            max_concurrent_snapshots=_max_concurrent_snapshots(c.max_concurrent_snapshots))
        super().__init__(impl, start)

    @property
    def worker_address(self) -> str:
        return self._impl.worker_address

    _address = worker_address  # tf.data's name

    @property
    def port(self) -> int:
        return self._impl.bound_port

    def __repr__(self):
        return f"WorkerServer(worker_address={self.worker_address!r})"


def _service_address(service, what="service"):
    if isinstance(service, DispatchServer):
        return service.target
    if not isinstance(service, str):
        raise TypeError(f"`{what}` must be a \"host:port\" string or a DispatchServer, "
                        f"got {type(service).__name__}")
    if not service:
        raise ValueError(f"`{what}` must not be empty")
    return service


_STRING_OPTIONS = ("processing_mode", "job_name", "compression", "target_workers", "on_worker_loss",
                   "data_transfer_protocol", "tenant", "external_state_policy")


def _refuse_trainer_state(state, name):
    # A trainer-side pipeline's state holds elements its ops had read: the read alone would skip
    # them (data loss), so only the TrainerDataset it came from may load it.
    if _TRAINER_KEY in state:
        raise ValueError(f"`{name}` is the state_dict() of a trainer-side pipeline (it holds what "
                         "its ops had read ahead); load it with that TrainerDataset's "
                         "load_state_dict()")


def _compression(compression):
    # tf.data: "`None` indicates not to compress".
    return "NONE" if compression is None else compression


def _check_int(name, value, optional=True):
    if (value is None and optional) or (not isinstance(value, bool) and isinstance(value, numbers.Integral)):
        return
    raise TypeError(f"`{name}` must be an int{' or None' if optional else ''}, but {name} was of type "
                    f"{type(value).__name__}: {value!r}")


def _check_option_types(options, connect_timeout_ms):
    # The extension's signature would refuse these with pybind11's "incompatible function
    # arguments" listing every overload; name the argument instead, with tf.data's wording.
    # Normalizes `options` in place (compression None -> "NONE").
    options["compression"] = _compression(options.get("compression", "AUTO"))
    for name in _STRING_OPTIONS:
        value = options.get(name)
        if name in ("job_name", "on_worker_loss", "data_transfer_protocol",
                    "external_state_policy") and value is None:
            continue
        if not isinstance(value, str):
            if name == "processing_mode":
                raise ValueError("`processing_mode` must be a string (\"parallel_epochs\", "
                                 "\"distributed_epoch\" or a ShardingPolicy name) or a ShardingPolicy, "
                                 f"but processing_mode was of type {type(value).__name__}: {value!r}")
            raise ValueError(f"`{name}` must be a string, but {name} was of type "
                             f"{type(value).__name__}: {value!r}")
    resume_from = options.get("resume_from")
    if resume_from is not None:
        if isinstance(resume_from, dict):  # a state_dict() passed whole
            _refuse_trainer_state(resume_from, "resume_from")
            resume_from = resume_from.get(_STATE_KEY)
        if isinstance(resume_from, str):
            resume_from = resume_from.encode()
        if not isinstance(resume_from, (bytes, bytearray)):
            raise ValueError("`resume_from` must be the bytes of an iterator's checkpoint() (or its "
                             f"state_dict()), but resume_from was of type "
                             f"{type(resume_from).__name__}")
        options["resume_from"] = bytes(resume_from)
    if "deterministic" in options and not isinstance(options["deterministic"], bool):
        raise ValueError("`deterministic` must be a bool, but deterministic was of type "
                         f"{type(options['deterministic']).__name__}: {options['deterministic']!r}")
    for name, value in options.items():
        if name not in _STRING_OPTIONS and name not in ("resume_from", "deterministic"):
            _check_int(name, value, optional=name != "tenant_weight")
    _check_int("connect_timeout_ms", connect_timeout_ms, optional=False)


def register_dataset(service, dataset: Dataset, compression: str = "AUTO",
                     dataset_id: Optional[str] = None, *, connect_timeout_ms: int = 5000,
                     external_state_policy: Optional[str] = None) -> str:
    """Registers ``dataset`` with the dispatcher and returns its id (the same id for an equal
    definition). ``dataset_id``: use this id (AlreadyExistsError if it names another dataset).
    ``external_state_policy`` (tf.data's dataset option of that name): "WARN" (None), "IGNORE"
    or "FAIL" for a dataset with an op with external state (``Dataset.random``, or an op running
    a Python function, which each worker runs with its own state)."""
    if not isinstance(dataset, Dataset):
        raise TypeError(f"`dataset` must be a conveyor.Dataset, got {type(dataset).__name__}")
    service = _service_address(service)
    compression = _compression(compression)
    if not isinstance(compression, str):
        raise ValueError(f"`compression` must be a string, but compression was of type "
                         f"{type(compression).__name__}: {compression!r}")
    if dataset_id is not None and not isinstance(dataset_id, str):
        raise ValueError(f"`dataset_id` must be a string, but dataset_id was of type "
                         f"{type(dataset_id).__name__}: {dataset_id!r}")
    if external_state_policy is not None and not isinstance(external_state_policy, str):
        raise ValueError(f"`external_state_policy` must be a string, but external_state_policy was "
                         f"of type {type(external_state_policy).__name__}: {external_state_policy!r}")
    _check_int("connect_timeout_ms", connect_timeout_ms, optional=False)
    return _conveyor._register_dataset(service, dataset, compression, dataset_id, connect_timeout_ms,
                                       external_state_policy)


class DistributedDataset(TrainerOps):
    """The elements of a dataset read through the service. Every iter() joins (or creates) a job
    and returns an iterator of numpy arrays (a tuple of them for several components; scalars are
    0-d arrays, string scalars bytes). Arrays share the received buffers: no copy. As in tf.data
    service, a named job is keyed by its name and the iteration: the k-th iter() of this object
    reads iteration k of the name, shared with every consumer reading that iteration; once the
    iteration ended, a consumer asking for it reads nothing (until the dispatcher's job GC).
    map/filter/batch/unbatch/shuffle/prefetch/take/skip continue the pipeline in this process
    (trainer.py), as tf.data allows after distribute."""

    def __init__(self, service, dataset=None, dataset_id=None, *, connect_timeout_ms, **options):
        self.service = _service_address(service)
        self.dataset = dataset
        self.dataset_id = dataset_id
        self._connect_timeout_ms = connect_timeout_ms
        self._options = options
        self._iterations = 0  # tf.data's iteration counter: which iteration the next iter() reads
        _check_option_types(options, connect_timeout_ms)
        _conveyor._make_options(**options)  # invalid options fail here, not at iteration
        if connect_timeout_ms <= 0:
            raise ValueError(f"`connect_timeout_ms` must be positive, got {connect_timeout_ms}")

    @property
    def options(self) -> dict:
        return dict(self._options)

    def with_options(self, **changes) -> "DistributedDataset":
        """The same read with some options changed (validated as distribute() does)."""
        return DistributedDataset(self.service, dataset=self.dataset, dataset_id=self.dataset_id,
                                  connect_timeout_ms=self._connect_timeout_ms,
                                  **{**self._options, **changes})

    def __iter__(self):
        iteration = self._iterations
        self._iterations += 1
        stream = self._iter_at(iteration if self._options.get("job_name") else 0)
        self._last_stream = weakref.ref(stream)
        # A resume continues one epoch: the next iter() reads the dataset anew.
        self._options.pop("resume_from", None)
        return stream

    # torchdata's Stateful protocol (StatefulDataLoader saves it beside the model with torch.save):
    # the read cursor of the latest iterator (docs/PYTHON.md "Resuming a read").
    def state_dict(self) -> dict:
        """{"conveyor_read_cursor": bytes}: which elements the latest iterator handed out (the
        state loaded with load_state_dict() while no iterator was made since)."""
        last = getattr(self, "_last_stream", None)
        stream = last() if last is not None else None
        if stream is not None:
            return stream.state_dict()
        return {_STATE_KEY: self._options.get("resume_from")}

    def load_state_dict(self, state: dict) -> None:
        """The next iter() continues from `state` (a state_dict()): it reads only the elements that
        the saved iterator had not handed out. DYNAMIC reads of a private job only (ValueError
        otherwise, naming `resume_from`)."""
        if not isinstance(state, dict) or _STATE_KEY not in state:
            raise ValueError(f"`state` must be a state_dict() of a conveyor iterator (a dict with "
                             f"\"{_STATE_KEY}\"), got {state!r:.80}")
        _refuse_trainer_state(state, "state")
        options = {**self._options, "resume_from": state[_STATE_KEY]}
        if options["resume_from"] is None:
            options.pop("resume_from")
        _check_option_types(options, self._connect_timeout_ms)
        _conveyor._make_options(**options)
        self._options = options
        self._last_stream = None

    def _iter_at(self, iteration):
        """A stream of iteration `iteration` of a named job (_conveyor._NEXT_ITERATION: the name's
        running iteration, else its next one)."""
        opts = _conveyor._make_options(**self._options, iteration=iteration)
        if self.dataset is not None:
            stream = _conveyor._distribute(self.service, self.dataset, opts, self._connect_timeout_ms)
        else:
            stream = _conveyor._from_dataset_id(self.service, self.dataset_id, opts,
                                                self._connect_timeout_ms)
        _live_streams.add(stream)
        return stream

    def __repr__(self):
        what = f"dataset={self.dataset!r}" if self.dataset is not None else f"dataset_id={self.dataset_id!r}"
        return f"DistributedDataset(service={self.service!r}, {what}, {self._options})"


def _option_kwargs(processing_mode, job_name, consumer_index, num_consumers,
                   max_outstanding_requests, compression, target_workers, max_buffered_bytes,
                   request_timeout_ms, expected_consumers=None, on_worker_loss=None,
                   data_transfer_protocol=None, tenant="default", tenant_weight=1,
                   external_state_policy=None, resume_from=None, deterministic=False,
                   deterministic_hold_bytes=None):
    if not isinstance(processing_mode, str):
        # tf.data's ShardingPolicy enum values print as ShardingPolicy.OFF etc.
        processing_mode = getattr(processing_mode, "name", processing_mode)
    return dict(processing_mode=processing_mode, job_name=job_name, consumer_index=consumer_index,
                num_consumers=num_consumers, max_outstanding_requests=max_outstanding_requests,
                compression=compression, target_workers=target_workers,
                max_buffered_bytes=max_buffered_bytes, request_timeout_ms=request_timeout_ms,
                expected_consumers=expected_consumers, on_worker_loss=on_worker_loss,
                data_transfer_protocol=data_transfer_protocol, tenant=tenant,
                tenant_weight=tenant_weight, external_state_policy=external_state_policy,
                **({} if resume_from is None else {"resume_from": resume_from}),
                **({"deterministic": deterministic} if deterministic is not False else {}),
                **({} if deterministic_hold_bytes is None
                   else {"deterministic_hold_bytes": deterministic_hold_bytes}))


class _Required:
    # distribute()'s service and processing_mode when not given: they have defaults only so that
    # the dataset can be left out (the Dataset.apply form); an explicit None is checked as before.
    def __repr__(self):
        return "<required>"


_REQUIRED = _Required()


def distribute(dataset: Optional[Dataset] = None, service=_REQUIRED, processing_mode=_REQUIRED,
               job_name: Optional[str] = None,
               consumer_index: Optional[int] = None, num_consumers: Optional[int] = None,
               max_outstanding_requests: Optional[int] = None, compression: str = "AUTO",
               target_workers: str = "AUTO", *, max_buffered_bytes: Optional[int] = None,
               request_timeout_ms: Optional[int] = None,
               connect_timeout_ms: int = 5000,
               expected_consumers: Optional[int] = None,
               on_worker_loss: Optional[str] = None,
               data_transfer_protocol: Optional[str] = None,
               tenant: str = "default", tenant_weight: int = 1,
               external_state_policy: Optional[str] = None,
               resume_from: Optional[bytes] = None,
               deterministic: bool = False,
               deterministic_hold_bytes: Optional[int] = None) -> DistributedDataset:
    """Reads ``dataset`` through the service at ``service`` ("host:port" or a DispatchServer).
    processing_mode: "parallel_epochs" (OFF: every worker produces the whole dataset) or
    "distributed_epoch" (DYNAMIC: each element of an epoch once across the workers); the
    ShardingPolicy names ("OFF", "DYNAMIC") work too. Option errors raise at once (ValueError).
    expected_consumers (with job_name; beyond tf.data): how many consumers share each repetition
    of the named job; one that starts after the others read everything gets end of input instead
    of reading the data again (ConveyorIterableDataset sets it to DataLoader's num_workers).
    on_worker_loss (OFF only): "continue" (the default for OFF, as tf.data) reads on when a worker
    leaves before its end, with a warning and the count in the iterator's stats()["lost_tasks"];
    "fail" raises instead. Given with another processing mode it is a ValueError.
    Without ``dataset`` (keywords only) it returns tf.data's transformation for Dataset.apply:
    ``ds.apply(distribute(service=..., processing_mode=...)).map(fn).prefetch(2)``.
    data_transfer_protocol: None, "grpc" or "bulk" (conveyor's default: messages, large elements
    on the workers' bulk channel; tf.data's "grpc" maps to it) or "caf" (every element in
    messages); anything else is a ValueError naming these.
    tenant, tenant_weight (beyond tf.data): the tenant whose share of the workers' threads the
    job uses and its weight (>= 1); a saturated worker's threads go to tenants by weight, equally
    among one tenant's jobs (docs/OPERATIONS.md "Tenants").
    external_state_policy: as register_dataset's (None = "WARN").
    resume_from (beyond tf.data): an iterator's checkpoint() bytes (or its state_dict()): a
    DYNAMIC read of a private job continues with exactly the elements that iterator had not
    handed out, also on a restarted cluster (docs/PYTHON.md "Resuming a read").
    deterministic (beyond tf.data): a DYNAMIC read of a private job hands out the elements in the
    order one worker gives (splits in order, each split's elements in order), whatever the
    number of workers, their speed or failures; works with resume_from (docs/PYTHON.md
    "Reproducible order").
    deterministic_hold_bytes (with deterministic): the bytes of elements the read may hold while
    it waits for an earlier one (None: 64 MiB); over it the consumer asks only the task the order
    waits for. At least 1, else a ValueError naming it."""
    for name, value in (("service", service), ("processing_mode", processing_mode)):
        if value is _REQUIRED:
            raise TypeError(f"distribute() missing required argument `{name}`")
    opts = _option_kwargs(processing_mode, job_name, consumer_index, num_consumers,
                          max_outstanding_requests, compression, target_workers,
                          max_buffered_bytes, request_timeout_ms, expected_consumers,
                          on_worker_loss, data_transfer_protocol, tenant, tenant_weight,
                          external_state_policy, resume_from, deterministic,
                          deterministic_hold_bytes)
    if dataset is None:
        return _distribute_transformation(service, connect_timeout_ms, opts)
    if not isinstance(dataset, Dataset):
        raise TypeError(f"`dataset` must be a conveyor.Dataset, got {type(dataset).__name__}")
    return DistributedDataset(service, dataset=dataset, connect_timeout_ms=connect_timeout_ms, **opts)


def _distribute_transformation(service, connect_timeout_ms, opts):
    # The options are checked now, as distribute(dataset, ...) checks them: a typo fails at the
    # call, not at apply().
    _service_address(service)
    _check_option_types(dict(opts), connect_timeout_ms)
    _conveyor._make_options(**{**opts, "compression": _compression(opts["compression"])})

    def apply_distribute(dataset):
        if not isinstance(dataset, Dataset):
            raise TypeError(f"`dataset` must be a conveyor.Dataset, got {type(dataset).__name__}")
        return DistributedDataset(service, dataset=dataset, connect_timeout_ms=connect_timeout_ms,
                                  **opts)

    return apply_distribute


def _dataset_distribute(self, service, processing_mode, **kwargs):
    """Shorthand for conveyor.distribute(self, service, processing_mode, ...)."""
    return distribute(self, service, processing_mode, **kwargs)


Dataset.distribute = _dataset_distribute


def from_dataset_id(processing_mode: str, service, dataset_id: str, job_name: Optional[str] = None,
                    consumer_index: Optional[int] = None, num_consumers: Optional[int] = None,
                    max_outstanding_requests: Optional[int] = None, target_workers: str = "AUTO", *,
                    max_buffered_bytes: Optional[int] = None, request_timeout_ms: Optional[int] = None,
                    connect_timeout_ms: int = 5000,
                    expected_consumers: Optional[int] = None,
                    data_transfer_protocol: Optional[str] = None,
                    tenant: str = "default", tenant_weight: int = 1) -> DistributedDataset:
    """Reads the registered dataset ``dataset_id`` (from register_dataset), as tf.data service's
    from_dataset_id; the arguments are distribute()'s."""
    if not isinstance(dataset_id, str) or not dataset_id:
        raise ValueError(f"`dataset_id` must be a non-empty string, got {dataset_id!r}")
    opts = _option_kwargs(processing_mode, job_name, consumer_index, num_consumers,
                          max_outstanding_requests, "AUTO", target_workers, max_buffered_bytes,
                          request_timeout_ms, expected_consumers,
                          data_transfer_protocol=data_transfer_protocol, tenant=tenant,
                          tenant_weight=tenant_weight)
    return DistributedDataset(service, dataset_id=dataset_id, connect_timeout_ms=connect_timeout_ms, **opts)


def _after_fork_in_child():
    # The parent's iterators and servers stay the parent's: their actor systems' threads did not
    # cross the fork. The extension marks them (a pthread_atfork handler): in the child, using
    # one raises, closing or stopping one does nothing, and none is destroyed. Forget them here
    # so that the child's exit does not try to close them. A server counts as stopped here (join()
    # raises instead of waiting for a stop() only the parent can make); its lock and event get
    # fresh ones: a parent thread that no longer exists may have held them.
    _live_streams.clear()
    for server in list(_live_servers):
        server._lock = threading.Lock()
        server._stopped = threading.Event()
        server._stopped.set()
    _live_servers.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _shutdown():
    # Leave jobs and stop in-process servers before the interpreter tears down: their actor
    # systems run threads that must not outlive the process's static destructors.
    for stream in list(_live_streams):
        try:
            stream.close()
        except Exception:
            pass
    servers = list(_live_servers)
    for server in [s for s in servers if isinstance(s, WorkerServer)] + \
                  [s for s in servers if not isinstance(s, WorkerServer)]:
        try:
            server.stop()
        except Exception:
            pass
