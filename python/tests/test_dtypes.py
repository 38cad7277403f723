"""Every numpy dtype through conveyor: in-process (_collect) and through an in-process cluster over
TCP (OFF and DYNAMIC), bit-exact (NaN payloads, -0.0, bfloat16 patterns); bfloat16 helpers; the
PyTorch adapter's dtypes."""

import numpy as np
import pytest

import conveyor


def _awkward():
    """One array per dtype, with the values that show a lossy or reordering path."""
    f32 = np.array([0x80000000, 1, 0x7F800000, 0x7FC12345, 0x7F800001, 0x3FC00000],
                   np.uint32).view(np.float32)
    f64 = np.array([0x8000000000000000, 1, 0xFFF0000000000000, 0xFFF0000000ABCDEF],
                   np.uint64).view(np.float64)
    return [
        np.array([True, False, True]),
        np.array([-128, 0, 127], np.int8),
        np.array([-32768, 0, 32767], np.int16),
        np.array([-(2**31), 0, 2**31 - 1], np.int32),
        np.array([-(2**63), 0, 2**63 - 1], np.int64),
        np.array([0, 128, 255], np.uint8),
        np.array([0, 32768, 65535], np.uint16),
        np.array([0, 2**31, 2**32 - 1], np.uint32),
        np.array([0, 2**63, 2**64 - 1], np.uint64),
        np.array([0x3C00, 0x8000, 0x7BFF, 0x0001, 0x7C00, 0x7E01, 0xFC01], np.uint16).view(np.float16),
        conveyor.bfloat16(np.array([0x3F80, 0x8000, 0x7F7F, 0x0001, 0xFF80, 0x7FC1, 0x7F81], np.uint16),
                          bits=True),
        f32,
        f64,
        f32[:4].view(np.complex64),
        f64.view(np.complex128),
        np.array([b"", b"a\x00b"], dtype=object),
    ]


def _same(got, want):
    """Same dtype (bfloat16 mark included), shape and bytes."""
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert conveyor.is_bfloat16(got) == conveyor.is_bfloat16(want)
    assert got.shape == want.shape
    if want.dtype == object:
        assert got.tolist() == want.tolist()
    else:
        assert got.tobytes() == want.tobytes()


def test_images_of_uint8_slice():
    images = np.zeros((4, 8, 8, 3), np.uint8)
    images[2, 1, 1, 2] = 200
    out = conveyor.Dataset.from_tensor_slices(images)._collect()
    assert len(out) == 4
    assert all(x.dtype == np.uint8 and x.shape == (8, 8, 3) for x in out)
    assert out[2][1, 1, 2] == 200


def test_every_dtype_round_trips_in_process():
    arrays = _awkward()
    (element,) = conveyor.Dataset.from_tensors(tuple(arrays))._collect()
    assert len(element) == len(arrays) == 16
    for got, want in zip(element, arrays):
        _same(got, want)


@pytest.mark.parametrize("mode", ["parallel_epochs", "distributed_epoch"])
def test_every_dtype_round_trips_through_a_cluster(cluster, mode):
    # Six elements per dtype, sliced on dimension 0 (DYNAMIC splits them between the workers).
    arrays = [np.stack([a] * 6) for a in _awkward()]
    arrays[10] = conveyor.bfloat16(arrays[10], bits=True)  # np.stack drops the mark
    ds = conveyor.Dataset.from_tensor_slices(tuple(arrays))
    got = list(conveyor.distribute(ds, service=cluster.target, processing_mode=mode))
    copies = 2 if mode == "parallel_epochs" else 1  # OFF: each of the 2 workers reads all
    assert len(got) == 6 * copies
    for element in got:
        for g, w in zip(element, _awkward()):
            _same(g, w)


def test_every_dtype_through_a_python_map_on_the_workers(cluster):
    # The workers' Python functions take and give every dtype (bfloat16 keeps its mark): the copy
    # makes each result a new array, converted back rather than passed through.
    arrays = [np.stack([a] * 2) for a in _awkward()]
    arrays[10] = conveyor.bfloat16(arrays[10], bits=True)
    ds = conveyor.Dataset.from_tensor_slices(tuple(arrays)).map(
        lambda *xs: tuple(np.array(x, copy=True) for x in xs))
    got = list(conveyor.distribute(ds, service=cluster.target, processing_mode="distributed_epoch"))
    assert len(got) == 2
    for element in got:
        for g, w in zip(element, _awkward()):
            _same(g, w)


