"""The service layer: a typed ``TurnRequest`` in, a run of the run engine out. No Flask anywhere here.

Every entry point (the page's /api/chat_stream, the agent API, research jobs, background jobs)
parses its input into a ``TurnRequest`` and makes one call, ``TurnService.start_turn(owner,
request)``; the service is ``app.extensions["odysseus.turns"]``.

- ``request``: ``TurnRequest`` and its groups; ``to_json``/``from_json`` for the job table.
- ``parse``: a request body -> ``TurnRequest``, one line per field; each entry point's rules.
- ``start``: ``TurnService``: resolve (branch, routing, owner defaults), prepare, start.
- ``registry``: the mode table and ``PreparedTurn``, what a mode's builder returns.
- one module per mode: ``chat``, ``agent`` (and how a tool call gets approved), ``document``,
  ``research``, ``workflow`` (Agent Alloy), ``compare``.
- ``branch`` (regenerate, edit-and-resend), ``routing`` (which agent answers), ``jobs``
  (background turns), ``messages`` (what every mode's turn shares).

"What is sent to the model?" is ``odysseus.context``; the agent loop and its tools are
``odysseus.agent`` and ``odysseus.tools`` (the tools a turn is offered: ``agent/toolbox.py``).
"""
