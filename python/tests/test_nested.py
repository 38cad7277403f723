"""Nested elements: tuples of tuples and dicts (string keys, sorted like tf.nest) from
from_tensor_slices / from_tensors, through batch, a Python map and a real local cluster read with
`distribute`, and element_spec showing the structure."""

import numpy as np
import pytest

import conveyor


def assert_same(got, want):
    """Same nesting (tuples as tuples, dicts as dicts with the same keys) and equal leaves."""
    assert type(got) is type(want) or not isinstance(want, (tuple, dict)), (got, want)
    if isinstance(want, tuple):
        assert len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            assert_same(g, w)
    elif isinstance(want, dict):
        assert list(got) == sorted(want), (got, want)
        for k in want:
            assert_same(got[k], want[k])
    else:
        assert np.array_equal(np.asarray(got), np.asarray(want)), (got, want)


def test_nested_tuple_slices_keep_their_nesting():
    # The bug issue 34 names: (a, (b, c)) used to yield (a_i, array([b_i, c_i])).
    a, b, c = np.arange(3), np.arange(3) * 10, np.array([b"x", b"y", b"z"])
    out = conveyor.Dataset.from_tensor_slices((a, (b, c)))._collect()
    assert len(out) == 3
    for i, e in enumerate(out):
        assert_same(e, (a[i], (b[i], c[i])))
        assert isinstance(e[1], tuple)


def test_dict_slices_come_back_as_dicts_in_sorted_key_order():
    image = np.arange(24, dtype=np.uint8).reshape(4, 2, 3)
    label = np.arange(4, dtype=np.int64)
    ds = conveyor.Dataset.from_tensor_slices({"label": label, "image": image,
                                              "meta": {"id": np.array([b"a", b"b", b"c", b"d"])}})
    assert ds.element_spec == ("{'image': TensorSpec(shape=(2, 3), dtype=uint8), "
                               "'label': TensorSpec(shape=(), dtype=int64), "
                               "'meta': {'id': TensorSpec(shape=(), dtype=string)}}")
    out = ds._collect()
    assert [list(e) for e in out] == [["image", "label", "meta"]] * 4
    assert_same(out[2], {"image": image[2], "label": label[2], "meta": {"id": b"c"}})


def test_from_tensors_any_nesting_and_the_text_form():
    ds = conveyor.Dataset.from_tensors({"a": 1, "b": (2, "x")})
    assert ds.to_text() == 'from_tensors({"a": 1, "b": (2, "x")})'
    assert conveyor.Dataset.from_text(ds.to_text()) == ds
    (e,) = ds._collect()
    assert_same(e, {"a": 1, "b": (2, b"x")})
    # A list is a tensor, a tuple a structure (numpy and tf.data read them so).
    (flat,) = conveyor.Dataset.from_tensors([[1, 2], [3, 4]])._collect()
    assert flat.shape == (2, 2)


def test_errors_name_the_path():
    with pytest.raises(ValueError, match=r'same size in dimension 0; component \["b"\] has 3, '
                                         r'component \["a"\] has 2'):
        conveyor.Dataset.from_tensor_slices({"a": np.arange(2), "b": np.arange(3)})
    with pytest.raises(ValueError, match=r"has the key 1 of type int; dict keys must be strings"):
        conveyor.Dataset.from_tensor_slices({1: np.arange(2)})
    with pytest.raises(ValueError, match=r"component \[1\]\[0\] is a scalar"):
        conveyor.Dataset.from_tensor_slices((np.arange(2), (5, np.arange(2))))


def test_dicts_through_batch_unbatch_and_padded_batch():
    ds = conveyor.Dataset.from_tensor_slices({"x": np.arange(5), "y": np.arange(5) * 2.0})
    batches = ds.batch(2)._collect()
    assert_same(batches[0], {"x": np.array([0, 1]), "y": np.array([0.0, 2.0])})
    assert_same(batches[-1], {"x": np.array([4]), "y": np.array([8.0])})
    assert ds.batch(2).element_spec == ("{'x': TensorSpec(shape=(None,), dtype=int64), "
                                        "'y': TensorSpec(shape=(None,), dtype=float64)}")
    rows = ds.batch(2).unbatch()._collect()
    assert_same(rows[3], {"x": 3, "y": 6.0})
    padded = ds.padded_batch(5)._collect()
    assert_same(padded[0], {"x": np.arange(5), "y": np.arange(5) * 2.0})
    assert_same(ds.enumerate()._collect()[1], (1, {"x": 1, "y": 2.0}))


