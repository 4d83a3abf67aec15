"""What a run executes: each module a generator of canonical events taking a ``RunContext``.

No Flask and no SQL here. ``chat`` is the plain chat turn; ``messages`` holds what every
mode's turn shares. The agent loop (``odysseus.agent``), research (``odysseus.research``)
and Agent Alloy workflows (``odysseus.alloy``) are turns too, kept in their own packages
with their tools and guards.
"""
