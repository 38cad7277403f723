#!/usr/bin/env python3
"""Trains a tiny PyTorch model on one epoch read through conveyor, resumable after a kill.

    PYTHONPATH=build/python /usr/bin/python3 examples/pytorch_resume.py --state-dir /tmp/run
    # kill it (kill -9) mid-epoch, then run the same command again: it continues where its last
    # checkpoint stopped, and at the end checks that the element ids it trained on, over all
    # runs, are the epoch exactly once.

Every --checkpoint-every steps it saves, with torch.save and an atomic rename, the model, the
optimizer, the loader's state_dict() (conveyor's read cursor: which elements were handed out) and
the ids trained on so far. A restarted run loads them and passes the loader state to
load_state_dict(): the new job hands out exactly the elements the cursor does not cover (the
dataset is read in DYNAMIC mode; the cluster may be a new one: by default this script starts its
own, in this process, so a kill takes the whole cluster down with the trainer).
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


def make_dataset(num_examples, features, seed):
    """(id, x, y) examples of a linear problem; per element, so each names its split."""
    rng = np.random.default_rng(seed)
    true_w = rng.normal(size=(features,)).astype(np.float32)
    x = rng.normal(size=(num_examples, features)).astype(np.float32)
    y = (x @ true_w + 0.01 * rng.normal(size=(num_examples,))).astype(np.float32)
    ids = np.arange(num_examples, dtype=np.int64)
    return conveyor.Dataset.from_tensor_slices((ids, x, y.reshape(-1, 1)))


def save(path, model, opt, loader_state, seen, step):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "loader": loader_state,
                "seen": list(seen), "step": step}, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)  # a kill leaves the old checkpoint or the new one, never half of one


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--state-dir", required=True, help="where the checkpoint (state.pt) lives")
    p.add_argument("--dispatcher", help="host:port of a running dispatcher (default: start a local cluster)")
    p.add_argument("--workers", type=int, default=2, help="workers of the local cluster (default 2)")
    p.add_argument("--examples", type=int, default=2048, help="examples in the epoch (default 2048)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--checkpoint-every", type=int, default=8, help="steps between checkpoints (default 8)")
    p.add_argument("--step-delay-ms", type=float, default=0.0,
                   help="sleep this long per step (a slower trainer, to be killed mid-epoch)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    if args.examples <= 0 or args.batch_size <= 0 or args.checkpoint_every <= 0 or args.workers <= 0:
        p.error("--examples, --batch-size, --checkpoint-every and --workers must be positive")
    os.makedirs(args.state_dir, exist_ok=True)
    path = os.path.join(args.state_dir, "state.pt")

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
    model = torch.nn.Linear(features, 1)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.MSELoss()
    loader = conveyor.distribute(make_dataset(args.examples, features, args.seed), target,
                                 "distributed_epoch")
    seen, step = [], 0
    if os.path.exists(path):
        state = torch.load(path)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        loader.load_state_dict(state["loader"])
        seen, step = state["seen"], state["step"]
        print(f"resumed at step {step}: {len(seen)} example(s) trained on before", flush=True)

    def train(batch):
        nonlocal step
        ids = [int(e[0]) for e in batch]
        x = torch.from_numpy(np.stack([e[1] for e in batch]))
        y = torch.from_numpy(np.stack([e[2] for e in batch]))
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        seen.extend(ids)
        if args.step_delay_ms > 0:
            time.sleep(args.step_delay_ms / 1000.0)
        return loss.item()

    try:
        batch, loss = [], None
        it = iter(loader)
        for element in it:
            batch.append(element)
            if len(batch) < args.batch_size:
                continue
            loss = train(batch)
            batch = []
            if step % args.checkpoint_every == 0:
                # The batch was trained on and nothing else was taken: the cursor covers exactly it.
                save(path, model, opt, loader.state_dict(), seen, step)
                print(f"checkpoint at step {step}: loss {loss:.5f}", flush=True)
        if batch:  # the epoch's last, short batch
            loss = train(batch)
        save(path, model, opt, loader.state_dict(), seen, step)
    finally:
        for s in servers:
            s.stop()

    ids = sorted(seen)
    if ids != list(range(args.examples)):
        repeated = len(ids) - len(set(ids))
        missing = args.examples - len(set(ids))
        print(f"error: trained on {len(ids)} ids: {repeated} repeated, {missing} missing",
              file=sys.stderr)
        return 1
    print(f"seen element ids over all runs equal one epoch: {args.examples} ids, each once "
          f"(step {step}, loss {loss if loss is None else round(loss, 5)})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
