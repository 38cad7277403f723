"""Python methods for every op of the text form, with tf.data's argument names and errors: each
round-trips through a one-worker cluster (OFF: the dataset's order) and builds the same graph as
the text form."""

import os
import re

import numpy as np
import pytest

import conveyor
from conftest import REPO

DATA = os.path.join(REPO, "test", "data")


@pytest.fixture(scope="module")
def target():
    dispatcher = conveyor.DispatchServer(port=0, allowed_paths=[DATA])
    worker = conveyor.WorkerServer(dispatcher_address=dispatcher.target, allowed_paths=[DATA],
                                   heartbeat_interval_ms=200)
    yield dispatcher.target
    worker.stop()
    dispatcher.stop()


def read(target, ds):
    return list(conveyor.distribute(ds, target, "parallel_epochs"))


def rows(elements):
    return [x.tolist() if isinstance(x, np.ndarray) else x for x in elements]


# --- every op of the registry has a Python method


def test_every_op_of_the_text_form_has_a_python_method():
    # The op registry (pipeline/graph/ops.cpp): a new op fails here until Python has it.
    with open(os.path.join(REPO, "pipeline", "graph", "ops.cpp")) as f:
        ops = re.findall(r'^\s*\{"([a-z_]+)",', f.read(), re.M)
    assert len(ops) >= 25 and "padded_batch" in ops  # the pattern still finds the schemas
    missing = [op for op in ops if not hasattr(conveyor.Dataset, op)]
    assert missing == []


# --- padded_batch


def test_padded_batch_pads_to_the_given_shape(target):
    ds = conveyor.Dataset.from_tensor_slices(np.arange(6).reshape(3, 2))
    padded = ds.padded_batch(2, padded_shapes=[4], padding_values=-1)
    assert padded == conveyor.Dataset.from_text(
        ds.to_text() + ".padded_batch(2, padded_shapes=[4], padding_values=-1)")
    assert rows(read(target, padded)) == [[[0, 1, -1, -1], [2, 3, -1, -1]], [[4, 5, -1, -1]]]
    dropped = ds.padded_batch(2, padded_shapes=[None], drop_remainder=True)
    assert rows(read(target, dropped)) == [[[0, 1], [2, 3]]]


def test_padded_batch_of_tuples_with_default_padding_values(target):
    ds = conveyor.Dataset.from_tensor_slices((np.arange(3), np.array([b"a", b"b", b"c"])))
    got = read(target, ds.padded_batch(3, padded_shapes=([], []), padding_values=(None, b"?")))
    assert len(got) == 1
    assert got[0][0].tolist() == [0, 1, 2] and got[0][1].tolist() == [b"a", b"b", b"c"]
    # Unset shapes: every dimension to the batch's longest (here the shapes agree already).
    assert rows(read(target, conveyor.Dataset.range(3).padded_batch(2))) == [[0, 1], [2]]


def test_padded_batch_argument_errors():
    ds = conveyor.Dataset.from_tensor_slices(np.arange(6).reshape(3, 2))
    with pytest.raises(ValueError, match="`batch_size` must be positive"):
        ds.padded_batch(0)
    with pytest.raises(TypeError, match="`batch_size` must be an int"):
        ds.padded_batch(2.0)
    with pytest.raises(TypeError, match="`drop_remainder` must be a bool"):
        ds.padded_batch(2, drop_remainder="yes")
    with pytest.raises(TypeError, match="`padded_shapes` must be a list of ints or None"):
        ds.padded_batch(2, padded_shapes=["a"])
    with pytest.raises(ValueError, match="padded_shapes"):
        ds.padded_batch(2, padded_shapes=[-3])
    with pytest.raises(ValueError, match="larger than its padded size 1"):
        ds.padded_batch(2, padded_shapes=[1])
    with pytest.raises(ValueError, match="`padding_values` must be a scalar"):
        ds.padded_batch(2, padding_values=[1, 2])
    with pytest.raises(ValueError, match="padded_shapes"):
        ds.padded_batch(2, padded_shapes=([2], [2]))  # two shapes for one component
    with pytest.raises(ValueError, match="cannot be padded with"):
        ds.padded_batch(2, padding_values=b"x")  # an int component padded with a string


# --- tfrecord(compression_type=), parse_example, ignore_errors

FEATURES = {
    "label": conveyor.FixedLenFeature([], np.int64),
    "id": conveyor.FixedLenFeature([], "int64"),
    "pixels": conveyor.FixedLenFeature([2, 2], np.float32),
    "name": conveyor.FixedLenFeature([], "string"),
    "opt": conveyor.FixedLenFeature([], "int64", default_value=-1),
    "tags": conveyor.VarLenFeature(bytes),
    "scores": conveyor.VarLenFeature("float32"),
}


def examples(compression):
    suffix = {None: "", "ZLIB": ".zlib", "GZIP": ".gz"}[compression]
    return conveyor.Dataset.tfrecord(os.path.join(DATA, "examples.tfrecord" + suffix),
                                     compression_type=compression)


