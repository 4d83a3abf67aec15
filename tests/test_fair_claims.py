"""``store.jobs.claim_fairly``: max-min fairness between users, decided and claimed in one write.

A job is claimed unless its owner has more jobs running than another user with jobs queued; the
refusal (``NOT_YET``) leaves it queued, a job no longer queued is ``GONE``. Two claimers that would
both have passed a separate check (the race that let one user's burst take every slot) cannot both
pass this one: the second sees the first's claim.
"""

from __future__ import annotations

import threading

from odysseus.store import Store
from odysseus.store.jobs import CLAIMED, GONE, NOT_YET


def _store(tmp_path) -> Store:
    store = Store(str(tmp_path / "jobs.db"))
    for i in range(4):
        store.jobs.create(f"a{i}", "alice", {"message": "x"})
    store.jobs.create("b0", "bob", {"message": "y"})
    return store


def test_a_user_with_more_running_waits_for_one_with_fewer(tmp_path):
    store = _store(tmp_path)
    assert store.jobs.claim_fairly("a0", "w1") == CLAIMED  # nobody runs anything: first come
    assert store.jobs.claim_fairly("a1", "w2") == NOT_YET  # alice runs 1, bob waits with 0
    assert store.jobs.by_id("a1")["status"] == "queued" and store.jobs.by_id("a1")["attempts"] == 0
    assert store.jobs.claim_fairly("b0", "w2") == CLAIMED
    assert store.jobs.claim_fairly("a1", "w3") == CLAIMED  # bob has nothing queued now
    assert store.jobs.claim_fairly("a1", "w3") == GONE
    assert store.jobs.claim_fairly("nope", "w3") == GONE
    store.jobs.finish("a0", "done", result="ok")
    assert store.jobs.claim_fairly("a2", "w1") == CLAIMED  # alone in the queue: every slot is hers
    assert store.jobs.claim_fairly("a3", "w2") == CLAIMED
    store.close()


def test_a_cancelled_job_is_gone_not_deferred(tmp_path):
    store = _store(tmp_path)
    with store.locked.tx() as db:
        db.execute("update jobs set status = 'cancelled' where job_id = 'a0'")
    assert store.jobs.claim_fairly("a0", "w1") == GONE
    store.close()


def test_claimers_at_the_same_moment_cannot_both_pass(tmp_path):
    store = _store(tmp_path)
    assert store.jobs.claim_fairly("a0", "w0") == CLAIMED
    store.jobs.finish("a0", "done", result="ok")  # both readers are free at once, bob still waits
    results, barrier = {}, threading.Barrier(3)

    def claim(job_id: str, worker: str) -> None:
        barrier.wait()
        results[job_id] = store.jobs.claim_fairly(job_id, worker)

    threads = [threading.Thread(target=claim, args=(job, w)) for job, w in (("a1", "w1"), ("a2", "w2"), ("a3", "w3"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(results.values()) == [CLAIMED, NOT_YET, NOT_YET], results
    store.close()
