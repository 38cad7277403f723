"""Resumable reads from Python (issue 36): checkpoint()/state_dict() of an iterator and
distribute(..., resume_from=...) / load_state_dict() continue a DYNAMIC epoch exactly."""

import pytest

import conveyor


def _take(it, n):
    return [int(next(it)) for _ in range(n)]


def test_state_dict_and_load_state_dict_continue_the_epoch(cluster):
    ds = conveyor.distribute(conveyor.Dataset.range(300), cluster.target, "distributed_epoch")
    it = iter(ds)
    first = _take(it, 120)
    state = ds.state_dict()
    assert set(state) == {"conveyor_read_cursor"} and isinstance(state["conveyor_read_cursor"], bytes)
    assert it.consumed_total == 120
    it.close()
    again = conveyor.distribute(conveyor.Dataset.range(300), cluster.target, "distributed_epoch")
    again.load_state_dict(state)
    rest = [int(e) for e in again]
    assert len(rest) == 180
    assert sorted(first + rest) == list(range(300))
    # One epoch is resumed: the next iter() reads the dataset anew.
    assert sorted(int(e) for e in again) == list(range(300))


def test_resume_from_bytes_twice_in_a_row(cluster):
    ds = conveyor.Dataset.range(200).map(conveyor.Function("sleep_us", us=10))
    it = iter(conveyor.distribute(ds, cluster.target, "distributed_epoch"))
    a = _take(it, 50)
    cursor = it.checkpoint()
    it.close()
    it = iter(conveyor.distribute(ds, cluster.target, "distributed_epoch", resume_from=cursor))
    b = _take(it, 70)
    assert it.consumed_total == 120
    cursor = it.state_dict()  # a state_dict() is accepted as resume_from too
    it.close()
    c = [int(e) for e in conveyor.distribute(ds, cluster.target, "distributed_epoch",
                                             resume_from=cursor)]
    assert sorted(a + b + c) == list(range(200))


def test_refusals_name_resume_from(cluster):
    it = iter(conveyor.distribute(conveyor.Dataset.range(50), cluster.target, "distributed_epoch"))
    _take(it, 10)
    cursor = it.checkpoint()
    it.close()
    with pytest.raises(ValueError, match="resume_from"):
        conveyor.distribute(conveyor.Dataset.range(50), cluster.target, "parallel_epochs",
                            resume_from=cursor)
    with pytest.raises(ValueError, match="resume_from"):
        conveyor.distribute(conveyor.Dataset.range(50), cluster.target, "distributed_epoch",
                            resume_from=b"not a cursor")
    with pytest.raises(ValueError, match="resume_from"):
        conveyor.distribute(conveyor.Dataset.range(50), cluster.target, "distributed_epoch",
                            job_name="shared", resume_from=cursor)
    with pytest.raises(ValueError, match="resume_from"):
        conveyor.distribute(conveyor.Dataset.range(50), cluster.target, "distributed_epoch",
                            resume_from=12)
    other = conveyor.distribute(conveyor.Dataset.range(60), cluster.target, "distributed_epoch",
                                resume_from=cursor)
    with pytest.raises(Exception, match="`resume_from` is a cursor of another dataset"):
        iter(other)
    # An OFF iterator of an unseeded shuffle has no cursor (a new task draws another order).
    off = iter(conveyor.distribute(conveyor.Dataset.range(5).shuffle(4), cluster.target,
                                   "parallel_epochs"))
    with pytest.raises(Exception, match="cannot be resumed.*`shuffle` without a seed"):
        off.checkpoint()
    off.close()


