"""Exceptions raised by conveyor: one class per C++ ErrorCode (pipeline/runtime/status.hpp), with the C++
message as its text. Each also derives from the closest Python built-in, so ``except ValueError``
catches an invalid argument, as in tf.data service."""

from . import _conveyor


class ConveyorError(Exception):
    """Base class of every error conveyor's C++ side reports. ``code`` names the C++ ErrorCode."""

    code = "unknown"


class InvalidArgumentError(ConveyorError, ValueError):
    code = "invalid_argument"


class NotFoundError(ConveyorError, LookupError):
    code = "not_found"


class AlreadyExistsError(ConveyorError, ValueError):
    code = "already_exists"


class OutOfRangeError(ConveyorError, IndexError):
    code = "out_of_range"


class DataLossError(ConveyorError, IOError):
    code = "data_loss"


class UnavailableError(ConveyorError, ConnectionError):
    code = "unavailable"


class FailedPreconditionError(ConveyorError, RuntimeError):
    code = "failed_precondition"


class UnimplementedError(ConveyorError, NotImplementedError):
    code = "unimplemented"


class InternalError(ConveyorError, RuntimeError):
    code = "internal"


class IOErrorStatus(ConveyorError, OSError):
    code = "io_error"


class VersionMismatchError(ConveyorError, RuntimeError):
    code = "version_mismatch"


class DeadlineExceededError(ConveyorError, TimeoutError):
    code = "deadline_exceeded"


class CancelledError(ConveyorError, RuntimeError):
    code = "cancelled"


class PermissionDeniedError(ConveyorError, PermissionError):
    code = "permission_denied"


class ResourceExhaustedError(ConveyorError, MemoryError):
    code = "resource_exhausted"


ERROR_CLASSES = {
    cls.code: cls
    for cls in (
        InvalidArgumentError,
        NotFoundError,
        AlreadyExistsError,
        OutOfRangeError,
        DataLossError,
        UnavailableError,
        FailedPreconditionError,
        UnimplementedError,
        InternalError,
        IOErrorStatus,
        VersionMismatchError,
        DeadlineExceededError,
        CancelledError,
        PermissionDeniedError,
        ResourceExhaustedError,
    )
}

_conveyor._set_error_classes(ERROR_CLASSES)
