"""The PyTorch adapter and the examples/ training loop."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import conveyor

torch = pytest.importorskip("torch")  # python3-torch is in scripts/setup.sh; skip only where absent
import conveyor.torch as ct  # noqa: E402

from conftest import REPO  # noqa: E402


def test_dataloader_yields_torch_tensors(cluster):
    ds = conveyor.Dataset.from_tensor_slices((np.arange(40, dtype=np.float32).reshape(20, 2),
                                              np.arange(20))).batch(5)
    loader = torch.utils.data.DataLoader(
        ct.ConveyorIterableDataset(ds, cluster.target, "distributed_epoch"), batch_size=None)
    batches = list(loader)
    assert len(batches) == 4
    rows = []
    for x, y in batches:
        assert isinstance(x, torch.Tensor) and x.dtype == torch.float32 and x.shape == (5, 2)
        assert isinstance(y, torch.Tensor) and y.dtype == torch.int64
        rows.extend(zip(y.tolist(), x.tolist()))
    assert sorted(rows) == [(i, [2.0 * i, 2.0 * i + 1]) for i in range(20)]


def test_adapter_accepts_a_distributed_dataset(cluster):
    d = conveyor.distribute(conveyor.Dataset.range(6), cluster.target, "distributed_epoch")
    got = sorted(int(t) for t in ct.ConveyorIterableDataset(d))
    assert got == list(range(6))


def test_to_torch_shares_memory_and_keeps_strings():
    arr = conveyor.Dataset.from_tensors(np.arange(8, dtype=np.int64))._collect()[0]
    t = ct.to_torch(arr)
    assert t.data_ptr() == arr.__array_interface__["data"][0]  # torch.from_numpy: no copy
    assert ct.to_torch(b"abc") == b"abc"
    pair = ct.to_torch((arr, np.array([b"x"], dtype=object)))
    assert isinstance(pair[0], torch.Tensor) and pair[1].dtype == object


def test_several_loader_workers_need_a_job_name(cluster, monkeypatch):
    class Info:
        num_workers = 2
        id = 0
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: Info())
    unnamed = ct.ConveyorIterableDataset(conveyor.Dataset.range(3), cluster.target, "parallel_epochs")
    with pytest.raises(ValueError, match="job_name"):
        list(unnamed)
    named = ct.ConveyorIterableDataset(conveyor.Dataset.range(3), cluster.target, "distributed_epoch",
                                       job_name="loader-job")
    assert sorted(int(t) for t in named) == [0, 1, 2]


def test_adapter_argument_errors():
    with pytest.raises(TypeError, match="service"):
        ct.ConveyorIterableDataset(conveyor.Dataset.range(3))


def _run_example(*args):
    env = dict(os.environ, CONVEYOR_LOG_LEVEL="warning")
    return subprocess.run([sys.executable, os.path.join(REPO, "examples", "pytorch_train.py"), *args],
                          capture_output=True, text=True, timeout=240, env=env)


def test_example_trains_on_a_local_cluster():
    r = _run_example("--steps", "60", "--workers", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "local cluster: dispatcher" in r.stdout and "trained 60 steps" in r.stdout


def test_example_trains_against_a_running_dispatcher(cluster):
    r = _run_example("--steps", "30", "--dispatcher", cluster.target, "--mode", "parallel_epochs")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "local cluster" not in r.stdout and "trained 30 steps" in r.stdout


def test_dataloader_worker_processes_share_a_named_job(cluster):
    # Two loader processes (forked from this one, which runs the cluster) are two consumers of
    # one job: DYNAMIC hands each element of the epoch to exactly one of them.
    slow = conveyor.Dataset.range(500).map(conveyor.Function("sleep_us", us=8000))
    ds = ct.ConveyorIterableDataset(slow, cluster.target, "distributed_epoch",
                                    job_name="loader-processes")
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, timeout=60)
    assert sorted(int(t) for t in loader) == list(range(500))


@pytest.mark.parametrize("context", ["spawn", "fork"])
def test_dataloader_epochs_are_read_once_however_late_a_loader_process_starts(cluster, context):
    # A fast epoch and spawned processes (each imports torch first): one process often reads the
    # whole epoch before the other joins. The late one must get end of input, not the name's
    # next repetition (every element twice: the audit saw it in 4 of 4 spawn epochs).
    ds = ct.ConveyorIterableDataset(conveyor.Dataset.range(200), cluster.target, "distributed_epoch",
                                    job_name="loader-" + context)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, timeout=60,
                                         multiprocessing_context=context)
    for epoch in range(2):
        assert sorted(int(t) for t in loader) == list(range(200)), f"epoch {epoch}"


def test_dict_elements_become_dicts_of_tensors(cluster):
    # Nested elements: a dict's numeric entries become tensors, strings stay bytes arrays.
    ds = conveyor.Dataset.from_tensor_slices({"x": np.arange(12, dtype=np.float32).reshape(6, 2),
                                              "y": (np.arange(6), np.array([b"a"] * 6, dtype=object))})
    batches = list(torch.utils.data.DataLoader(
        ct.ConveyorIterableDataset(ds.batch(3), cluster.target, "distributed_epoch"), batch_size=None))
    assert len(batches) == 2
    for b in batches:
        assert set(b) == {"x", "y"}
        assert isinstance(b["x"], torch.Tensor) and b["x"].shape == (3, 2)
        ids, tags = b["y"]
        assert isinstance(ids, torch.Tensor) and ids.dtype == torch.int64
        assert tags.dtype == object and list(tags) == [b"a"] * 3
    got = sorted(int(i) for b in batches for i in b["y"][0])
    assert got == list(range(6))


@pytest.mark.parametrize("fmt", ["webdataset", "tfrecord"])
def test_imagenet_like_example_reads_every_image_once_per_epoch(fmt):
    env = dict(os.environ, CONVEYOR_LOG_LEVEL="warning")
    r = subprocess.run([sys.executable, os.path.join(REPO, "examples", "imagenet_like", "train.py"),
                        "--images", "48", "--shards", "4", "--batch-size", "16", "--size", "64",
                        "--epochs", "2", "--format", fmt],
                       capture_output=True, text=True, timeout=240, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "epoch 2: 48 images" in r.stdout
    assert "every image exactly once in each of 2 epoch(s)" in r.stdout


def test_nested_dict_through_python_map_and_padded_batch_into_a_training_loop(cluster):
    # The element: {"image": uint8[H, W, 3], "label": int64, "meta": {"id": string}}.
    # A Python map on the workers crops each image to its own height; padded_batch pads the
    # images to the batch's tallest with 255 and the ids with b"-"; the dicts arrive intact.
    n = 12
    images = np.arange(n * 6 * 4 * 3, dtype=np.uint8).reshape(n, 6, 4, 3)
    ds = conveyor.Dataset.from_tensor_slices({
        "image": images, "label": np.arange(n, dtype=np.int64),
        "meta": {"id": np.array([f"id{i}".encode() for i in range(n)], dtype=object)}})

    def crop(e):
        h = 1 + int(e["label"]) % 6
        return {"image": e["image"][:h], "label": e["label"], "meta": e["meta"]}

    batched = ds.map(crop).padded_batch(
        4, padded_shapes={"image": [None, 4, 3], "label": [], "meta": {"id": []}},
        padding_values={"image": 255, "label": None, "meta": {"id": b"-"}})
    loader = torch.utils.data.DataLoader(
        ct.ConveyorIterableDataset(batched, cluster.target, "distributed_epoch"), batch_size=None)
    model = torch.nn.Linear(4 * 3, 1)
    seen = {}
    for batch in loader:
        assert set(batch) == {"image", "label", "meta"} and set(batch["meta"]) == {"id"}
        img, labels = batch["image"], batch["label"]
        assert img.dtype == torch.uint8 and labels.dtype == torch.int64
        model(img.float().mean(dim=1).flatten(1)).sum().backward()  # a training step's shapes
        for row, label, ident in zip(img, labels.tolist(), batch["meta"]["id"]):
            h = 1 + label % 6
            assert ident == f"id{label}".encode()
            assert torch.equal(row[:h], torch.from_numpy(images[label][:h]))
            assert (row[h:] == 255).all()
            seen[label] = True
    assert sorted(seen) == list(range(n))


def test_padded_batch_nested_forms_are_checked():
    ds = conveyor.Dataset.from_tensor_slices({"a": np.arange(4), "b": (np.arange(4), np.arange(4))})
    got = ds.padded_batch(2, padded_shapes={"a": [], "b": ([], [])},
                          padding_values={"a": -1, "b": (0, 0)})._collect()
    assert len(got) == 2 and set(got[0]) == {"a", "b"}
    with pytest.raises(TypeError, match=r"`padded_shapes` \(component \['b'\]\) must be a list"):
        ds.padded_batch(2, padded_shapes={"a": [], "b": ([], "x")})


def test_adapter_runs_trainer_side_ops_after_distribute(cluster):
    d = conveyor.distribute(conveyor.Dataset.range(12), cluster.target, "distributed_epoch")
    pipeline = d.map(lambda x: x * 10).batch(4)
    batches = list(torch.utils.data.DataLoader(ct.ConveyorIterableDataset(pipeline), batch_size=None))
    assert all(isinstance(b, torch.Tensor) and b.shape == (4,) for b in batches)
    assert sorted(int(v) for b in batches for v in b) == [10 * i for i in range(12)]
    with pytest.raises(TypeError, match="not both"):
        ct.ConveyorIterableDataset(pipeline, cluster.target, "distributed_epoch")


def test_loader_processes_run_the_trainer_ops_on_a_shared_named_job(cluster):
    d = conveyor.distribute(conveyor.Dataset.range(300).map(conveyor.Function("sleep_us", us=3000)),
                            cluster.target, "distributed_epoch", job_name="loader-trainer-ops")
    loader = torch.utils.data.DataLoader(ct.ConveyorIterableDataset(d.map(lambda x: x + 1000)),
                                         batch_size=None, num_workers=2, timeout=60)
    assert sorted(int(t) for t in loader) == [i + 1000 for i in range(300)]


def test_resume_example_survives_sigkill(tmp_path):
    # examples/pytorch_resume.py, SIGKILLed after its second checkpoint (its in-process cluster
    # dies with it), then run again: it resumes from the torch.save'd model + loader state on a
    # new cluster, and checks that the ids it trained on over both runs are the epoch once (it
    # exits 1 naming the repeated / missing ids otherwise).
    import queue
    import signal
    import threading

    script = os.path.join(REPO, "examples", "pytorch_resume.py")
    args = [sys.executable, script, "--state-dir", str(tmp_path), "--examples", "3000",
            "--batch-size", "16", "--checkpoint-every", "8", "--step-delay-ms", "5"]
    env = dict(os.environ, CONVEYOR_LOG_LEVEL="warning")
    first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(l) for l in first.stdout], daemon=True)
    reader.start()
    checkpoints, out = 0, []
    try:
        deadline = time.monotonic() + 120
        while checkpoints < 2 and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                assert first.poll() is None, "".join(out)
                continue
            out.append(line)
            checkpoints += line.startswith("checkpoint at step")
        assert checkpoints == 2, "".join(out)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    assert not any("equal one epoch" in l for l in out), "it finished before it was killed"
    second = subprocess.run(args, capture_output=True, text=True, timeout=240, env=env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resumed at step" in second.stdout, second.stdout
    assert "seen element ids over all runs equal one epoch: 3000 ids, each once" in second.stdout
