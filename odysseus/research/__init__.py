"""Research jobs: a multi-round web research run of the run engine (mode ``research``).

``turn.research_turn`` is the turn generator (no Flask, no SQL): probing, planning, rounds of
searching / reading / analyzing, then writing a cited report. ``limits`` holds the bounds,
``model`` the bounded model calls, ``pages`` search and concurrent page reads, ``prompts``
what the model is asked and how its answers are parsed, ``report`` the report (and the
deterministic fallback written from findings whenever synthesis is not possible).
"""
