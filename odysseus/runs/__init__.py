"""THE run engine: a turn's whole life, independent of any HTTP connection.

Read this first; each question has one file:

- *What happens to a turn, from request to saved reply?* ``engine.py`` (its docstring walks
  through start, log, finalize, follow, evict, leases and recovery, shutdown); what a run's
  end records (metadata, terminal record, tail) is ``outcome.py``; eviction, the janitor and
  the shutdown drain are ``housekeeping.py``.
- *What happens when a client resumes?* ``follow.py``: a cursor in, every event after it
  (from the memory log while the run is held, else from the durable log in SQLite with the
  same ids and bytes), then the live ones; after the 180-second replay window, history or
  ``run_missing``; an ended run answers 204 to a cursor at its end.
- *What is one run, and its numbered log?* ``run.py`` (identity, cancel token, produced
  text) and ``run_log.py`` (the single source of truth for live delivery and replay).
- *What survives a crash?* ``durable.py``: every logged event written through to SQLite by
  one native thread (``native.py``), the final save as one conditional transaction; a run's
  consecutive events share one row (``event_packs.py``).
- *How does an idle stream stay alive?* ``heartbeat.py``: the one heartbeat loop every
  follower uses.
- *What does stream_status / the agent runs list / cancel show?* ``views.py``.
- *How many streams may one user hold?* ``streams.py``.
- *Several workers?* ``backend.py`` is the small interface; ``redis_*.py`` implement it
  with Redis Streams (cross-worker follow, stop, cancel, leases, one job queue).

Invariants: every run ends with exactly one terminal record that every connected reader
sees; its reply is saved exactly once (the final save is conditional on ``status =
'running'``); ids increase across the runs of a session and are never reused. This package
takes a turn generator as an argument and never imports a mode or Flask.
"""
