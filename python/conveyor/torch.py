"""PyTorch adapter: conveyor elements as torch tensors.

    ds = conveyor.torch.ConveyorIterableDataset(
        conveyor.distribute(dataset, service=target, processing_mode="distributed_epoch", job_name="train"))
    for x, y in torch.utils.data.DataLoader(ds, batch_size=None):   # batch in the pipeline
        ...

Numeric components become tensors over the received buffers (torch.from_numpy: no copy), of the
same dtype: bool, int8..int64, uint8, float16, float32, float64, complex64, complex128, and
bfloat16 (conveyor's bfloat16 arrays, see conveyor.dtypes) as torch.bfloat16. torch before 2.3
has no uint16, uint32 or uint64: such components stay numpy arrays (no copy, no silent widening;
convert them yourself, e.g. ``torch.from_numpy(a.astype(np.int64))``); where torch has those
dtypes they become torch tensors too. String components stay bytes / numpy object arrays (torch
has no string tensors).
"""

import numpy as np
import torch
import torch.utils.data

from . import _conveyor
from .dtypes import is_bfloat16
from .service import DistributedDataset, distribute
from .trainer import TrainerDataset

_NEXT_ITERATION = _conveyor._NEXT_ITERATION


def to_torch(element):
    """One element (an array, or tuples and dicts of them, as the iterator yields) as torch tensors."""
    if isinstance(element, tuple):
        return tuple(to_torch(part) for part in element)
    if isinstance(element, dict):  # a nested element's dict (keys in sorted order)
        return {key: to_torch(part) for key, part in element.items()}
    if isinstance(element, np.ndarray) and element.dtype != object:
        if is_bfloat16(element):  # the same bits, reinterpreted: no copy
            return torch.from_numpy(element.view(np.int16)).view(torch.bfloat16)
        try:
            return torch.from_numpy(element)
        except TypeError:
            if element.dtype.kind == "u":  # uint16/32/64 on a torch without them
                return element
            raise
    return element


class _IterationOf:
    """A DistributedDataset read at a given iteration of its job name (see __iter__ below)."""

    def __init__(self, distributed, iteration):
        self._distributed = distributed
        self._iteration = iteration

    def __iter__(self):
        return self._distributed._iter_at(self._iteration)


def _rebased(pipeline, base):
    """The trainer-side ops of `pipeline` (a TrainerDataset chain) over `base` instead."""
    if not isinstance(pipeline, TrainerDataset):
        return base
    return TrainerDataset(_rebased(pipeline._input, base), pipeline._op, pipeline._description)


class ConveyorIterableDataset(torch.utils.data.IterableDataset):
    """A torch IterableDataset over a conveyor DistributedDataset, a TrainerDataset (a
    DistributedDataset followed by trainer-side ops such as ``.map(fn).batch(32)``), or over
    ``distribute(dataset, service, processing_mode, **kwargs)`` when given a Dataset.

    With DataLoader(num_workers=N > 1) every loader process becomes one consumer of the same job,
    so the job must be named (job_name=...): then each element reaches one loader process. The
    loader processes read with expected_consumers=N, so the epoch's repetition of the name ends
    only once all N read it: a process that starts after the others finished the whole epoch
    gets end of input (instead of starting the next repetition and reading everything again).
    Without a name every process would read a private job and the trainer would see each element
    N times, so that is refused."""

    def __init__(self, source, service=None, processing_mode=None, **distribute_kwargs):
        super().__init__()
        self.pipeline = None  # the trainer-side ops, when given a TrainerDataset
        if isinstance(source, (DistributedDataset, TrainerDataset)):
            if service is not None or processing_mode is not None or distribute_kwargs:
                raise TypeError("ConveyorIterableDataset: pass either a DistributedDataset (or a "
                                "TrainerDataset) or a Dataset with service and processing_mode, "
                                "not both")
            if isinstance(source, TrainerDataset):
                self.pipeline = source
                self.distributed = source.distributed_dataset
            else:
                self.distributed = source
        else:
            if service is None or processing_mode is None:
                raise TypeError("ConveyorIterableDataset(dataset, service, processing_mode, ...): "
                                "`service` and `processing_mode` are required with a Dataset")
            self.distributed = distribute(source, service, processing_mode, **distribute_kwargs)

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if info is not None and info.num_workers > 1 and not self.distributed.options.get("job_name"):
            raise ValueError(
                f"ConveyorIterableDataset: DataLoader has num_workers={info.num_workers}; set a "
                "`job_name` so that the loader processes share one job (each element read once), "
                "or use num_workers=0 (the service already runs the pipeline elsewhere)")
        source = self.distributed
        if info is not None and info.num_workers > 1:
            source = source.with_options(expected_consumers=info.num_workers)
        if info is None:
            # The DistributedDataset counts its iterations, as tf.data does.
            it = iter(self.pipeline if self.pipeline is not None else source)
        else:
            # A loader process gets a fresh copy of the dataset every epoch, so it cannot count
            # epochs: it reads the name's running iteration, or its next one (with
            # expected_consumers, an iteration lasts until every loader process read it).
            at = _IterationOf(source, _NEXT_ITERATION if source.options.get("job_name") else 0)
            it = iter(_rebased(self.pipeline, at))
        try:
            for element in it:
                yield to_torch(element)
        finally:
            it.close()
