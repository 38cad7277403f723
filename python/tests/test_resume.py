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
    # An OFF iterator has no cursor.
    off = iter(conveyor.distribute(conveyor.Dataset.range(5), cluster.target, "parallel_epochs"))
    with pytest.raises(Exception, match="cannot be resumed"):
        off.checkpoint()
    off.close()
