#!/usr/bin/env python3
"""Trains a tiny PyTorch model on batches read from a conveyor cluster.

    # a local cluster started from Python (a dispatcher and --workers workers in this process):
    PYTHONPATH=build/python /usr/bin/python3 examples/pytorch_train.py --steps 200
    # or a running cluster (build/conveyor dispatcher / worker):
    PYTHONPATH=build/python /usr/bin/python3 examples/pytorch_train.py --dispatcher 127.0.0.1:5050

The data: a linear regression problem y = x . w + noise with 8 features, defined as a conveyor
pipeline (from_tensor_slices -> shuffle -> batch) that the workers run; the trainer only reads
ready batches. Exits non-zero if the loss did not go down.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch

try:
    import conveyor
except ImportError:  # run from the source tree after `scripts/dev build`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "python"))
    import conveyor
import conveyor.torch  # noqa: E402


def make_dataset(num_examples, features, batch_size, seed):
    rng = np.random.default_rng(seed)
    true_w = rng.normal(size=(features,)).astype(np.float32)
    x = rng.normal(size=(num_examples, features)).astype(np.float32)
    y = (x @ true_w + 0.01 * rng.normal(size=(num_examples,))).astype(np.float32)
    ds = (conveyor.Dataset.from_tensor_slices((x, y.reshape(-1, 1)))
          .shuffle(256, seed=seed)
          .batch(batch_size, drop_remainder=True))
    return ds


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dispatcher", help="host:port of a running dispatcher (default: start a local cluster)")
    p.add_argument("--workers", type=int, default=2, help="workers of the local cluster (default 2)")
    p.add_argument("--steps", type=int, default=100, help="training steps (default 100)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--examples", type=int, default=4096, help="examples per epoch (default 4096)")
    p.add_argument("--mode", default="distributed_epoch", choices=["distributed_epoch", "parallel_epochs"],
                   help="processing mode (default distributed_epoch: each example once per epoch)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    if args.steps <= 0 or args.batch_size <= 0 or args.examples < args.batch_size or args.workers <= 0:
        p.error("--steps, --batch-size, --workers must be positive and --examples >= --batch-size")

    servers = []
    if args.dispatcher:
        target = args.dispatcher
    else:
        dispatcher = conveyor.DispatchServer(port=0)
        servers = [conveyor.WorkerServer(dispatcher_address=dispatcher.target) for _ in range(args.workers)]
        servers.append(dispatcher)
        target = dispatcher.target
        print(f"local cluster: dispatcher {target}, {args.workers} worker(s)", flush=True)

    torch.manual_seed(args.seed)
    features = 8
    dataset = make_dataset(args.examples, features, args.batch_size, args.seed)
    loader = torch.utils.data.DataLoader(
        conveyor.torch.ConveyorIterableDataset(dataset, target, args.mode), batch_size=None)
    model = torch.nn.Linear(features, 1)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.MSELoss()

    step, epoch, first_loss, loss = 0, 0, None, None
    start = time.monotonic()
    try:
        while step < args.steps:
            epoch += 1
            seen = 0
            for x, y in loader:  # one job per epoch; batches made by the workers
                pred = model(x)
                loss = loss_fn(pred, y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                step += 1
                seen += 1
                if first_loss is None:
                    first_loss = loss.item()
                if step % 20 == 0 or step == 1:
                    print(f"epoch {epoch} step {step}: loss {loss.item():.5f}", flush=True)
                if step >= args.steps:
                    break
            if seen == 0:
                print("error: the service returned no batches", file=sys.stderr)
                return 1
    finally:
        for s in servers:
            s.stop()
    elapsed = time.monotonic() - start
    print(f"trained {step} steps in {elapsed:.2f} s: loss {first_loss:.5f} -> {loss.item():.5f}")
    if not loss.item() < first_loss:
        print("error: the loss did not go down", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
