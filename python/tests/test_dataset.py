"""The dataset builder, the text form and element conversion (no servers)."""

import pickle

import numpy as np
import pytest

import conveyor


def test_builder_equals_text_form():
    built = conveyor.Dataset.range(100).map("square").shuffle(16, seed=3).batch(8)
    parsed = conveyor.Dataset.from_text("range(100).map(square).shuffle(16, seed=3).batch(8)")
    assert built == parsed
    assert built.fingerprint() == parsed.fingerprint()
    assert built.to_text() == "range(100).map(square).shuffle(16, seed=3).batch(8)"
    assert built.cardinality() == 13


def test_function_with_parameters():
    ds = conveyor.Dataset.range(3).map(conveyor.Function("scale", factor=2.5))
    assert ds == conveyor.Dataset.from_text("range(3).map(scale(factor=2.5))")
    assert [float(x) for x in ds._collect()] == [0.0, 2.5, 5.0]


def test_local_collect_values_and_dtypes():
    out = conveyor.Dataset.range(5).map("square")._collect()
    assert [int(x) for x in out] == [0, 1, 4, 9, 16]
    assert all(isinstance(x, np.ndarray) and x.shape == () and x.dtype == np.int64 for x in out)


def test_from_tensor_slices_numpy_round_trip():
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    labels = np.array([b"a", b"b", b"c", b"d"], dtype=object)
    out = conveyor.Dataset.from_tensor_slices((a, labels))._collect()
    assert len(out) == 4
    for i, (row, label) in enumerate(out):
        assert row.dtype == np.float32 and row.shape == (3,)
        np.testing.assert_array_equal(row, a[i])
        assert label == labels[i]  # string scalars come back as bytes


def test_from_tensors_dtypes():
    for dtype in (np.bool_, np.int32, np.int64, np.float32, np.float64):
        v = np.ones((2, 2), dtype=dtype)
        (out,) = conveyor.Dataset.from_tensors(v)._collect()
        assert out.dtype == dtype
        np.testing.assert_array_equal(out, v)
    (s,) = conveyor.Dataset.from_tensors(np.array([["x", "yy"]]))._collect()
    assert s.dtype == object and s.shape == (1, 2) and s.tolist() == [[b"x", b"yy"]]


@pytest.mark.parametrize("dtype", [">i4", ">i8", ">f4", ">f8", "<i4", "<f8"])
def test_non_native_byte_order_is_converted(dtype):
    # A big-endian array (say, from a file format that stores them so) holds the same numbers
    # as its native-order copy; its bytes must not be taken as they are.
    values = np.array([1, 256, 70000, -3], dtype=dtype) if "i" in dtype else \
        np.array([1.5, 2.0, -0.25, 1e10], dtype=dtype)
    native = dtype.replace(">", "").replace("<", "")
    sliced = conveyor.Dataset.from_tensor_slices(values)._collect()
    assert [x.item() for x in sliced] == values.tolist()
    assert all(x.dtype == np.dtype(native) for x in sliced)
    (whole,) = conveyor.Dataset.from_tensors(values.reshape(2, 2))._collect()
    assert whole.dtype == np.dtype(native) and whole.dtype.isnative
    np.testing.assert_array_equal(whole, values.reshape(2, 2))
    # In a tuple, and a non-contiguous view of a big-endian array.
    a, b = conveyor.Dataset.from_tensors((values[::2], values))._collect()[0]
    assert a.tolist() == values[::2].tolist() and b.tolist() == values.tolist()


def test_unsupported_dtype_is_value_error():
    # float128 (x86's long double) has no tf.data dtype; uint8 and the other numpy dtypes do.
    with pytest.raises(ValueError, match="unsupported numpy dtype float128"):
        conveyor.Dataset.from_tensors(np.zeros(3, dtype=np.longdouble))


def test_unknown_function_fails_validation_with_the_cpp_text():
    ds = conveyor.Dataset.range(3).map("no_such_function")
    with pytest.raises(conveyor.ConveyorError) as info:
        ds.validate()
    assert "no_such_function" in str(info.value)


def test_text_form_syntax_error_is_value_error():
    with pytest.raises(ValueError, match="column"):
        conveyor.Dataset.from_text("range(10).map(")


def test_bad_argument_is_value_error():
    with pytest.raises(ValueError, match="batch_size"):
        conveyor.Dataset.range(10).batch(0).validate()


def test_pickle_round_trip():
    ds = conveyor.Dataset.range(10).map("square").batch(3)
    assert pickle.loads(pickle.dumps(ds)) == ds


def test_error_classes_map_every_code():
    cases = {
        "invalid_argument": ValueError, "not_found": LookupError, "unimplemented": NotImplementedError,
        "unavailable": ConnectionError, "deadline_exceeded": TimeoutError, "io_error": OSError,
        "out_of_range": IndexError, "internal": RuntimeError,
    }
    for code, builtin in cases.items():
        with pytest.raises(builtin) as info:
            conveyor._conveyor._raise_status(code, "the text " + code)
        assert str(info.value) == "the text " + code
        assert isinstance(info.value, conveyor.ConveyorError) and info.value.code == code


def test_concatenate_and_random():
    ds = conveyor.Dataset.range(1, 4).concatenate(conveyor.Dataset.range(4, 8))
    assert [int(x) for x in ds._collect()] == [1, 2, 3, 4, 5, 6, 7]  # tf.data's example
    assert ds.cardinality() == 7
    assert ds == conveyor.Dataset.from_text("range(1, 4).concatenate(range(4, 8))")
    a = [int(x) for x in conveyor.Dataset.random(seed=5).take(10)._collect()]
    b = [int(x) for x in conveyor.Dataset.random(5).take(10)._collect()]
    assert a == b and len(set(a)) == 10
    assert conveyor.Dataset.random().element_spec == "TensorSpec(shape=(), dtype=int64)"


def test_concatenate_incompatible_elements_is_type_error():
    strings = conveyor.Dataset.from_tensor_slices(np.array([b"a"], dtype=object))
    with pytest.raises(TypeError, match="Incompatible dataset elements"):
        conveyor.Dataset.range(3).concatenate(strings)