def test_off_state_dict_resumes_each_task_copy(cluster):
    # OFF on the fixture's 2 workers: each task produces range(200); the cursor counts per task.
    # (Slow elements: the read learns of both tasks before it takes 150 elements. A task it had
    # not learned of when the cursor was saved is not in the cursor.)
    slow = conveyor.Dataset.range(200).map(conveyor.Function("sleep_us", us=1000))
    ds = conveyor.distribute(slow, cluster.target, "parallel_epochs")
    it = iter(ds)
    first = _take(it, 150)
    state = ds.state_dict()
    it.close()
    assert b"mode off" in state["conveyor_read_cursor"]
    # A DYNAMIC read refuses the OFF cursor, naming both modes.
    with pytest.raises(ValueError, match="OFF \\(parallel_epochs\\) read, but this read is DYNAMIC"):
        conveyor.distribute(slow, cluster.target, "distributed_epoch",
                            resume_from=state["conveyor_read_cursor"])
    again = conveyor.distribute(slow, cluster.target, "parallel_epochs")
    again.load_state_dict(state)
    rest = [int(e) for e in again]
    assert sorted(first + rest) == sorted(list(range(200)) * 2)


def test_deterministic_order_and_resume(cluster):
    # Two workers at their own speeds: deterministic=True gives the dataset's own order (the
    # order one worker gives), also across a state_dict() + resume, and with empty splits.
    ds = (conveyor.Dataset.range(1500).map(conveyor.Function("sleep_us", us=50))
          .filter(conveyor.Function("mod_eq", m=7, r=2)))
    expected = [x for x in range(1500) if x % 7 == 2]
    whole = [int(e) for e in conveyor.distribute(ds, cluster.target, "distributed_epoch",
                                                 deterministic=True)]
    assert whole == expected
    it = iter(conveyor.distribute(ds, cluster.target, "distributed_epoch", deterministic=True))
    first = _take(it, 60)
    state = it.state_dict()
    it.close()
    rest = [int(e) for e in conveyor.distribute(ds, cluster.target, "distributed_epoch",
                                                deterministic=True, resume_from=state)]
    assert first + rest == expected


def test_deterministic_refusals_name_it(cluster):
    with pytest.raises(ValueError, match="`deterministic` needs the DYNAMIC"):
        conveyor.distribute(conveyor.Dataset.range(5), cluster.target, "parallel_epochs",
                            deterministic=True)
    with pytest.raises(ValueError, match="`deterministic` needs a private job"):
        conveyor.distribute(conveyor.Dataset.range(5), cluster.target, "distributed_epoch",
                            job_name="shared", deterministic=True)
    with pytest.raises(ValueError, match="`deterministic` must be a bool"):
        conveyor.distribute(conveyor.Dataset.range(5), cluster.target, "distributed_epoch",
                            deterministic=1)
    batched = conveyor.distribute(conveyor.Dataset.range(20).batch(4), cluster.target,
                                  "distributed_epoch", deterministic=True)
    with pytest.raises(ValueError, match="`deterministic` needs a per-split pipeline"):
        iter(batched)


def test_deterministic_hold_bytes_bounds_the_hold_and_is_refused_below_1(cluster):
    # A hold of 1 byte: the consumer asks only the task the order waits for; the order holds.
    ds = conveyor.Dataset.range(300).map(conveyor.Function("sleep_us", us=20))
    got = [int(e) for e in conveyor.distribute(ds, cluster.target, "distributed_epoch",
                                               deterministic=True, deterministic_hold_bytes=1)]
    assert got == list(range(300))
    with pytest.raises(ValueError, match="`deterministic_hold_bytes` must be at least 1"):
        conveyor.distribute(ds, cluster.target, "distributed_epoch", deterministic=True,
                            deterministic_hold_bytes=0)
    with pytest.raises(ValueError, match="`deterministic_hold_bytes` is used only with"):
        conveyor.distribute(ds, cluster.target, "distributed_epoch", deterministic_hold_bytes=1024)
    with pytest.raises(TypeError, match="`deterministic_hold_bytes` must be an int"):
        conveyor.distribute(ds, cluster.target, "distributed_epoch", deterministic=True,
                            deterministic_hold_bytes="1k")
