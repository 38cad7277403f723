"""Resuming a trainer-side pipeline (issue 36): a TrainerIterator's state_dict() holds the read
cursor and what the ops after distribute() hold (shuffle buffer and generator, prefetched
elements, map calls in flight, a partial unbatch, take/skip counts), so a trainer that loads it
continues with exactly the elements it had not been given."""

import os
import pickle
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import conveyor

N = 400


def _ids(batch):
    return [int(v) for v in np.asarray(batch).reshape(-1)]


def _pipeline(target, kind):
    ds = conveyor.distribute(conveyor.Dataset.range(N), target, "distributed_epoch")
    if kind == "shuffle_batch_prefetch":
        return ds.shuffle(32, seed=5).batch(7).prefetch(3)
    if kind == "parallel_map_unbatch":
        return ds.batch(5).map(lambda x: x + 0, num_parallel_calls=3).prefetch(2).unbatch().batch(3)
    if kind == "skip_take":
        return ds.map(lambda x: x).shuffle(16, seed=1).skip(3).take(N - 10).prefetch(4).batch(4)
    raise AssertionError(kind)


def _expected(kind):
    if kind == "skip_take":
        return None  # which 3 and 7 elements fall out depends on the shuffle: checked by count
    return list(range(N))


@pytest.mark.parametrize("kind", ["shuffle_batch_prefetch", "parallel_map_unbatch", "skip_take"])
def test_state_dict_continues_after_the_last_returned_element(cluster, kind):
    pipeline = _pipeline(cluster.target, kind)
    it = iter(pipeline)
    seen = []
    for _ in range(9):
        seen += _ids(next(it))
    # The state goes through pickle, as torch.save stores it.
    state = pickle.loads(pickle.dumps(it.state_dict()))
    assert set(state) == {"conveyor_read_cursor", "conveyor_trainer_ops"}
    # The iterator goes on after a state_dict() (prefetch threads resumed).
    for _ in range(2):
        next(it)
    it.close()

    again = _pipeline(cluster.target, kind)
    again.load_state_dict(state)
    rest = [v for batch in again for v in _ids(batch)]
    union = seen + rest
    if _expected(kind) is None:
        assert len(union) == N - 10 and len(set(union)) == len(union)
    else:
        assert sorted(union) == _expected(kind)


def test_the_state_carries_the_shuffle_buffer(cluster):
    # What the shuffle held when the state was taken (31 elements between outputs) comes back
    # with it: without it they would be missing from the resumed epoch.
    pipeline = _pipeline(cluster.target, "shuffle_batch_prefetch")
    it = iter(pipeline)
    first = [v for _ in range(5) for v in _ids(next(it))]
    state = it.state_dict()
    assert state["conveyor_trainer_ops"]["ops"][0] == "shuffle(32, seed=5)"
    it.close()
    again = _pipeline(cluster.target, "shuffle_batch_prefetch")
    again.load_state_dict(state)
    rest = [v for batch in again for v in _ids(batch)]
    # What the cursor counts as read but the trainer was not given (at least the 31 elements
    # in the shuffle buffer) is missing from a resumed read that dropped the ops' state.
    plain = conveyor.distribute(conveyor.Dataset.range(N), cluster.target, "distributed_epoch")
    plain.load_state_dict({"conveyor_read_cursor": state["conveyor_read_cursor"]})
    unread = sorted(int(v) for v in plain)
    assert len(first) + len(unread) <= N - 31
    assert set(unread) <= set(rest)
    assert sorted(first + rest) == list(range(N))


def test_a_finished_take_still_saves_its_state(cluster):
    # take() leaves the job once its count is read: the state taken afterwards is the cursor as
    # the read closed, and a pipeline restored from it reads nothing more.
    def pipeline():
        ds = conveyor.distribute(conveyor.Dataset.range(N), cluster.target, "distributed_epoch")
        return ds.take(50).batch(10)

    it = iter(pipeline())
    got = [v for batch in it for v in _ids(batch)]
    assert len(got) == 50
    state = it.state_dict()
    again = pipeline()
    again.load_state_dict(state)
    assert list(again) == []


def test_refusals_name_the_state(cluster):
    it = iter(_pipeline(cluster.target, "shuffle_batch_prefetch"))
    next(it)
    state = it.state_dict()
    it.close()
    # Only the pipeline it came from may load it: the read alone would skip what the ops held.
    plain = conveyor.distribute(conveyor.Dataset.range(N), cluster.target, "distributed_epoch")
    with pytest.raises(ValueError, match="state_dict\\(\\) of a trainer-side pipeline"):
        plain.load_state_dict(state)
    with pytest.raises(ValueError, match="`resume_from` is the state_dict\\(\\) of a trainer-side"):
        conveyor.distribute(conveyor.Dataset.range(N), cluster.target, "distributed_epoch",
                            resume_from=state)
    other = _pipeline(cluster.target, "skip_take")
    with pytest.raises(ValueError, match="saved by a pipeline of other ops"):
        other.load_state_dict(state)
    with pytest.raises(ValueError, match="`state` must be a state_dict\\(\\) of a TrainerIterator"):
        other.load_state_dict({"conveyor_read_cursor": b""})
    # An OFF read of an unseeded shuffle has no cursor: its error, not a state that would
    # resume wrongly.
    off = iter(conveyor.distribute(conveyor.Dataset.range(5).shuffle(4), cluster.target,
                                   "parallel_epochs").batch(2))
    next(off)
    with pytest.raises(Exception, match="cannot be resumed"):
        off.state_dict()
    off.close()


TRAINER = textwrap.dedent("""
    import os, pickle, sys
    import numpy as np
    import conveyor
    target, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    pipeline = (conveyor.distribute(conveyor.Dataset.range(n).map(conveyor.Function("sleep_us", us=200)),
                                    target, "distributed_epoch")
                .shuffle(24, seed=3).batch(6).prefetch(2))
    seen = []
    if os.path.exists(path):
        with open(path, "rb") as f:
            saved = pickle.load(f)
        seen = saved["seen"]
        pipeline.load_state_dict(saved["state"])
    it = iter(pipeline)
    for batch in it:
        seen += [int(v) for v in np.asarray(batch).reshape(-1)]
        # A training step, then the checkpoint: the ids trained on and the loader's state,
        # replaced atomically together.
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            pickle.dump({"seen": seen, "state": it.state_dict()}, f)
        os.replace(tmp, path)
        print("step", len(seen), flush=True)
    print("done", flush=True)
""")


def test_a_trainer_sigkilled_mid_epoch_resumes_with_its_shuffle_and_batch(cluster, tmp_path):
    n = 600
    path = str(tmp_path / "trainer.ckpt")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(conveyor.__file__)), os.environ.get("PYTHONPATH", "")]))
    rng = random.Random(7)
    kills = 0
    for attempt in range(6):  # bounded: two kills, then a run to the end
        proc = subprocess.Popen([sys.executable, "-c", TRAINER, cluster.target, path, str(n)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if kills < 2:
            steps = rng.randrange(5, 25)
            deadline = time.monotonic() + 60
            for line in proc.stdout:  # until `steps` checkpoints were written
                if line.startswith("step"):
                    steps -= 1
                    if steps == 0:
                        break
                assert time.monotonic() < deadline, "the trainer made no progress"
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            kills += 1
            continue
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out
        assert "done" in out
        break
    assert kills == 2
    with open(path, "rb") as f:
        seen = pickle.load(f)["seen"]
    assert sorted(seen) == list(range(n)), (len(seen), len(set(seen)))