@pytest.mark.parametrize("how", ["copied", "unchanged", "big"])
def test_every_dtype_through_a_pool_map_as_through_the_interpreter(how):
    # num_parallel_calls=2 runs the function in pool processes (pool_worker_script.cpp), =1 in this
    # interpreter: the same elements, bfloat16's mark and uint16 beside it included. "big": results
    # of 64 KiB and more go in result blocks, numpy's own made there.
    arrays = [np.stack([a] * 2) for a in _awkward()]
    arrays[10] = conveyor.bfloat16(arrays[10], bits=True)
    fn = {"copied": lambda *xs: tuple(np.array(x, copy=True) for x in xs),
          "unchanged": lambda *xs: xs,
          "big": lambda *xs: tuple(np.repeat(np.array(x, copy=True), 40000) for x in xs)}[how]
    ds = conveyor.Dataset.from_tensor_slices(tuple(arrays))
    pool = ds.map(fn, num_parallel_calls=2)._collect()
    interpreter = ds.map(fn)._collect()
    assert len(pool) == len(interpreter) == 2
    for got, want in zip(pool, interpreter):
        assert len(got) == len(want) == 16
        for g, w in zip(got, want):
            _same(g, w)
    assert conveyor.is_bfloat16(pool[0][10]) and not conveyor.is_bfloat16(pool[0][6])


def test_unsupported_numpy_dtypes_name_the_supported_ones():
    with pytest.raises(ValueError, match=r"unsupported numpy dtype complex256.*uint16.*bfloat16"):
        conveyor.Dataset.from_tensors(np.zeros(2, np.clongdouble))


def test_bfloat16_helpers():
    x = conveyor.bfloat16(np.array([1.0, -2.5, 3.14159, np.nan, np.inf], np.float32))
    assert conveyor.is_bfloat16(x) and x.dtype == np.uint16
    assert x[:2].tolist() == [0x3F80, 0xC020]
    assert x[2] == 0x4049  # rounded to nearest: 3.140625
    back = conveyor.bfloat16_to_float32(x)
    assert back[:3].tolist() == [1.0, -2.5, 3.140625] and np.isnan(back[3]) and np.isinf(back[4])
    assert not conveyor.is_bfloat16(np.zeros(2, np.uint16))
    with pytest.raises(ValueError, match="16-bit patterns"):
        conveyor.bfloat16(np.zeros(2, np.uint32), bits=True)
    # The text form and element_spec name the dtype.
    ds = conveyor.Dataset.from_tensors(x)
    assert "bfloat16(" in ds.to_text()


def test_cast_after_parse_or_load():
    ds = conveyor.Dataset.from_tensor_slices(np.array([0.0, 1.7, 300.0, -4.0], np.float32)).map(
        conveyor.Function("cast", dtype="uint8"))
    out = ds._collect()
    assert [int(x) for x in out] == [0, 1, 255, 0] and all(x.dtype == np.uint8 for x in out)


def test_torch_adapter_gives_the_torch_dtypes():
    torch = pytest.importorskip("torch")
    import conveyor.torch as ct

    (element,) = conveyor.Dataset.from_tensors(tuple(_awkward()))._collect()
    t = ct.to_torch(element)
    want = [torch.bool, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, None, None, None,
            torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128]
    for i, dtype in enumerate(want):
        if dtype is None:  # uint16/32/64: torch tensors only where torch has those dtypes
            if isinstance(t[i], np.ndarray):
                assert t[i].dtype == element[i].dtype and t[i] is element[i]
            else:
                assert t[i].dtype == getattr(torch, str(element[i].dtype))
            continue
        assert isinstance(t[i], torch.Tensor) and t[i].dtype == dtype, (i, t[i])
        # No copy: the torch tensor shares the received buffer.
        assert t[i].data_ptr() == element[i].__array_interface__["data"][0]
    assert t[10].float().tolist()[0] == 1.0  # bfloat16 bits 0x3f80
    assert t[15].tolist() == [b"", b"a\x00b"]
