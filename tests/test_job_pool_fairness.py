"""The in-process job pool's fairness between users.

A free worker serves the owner with the fewest jobs running, then the one served least recently,
then the oldest job: one user's burst cannot hold every slot while another user's job waits, users
take turns even with one slot, a user alone may use every slot, and each user's jobs keep their order.
"""

from __future__ import annotations

import threading
import time
from typing import Dict, List

import pytest

from odysseus.jobs import JobPool
from test_accounts import PASSWORD, add_user, login, make_app  # noqa: F401 - make_app is a fixture

CSRF = "X-Odysseus-CSRF"


class Jobs:
    """run_job for a real pool: each job blocks until the test releases it; records the start order."""

    def __init__(self) -> None:
        self.started: List[str] = []
        self.release: Dict[str, threading.Event] = {}
        self.changed = threading.Condition()

    def run(self, job_id: str) -> None:
        gate = self.release.setdefault(job_id, threading.Event())
        with self.changed:
            self.started.append(job_id)
            self.changed.notify_all()
        if not gate.wait(10):
            raise RuntimeError(f"{job_id} was never released")
        if job_id.startswith("boom"):
            raise ValueError("a failing job")

    def finish(self, job_id: str) -> None:
        self.release.setdefault(job_id, threading.Event()).set()

    def wait_started(self, count: int) -> List[str]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.started) >= count, 10), self.started
            time.sleep(0.05)  # nothing else may start meanwhile
            return list(self.started)


def test_a_waiting_user_goes_before_the_rest_of_another_users_burst():
    jobs = Jobs()
    pool = JobPool(2, jobs.run)
    for i in range(5):
        pool.submit(f"a{i}", "alice")
    assert jobs.wait_started(2) == ["a0", "a1"]  # alone: every slot is hers
    pool.submit("b0", "bob")
    jobs.finish("a0")
    assert jobs.wait_started(3)[2] == "b0"  # not a2: alice runs one, bob none
    jobs.finish("b0")
    assert jobs.wait_started(4)[3] == "a2"  # bob has nothing left: alice again, in her order
    for job in ("a1", "a2", "a3"):
        jobs.finish(job)
    jobs.finish("a4")
    assert jobs.wait_started(6) == ["a0", "a1", "b0", "a2", "a3", "a4"]


def _run_in_order(jobs: Jobs, total: int, running: int) -> List[str]:
    """Finish the oldest running job, one at a time, until ``total`` have started; the start order."""
    order = jobs.wait_started(running)
    while len(order) < total:
        oldest = next(j for j in order if not jobs.release.get(j, threading.Event()).is_set())
        jobs.finish(oldest)
        order = jobs.wait_started(len(order) + 1)
    for job in order:
        jobs.finish(job)
    return order


def _alice_first(slots: int) -> "tuple[Jobs, JobPool]":
    """A pool of ``slots`` already running alice's first jobs of three."""
    jobs = Jobs()
    pool = JobPool(slots, jobs.run)
    for i in range(3):
        pool.submit(f"a{i}", "alice")
    jobs.wait_started(slots)
    return jobs, pool


def test_a_freed_slot_goes_to_the_fewest_running_then_the_least_recently_served_then_the_oldest_job():
    jobs, pool = _alice_first(2)
    for user in "bc":
        for i in range(3):
            pool.submit(f"{user}{i}", user)
    # a0 ends: alice runs 1, bob and carol none and never served, bob's job is older -> b0; a1 ends:
    # alice and carol run none, carol was never served -> c0; b0 ends: alice was served before bob -> a2;
    # and so on: nobody runs two while another user waits with none, and the users take turns
    expected = ["a0", "a1", "b0", "c0", "a2", "b1", "c1", "b2", "c2"]
    assert _run_in_order(jobs, 9, 2) == expected


def test_with_one_slot_users_take_turns():
    jobs, pool = _alice_first(1)
    pool.submit("b0", "bob")
    pool.submit("b1", "bob")
    assert _run_in_order(jobs, 5, 1) == ["a0", "b0", "a1", "b1", "a2"]


def test_a_failing_job_frees_its_slot_and_the_pool_forgets_finished_owners():
    jobs = Jobs()
    pool = JobPool(1, jobs.run)
    pool.submit("boom0", "alice")
    pool.submit("b0", "bob")
    assert jobs.wait_started(1) == ["boom0"]
    jobs.finish("boom0")  # raises in run_job: logged, the worker lives on
    assert jobs.wait_started(2)[1] == "b0"
    jobs.finish("b0")
    deadline = time.monotonic() + 5
    while (pool._running or pool._served) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool._running == {} and pool._served == {} and pool._waiting == {}


@pytest.mark.slow
def test_through_the_api_a_second_users_job_does_not_wait_for_the_first_users_burst(make_app):  # noqa: F811
    app = make_app(BACKGROUND_WORKERS=1, DEMO_TOKEN_DELAY=0.002)
    add_user(app, "alice", admin=True)
    add_user(app, "bob")
    alice, bob = app.test_client(), app.test_client()
    headers = {"alice": {CSRF: login(alice, "alice")}, "bob": {CSRF: login(bob, "bob")}}
    submitted = []
    for i in range(3):
        reply = alice.post("/api/chat/background", json={"message": f"alice {i}"}, headers=headers["alice"])
        assert reply.status_code == 202, reply.json
        submitted.append((alice, headers["alice"], reply.json["job_id"]))
    reply = bob.post("/api/chat/background", json={"message": "bob 0"}, headers=headers["bob"])
    assert reply.status_code == 202, reply.json
    submitted.append((bob, headers["bob"], reply.json["job_id"]))
    finished = {}
    deadline = time.monotonic() + 60
    while len(finished) < 4 and time.monotonic() < deadline:
        for client, hdrs, job_id in submitted:
            job = client.get(f"/api/chat/background/{job_id}", headers=hdrs).json
            if job["status"] == "done":
                finished[job_id] = job["finished_at"]
        time.sleep(0.05)
    assert len(finished) == 4, finished
    order = sorted(finished, key=finished.get)
    ids = [job_id for _, _, job_id in submitted]
    assert order == [ids[0], ids[3], ids[1], ids[2]]  # bob's job right after alice's first, not after all three
