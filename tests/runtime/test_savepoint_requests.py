"""Stop requests with ``--drain`` that fail: the drain ends unless another drained stop waits, the job master is
told once, and a failover that aborted the savepoint fails its request without asking for another failover."""

from __future__ import annotations

from sparkpoint.runtime.savepoints import SavepointRequests


def _drained_stop(requests: SavepointRequests, checkpoint_id: int):
    request = requests.request("/tmp/sp", stop=True, drain=True)
    requests.drain_epoch()  # the drained epoch is deployed
    requests.trigger_queued(lambda r: checkpoint_id if r is request else None)
    return request


def test_a_failed_drained_stop_ends_the_drain_and_is_told_once():
    requests = SavepointRequests("/tmp/sp")
    first = _drained_stop(requests, 7)
    second = requests.request("/tmp/sp", stop=True, drain=True)  # asked again while the first is in flight
    requests.fail_aborted(still_pending=[], reason_of=lambda cid: f"checkpoint {cid} declined")
    assert first.future.exception() is not None and not second.future.done()
    assert requests.draining, "the second drained stop still drains"
    assert requests.take_drain_failure() == "checkpoint 7 declined"
    assert requests.take_drain_failure() is None


def test_a_failover_fails_the_savepoints_in_flight_without_asking_for_another():
    requests = SavepointRequests("/tmp/sp")
    request = _drained_stop(requests, 9)
    requests.fail_in_flight("the job failed over: boom")
    assert "failed over" in str(request.future.exception())
    assert not requests.draining and requests.take_drain_failure() is None
