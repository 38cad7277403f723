#!/usr/bin/env python3
"""Trains a small PyTorch CNN on synthetic ImageNet-like JPEG shards decoded and augmented by
conveyor workers: decode -> random_resized_crop -> flip -> normalize -> to_chw -> batch.

    PYTHONPATH=build/python /usr/bin/python3 examples/imagenet_like/train.py --images 512
    # TFRecord shards (tf.train.Example "image"/"label") instead of WebDataset tar shards:
    PYTHONPATH=build/python /usr/bin/python3 examples/imagenet_like/train.py --format tfrecord
    # a running cluster whose workers may read DATA_DIR (--allow-path):
    ... train.py --dispatcher 127.0.0.1:5050 --data DATA_DIR

The shards are written by make_shards.py (into --data, or a temporary directory). Each epoch is
read in DYNAMIC mode (distributed_epoch): the trainer checks that it saw every image exactly once
per epoch and exits non-zero otherwise, or if the loss is not finite.
"""

import argparse
import math
import os
import sys
import tempfile
import time

import numpy as np
import torch

try:
    import conveyor
except ImportError:  # run from the source tree after `scripts/dev build`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build",
                                    "python"))
    import conveyor
import conveyor.torch  # noqa: E402
from conveyor import image  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_shards import CLASSES, write_shards  # noqa: E402

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # ImageNet's, on [0, 1] pixels


def pipeline(files, fmt, size, batch_size, seed):
    """The input pipeline the workers run; elements are dicts {"image", "label", "key"}."""
    if fmt == "webdataset":
        ds = conveyor.Dataset.webdataset(files, keys=["jpg", "cls"])
        img, label, key = "jpg", "cls", "__key__"
    else:
        ds = conveyor.Dataset.tfrecord(files).parse_example(
            {"image": conveyor.FixedLenFeature([], "string"),
             "label": conveyor.FixedLenFeature([], "int64")})
        img, label, key = "image", "label", None
    ds = (ds.map(image.decode(channels=3, key=img))
            .map(image.random_resized_crop(size, seed=seed, dtype="uint8", key=img))
            .map(image.random_flip_left_right(seed=seed + 1, key=img))
            .map(image.normalize(MEAN, STD, scale=1 / 255, key=img))
            .map(image.to_chw(key=img))
            .batch(batch_size))
    return ds, img, label, key


class SmallCNN(torch.nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 5, stride=4, padding=2), torch.nn.ReLU(),
            torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1))
        self.head = torch.nn.Linear(32, classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def labels_of(batch_labels):
    if isinstance(batch_labels, torch.Tensor):  # TFRecord: int64 already
        return batch_labels
    return torch.tensor([int(b) for b in batch_labels])  # WebDataset: ASCII digits per sample


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dispatcher", help="host:port of a running dispatcher (default: a local cluster)")
    p.add_argument("--workers", type=int, default=2, help="workers of the local cluster (default 2)")
    p.add_argument("--data", help="directory for the shards (default: a temporary directory)")
    p.add_argument("--format", choices=["webdataset", "tfrecord"], default="webdataset")
    p.add_argument("--images", type=int, default=512)
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--size", type=int, default=224, help="crop size (default 224)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    for name in ("workers", "images", "shards", "epochs", "batch_size", "size"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")

    tmp = None if args.data else tempfile.TemporaryDirectory(prefix="imagenet_like-")
    data_dir = os.path.abspath(args.data or tmp.name)
    t0 = time.monotonic()
    wds, tfr, labels = write_shards(data_dir, args.images, args.shards, args.seed)
    print(f"wrote {args.images} images in {len(wds)} shards ({args.format}) in "
          f"{time.monotonic() - t0:.1f} s", flush=True)

    servers = []
    if args.dispatcher:
        target = args.dispatcher
    else:
        dispatcher = conveyor.DispatchServer(port=0, allowed_paths=[data_dir])
        servers = [conveyor.WorkerServer(dispatcher_address=dispatcher.target, allowed_paths=[data_dir])
                   for _ in range(args.workers)]
        servers.append(dispatcher)
        target = dispatcher.target
        print(f"local cluster: dispatcher {target}, {args.workers} worker(s)", flush=True)

    torch.manual_seed(args.seed)
    ds, img, label, key = pipeline(wds if args.format == "webdataset" else tfr, args.format,
                                   args.size, args.batch_size, args.seed)
    loader = torch.utils.data.DataLoader(
        conveyor.torch.ConveyorIterableDataset(ds, target, "distributed_epoch"), batch_size=None)
    model = SmallCNN(CLASSES)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    status = 0
    try:
        for epoch in range(1, args.epochs + 1):
            start, seen, keys, losses = time.monotonic(), 0, [], []
            label_counts = np.zeros(CLASSES, dtype=np.int64)
            for batch in loader:  # one DYNAMIC job per epoch
                x, y = batch[img], labels_of(batch[label])
                if x.shape[1:] != (3, args.size, args.size) or x.dtype != torch.float32:
                    print(f"error: batch of {tuple(x.shape)} {x.dtype}", file=sys.stderr)
                    return 1
                loss = loss_fn(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
                seen += x.shape[0]
                label_counts += np.bincount(y.numpy(), minlength=CLASSES)
                if key is not None:
                    keys.extend(k.decode() for k in batch[key])
            elapsed = time.monotonic() - start
            print(f"epoch {epoch}: {seen} images in {elapsed:.2f} s ({seen / elapsed:.0f} images/s), "
                  f"loss {losses[0]:.3f} -> {losses[-1]:.3f}", flush=True)
            want_counts = np.bincount(list(labels.values()), minlength=CLASSES)
            once = seen == args.images and (label_counts == want_counts).all() and (
                key is None or sorted(keys) == sorted(labels))
            if not once:
                print(f"error: epoch {epoch} did not read every image exactly once "
                      f"({seen} of {args.images})", file=sys.stderr)
                status = 1
            if not all(math.isfinite(v) for v in losses):
                print("error: the loss is not finite", file=sys.stderr)
                status = 1
        if status == 0:
            print(f"every image exactly once in each of {args.epochs} epoch(s)")
    finally:
        for s in servers:
            s.stop()
        if tmp is not None:
            tmp.cleanup()
    return status


if __name__ == "__main__":
    sys.exit(main())