def test_from_dataset_id_nests_like_the_registered_dataset(cluster):
    ds = conveyor.Dataset.from_tensor_slices({"x": np.arange(3), "y": (np.arange(3), np.arange(3) * 2)})
    dataset_id = conveyor.register_dataset(cluster.target, ds)
    got = list(conveyor.from_dataset_id("distributed_epoch", cluster.target, dataset_id))
    assert sorted(int(e["x"]) for e in got) == [0, 1, 2]
    for e in got:
        assert set(e) == {"x", "y"} and isinstance(e["y"], tuple)
        assert int(e["y"][1]) == 2 * int(e["x"])


def test_zip_is_a_tuple_of_the_inputs_structures():
    a = conveyor.Dataset.from_tensor_slices((np.arange(3), np.arange(3)))
    b = conveyor.Dataset.from_tensor_slices({"k": np.arange(3)})
    first = conveyor.Dataset.zip((a, b))._collect()[0]
    assert_same(first, ((0, 0), {"k": 0}))


def test_python_map_receives_and_returns_structures():
    ds = conveyor.Dataset.from_tensor_slices({"x": np.arange(4), "y": np.arange(4) * 10})
    # A dict element is one argument; the function returns a dict with a nested tuple.
    mapped = ds.map(lambda d: {"sum": d["x"] + d["y"], "pair": (d["x"], d["y"] * 2)})
    assert mapped.element_spec == ("{'pair': (TensorSpec(shape=<unknown>, dtype=int64), "
                                   "TensorSpec(shape=<unknown>, dtype=int64)), "
                                   "'sum': TensorSpec(shape=<unknown>, dtype=int64)}")
    out = mapped._collect()
    assert_same(out[2], {"pair": (2, 40), "sum": 22})
    # A tuple element is unpacked into arguments, its nested tuple kept.
    t = conveyor.Dataset.from_tensor_slices((np.arange(3), (np.arange(3), np.arange(3) * 2)))
    assert [int(x) for x in t.map(lambda a, bc: a + bc[0] + bc[1])._collect()] == [0, 4, 8]
    assert [int(x) for x in ds.filter(lambda d: d["x"] % 2 == 0).map(lambda d: d["y"])._collect()] \
        == [0, 20]


def test_python_map_whose_structure_cannot_be_traced_refuses_nested_results():
    def picky(x):
        if int(x) == 0:  # the trace's sample is zeros
            raise ValueError("no zeros")
        return {"v": x}

    ds = conveyor.Dataset.from_tensor_slices(np.arange(1, 4)).map(picky)
    with pytest.raises(conveyor.ConveyorError, match=r"could not be traced in the client"):
        ds._collect()


def test_dict_dataset_through_a_local_cluster_with_distribute(cluster):
    n = 12
    ds = (conveyor.Dataset.from_tensor_slices({"image": np.arange(n * 4, dtype=np.uint8).reshape(n, 2, 2),
                                               "label": np.arange(n)})
          .map(lambda d: {"image": d["image"] * 2, "label": d["label"] + 100, "meta": (d["label"],)})
          .batch(4))
    got = list(conveyor.distribute(ds, service=cluster.target, processing_mode="parallel_epochs"))
    assert len(got) == 6  # two workers, an epoch each
    labels = sorted(int(v) for b in got for v in b["label"])
    assert labels == sorted(list(range(100, 100 + n)) * 2)
    for b in got:
        assert list(b) == ["image", "label", "meta"]
        assert isinstance(b["meta"], tuple)
        assert b["image"].shape == (4, 2, 2) and b["image"].dtype == np.uint8
        np.testing.assert_array_equal(b["meta"][0] + 100, b["label"])


def test_trainer_ops_after_distribute_keep_dicts(cluster):
    ds = conveyor.Dataset.from_tensor_slices({"x": np.arange(6), "y": np.arange(6) * 2})
    pipeline = (ds.apply(conveyor.distribute(service=cluster.target,
                                             processing_mode="distributed_epoch"))
                .map(lambda d: {"x": d["x"], "z": d["y"] + 1}).batch(6))
    (batch,) = list(pipeline)
    assert list(batch) == ["x", "z"]
    assert sorted(int(v) for v in batch["x"]) == list(range(6))
