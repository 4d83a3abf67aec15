"""The OpenAI-compatible API (``/v1``): a third projection of the one run log.

Each question has one file:

- *How does a request body become a turn?* ``parse.py`` (checked, typed ``ApiRequest``) and
  ``service.py`` (one ``TurnRequest``, one ``start_turn``; mode ``openai`` for model routes, agent mode
  for ``agent:<id>`` / ``workflow:<id>``);
- *What does the model get, and how does a client tool call come back?* ``turn.py``;
- *How is the log encoded?* ``responses_wire.py`` (Responses events with ``sequence_number``, and the
  response object) and ``chat_wire.py`` (``chat.completion.chunk`` frames and the completion); both are
  folds over the log from its start, so any reader (another worker, after a restart) numbers the same;
- *What is fixed when it is created?* ``head.py`` (stored with the run, ``store/openai_responses.py``);
- *Where does a finished response's object come from?* ``stored.py``;
- *What does ``/v1/models`` list?* ``models.py``.

The routes are ``odysseus/routes/v1_routes.py``; errors in OpenAI's shape ``routes/openai_errors.py``.
"""

from __future__ import annotations

from flask import Flask

from ..turns.registry import register_mode
from .service import MODE, ApiService, build_api_turn, record


def init_app(app: Flask) -> None:
    """Register the ``openai`` mode, the turn service's hook for /v1 turns, and the API's service
    (``app.extensions["odysseus.openai_api"]``)."""
    register_mode(app, MODE, build_api_turn)
    app.extensions["odysseus.turns"].prepared_hooks.append(record(app.extensions))
    app.extensions["odysseus.openai_api"] = ApiService(app.extensions)