@pytest.mark.parametrize("compression", [None, "ZLIB", "GZIP"])
def test_tfrecord_compression_and_parse_example(target, compression):
    got = read(target, examples(compression).parse_example(FEATURES))
    assert len(got) == 5
    # A dict keyed by feature name, as tf.io.parse_example returns (keys in sorted order).
    assert all(list(e) == sorted(FEATURES) for e in got)
    ids, labels, names, opts = zip(*[(int(e["id"]), int(e["label"]), e["name"], int(e["opt"]))
                                     for e in got])
    assert labels == (-2, -1, 0, 1, 2)
    assert ids == tuple(1000000000000 + 7919 * i for i in range(5))
    assert names[:4] == (b"rec-0", b"rec-1", b"rec-2", b"rec-3")
    assert opts == (100, -1, 102, -1, 104)  # -1: the default of a missing feature
    pixels = got[1]["pixels"]
    assert pixels.dtype == np.float32 and pixels.tolist() == [[1.0, 1.25], [1.5, 1.75]]
    assert got[2]["scores"].tolist() == [-0.0, -1.5] and got[2]["tags"].tolist() == [b"t0", b"t1"]
    assert got[0]["tags"].shape == (0,)


def test_parse_example_matches_the_text_form_and_pads(target):
    spec = {"tags": conveyor.VarLenFeature("string"), "label": conveyor.FixedLenFeature([], "int64")}
    ds = examples(None).parse_example(spec)
    assert ds == conveyor.Dataset.from_text(
        examples(None).to_text() + '.parse_example("label: int64; tags: var(string)")')
    assert ds == examples(None).parse_example("label: int64; tags: var(string)")
    assert ds == examples(None).apply(conveyor.parse_example_dataset(spec))
    batches = read(target, ds.padded_batch(5, padded_shapes=([], [None]),
                                           padding_values=(0, b"<pad>")))
    labels, tags = batches[0]["label"], batches[0]["tags"]
    assert labels.tolist() == [-2, -1, 0, 1, 2]
    assert tags.shape == (5, 4) and tags[1].tolist() == [b"t0", b"<pad>", b"<pad>", b"<pad>"]


def test_parse_example_argument_errors():
    ds = examples(None)
    with pytest.raises(TypeError, match="`features` must be a dict"):
        ds.parse_example(["label"])
    with pytest.raises(ValueError, match="`dtype` must be int64, float32 or string"):
        ds.parse_example({"x": conveyor.FixedLenFeature([], np.int32)})
    with pytest.raises(ValueError, match="`shape` entries must be >= 0"):
        ds.parse_example({"x": conveyor.FixedLenFeature([-1], "int64")})
    with pytest.raises(TypeError, match="must be a conveyor.FixedLenFeature"):
        ds.parse_example({"x": "int64"})
    with pytest.raises(ValueError, match="default"):
        ds.parse_example({"x": conveyor.FixedLenFeature([2], "int64", default_value=[1, 2, 3])})
    with pytest.raises(ValueError, match="feature spec, character 1"):
        ds.parse_example("label int64")


def test_text_lines_compression_type(target):
    gz = conveyor.Dataset.text_lines(os.path.join(DATA, "lines.txt.gz"), compression_type="GZIP")
    assert read(target, gz) == [b"alpha", b"beta", b"gamma", b"delta"]
    zl = conveyor.Dataset.text_lines([os.path.join(DATA, "lines.txt.zlib")], compression_type="ZLIB")
    assert read(target, zl) == [b"one", b"two", b"three"]


def test_compression_type_errors_name_the_argument():
    with pytest.raises(ValueError, match="`compression_type`"):
        conveyor.Dataset.tfrecord("x.tfrecord", compression_type="BZ2")
    with pytest.raises(ValueError, match="`compression_type`"):
        conveyor.Dataset.text_lines(["x.txt"], compression_type="zip")
    assert conveyor.Dataset.text_lines("a.txt", compression_type="GZIP") == \
        conveyor.Dataset.from_text('text_lines(["a.txt"], compression_type="GZIP")')


def test_ignore_errors_skips_records_that_fail(target):
    spec = {"label": conveyor.FixedLenFeature([], "int64")}
    files = [os.path.join(DATA, "raw-0.tfrecord"), os.path.join(DATA, "examples.tfrecord")]
    ds = conveyor.Dataset.tfrecord(files).parse_example(spec)
    with pytest.raises(conveyor.ConveyorError):
        read(target, ds)  # raw-0's records are not Examples
    got = [int(x["label"]) for x in read(target, ds.ignore_errors())]
    assert got == [-2, -1, 0, 1, 2]
    assert ds.ignore_errors(log_warning=True) == conveyor.Dataset.from_text(
        ds.to_text() + ".ignore_errors(log_warning=true)")


# --- interleave options


def test_interleave_options(target):
    base = conveyor.Dataset.range(1, 5)
    ds = base.interleave("range_fn", cycle_length=2, block_length=2)
    assert ds == conveyor.Dataset.from_text(
        "range(1, 5).interleave(range_fn, cycle_length=2, block_length=2)")
    expected = [0, 0, 1, 0, 1, 2, 0, 1, 2, 3]
    assert [int(x) for x in read(target, ds)] == expected
    assert base.interleave("range_fn") == base.interleave("range_fn", block_length=None,
                                                          num_parallel_calls=None)
    # In parallel: the same order (deterministic), or the same elements (deterministic=False).
    par = base.interleave("range_fn", cycle_length=2, block_length=2, num_parallel_calls=3)
    assert par == conveyor.Dataset.from_text(
        "range(1, 5).interleave(range_fn, cycle_length=2, block_length=2, num_parallel_calls=3)")
    assert [int(x) for x in read(target, par)] == expected
    loose = base.interleave("range_fn", cycle_length=2, block_length=2,
                            num_parallel_calls=conveyor.AUTOTUNE, deterministic=False)
    assert sorted(int(x) for x in read(target, loose)) == sorted(expected)
    with pytest.raises(ValueError, match="`num_parallel_calls` must be positive or AUTOTUNE"):
        read(target, base.interleave("range_fn", num_parallel_calls=0))
