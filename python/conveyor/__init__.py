"""conveyor: tf.data service rebuilt in C++, from Python.

    import conveyor
    dispatcher = conveyor.DispatchServer()                      # in-process, a free port
    worker = conveyor.WorkerServer(dispatcher_address=dispatcher.target)
    ds = conveyor.Dataset.range(10).map("square")               # or Dataset.from_text("range(10).map(square)")
    for x in conveyor.distribute(ds, service=dispatcher.target, processing_mode="distributed_epoch"):
        print(x)                                                # 0-d numpy arrays sharing the received buffers

`conveyor.torch.ConveyorIterableDataset` feeds a torch DataLoader (imported on first use).
"""

from . import _conveyor
from .dtypes import bfloat16, bfloat16_dtype, bfloat16_to_float32, is_bfloat16
from .errors import *  # noqa: F401,F403  (registers the exception classes with the extension)
from .errors import ConveyorError
from . import image  # conveyor.image.decode(...), resize(...): image ops on the workers
from .dataset_ops import FixedLenFeature, VarLenFeature, parse_example_dataset  # adds Dataset methods
from .service import (
    DispatchServer,
    DispatcherConfig,
    DistributedDataset,
    WorkerConfig,
    WorkerServer,
    distribute,
    from_dataset_id,
    register_dataset,
)
from .snapshot import distributed_save, save
from .trainer import TrainerDataset, TrainerIterator

Dataset = _conveyor.Dataset
Function = _conveyor.Function
load_plugin = _conveyor.load_plugin
function_names = _conveyor.function_names
AUTOTUNE = _conveyor.AUTOTUNE
INFINITE_CARDINALITY = _conveyor.INFINITE_CARDINALITY
UNKNOWN_CARDINALITY = _conveyor.UNKNOWN_CARDINALITY

__all__ = [
    "AUTOTUNE", "ConveyorError", "Dataset", "DispatchServer", "DispatcherConfig", "DistributedDataset",
    "Function", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "WorkerConfig", "WorkerServer",
    "distribute", "distributed_save", "from_dataset_id", "function_names", "load_plugin",
    "register_dataset", "save", "FixedLenFeature", "VarLenFeature", "parse_example_dataset",
    "TrainerDataset", "TrainerIterator",
    "image",
    "bfloat16", "bfloat16_dtype", "bfloat16_to_float32", "is_bfloat16",
]


def __getattr__(name):
    # `conveyor.torch` without importing torch for users who do not need it.
    if name == "torch":
        import importlib

        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'conveyor' has no attribute {name!r}")
