"""The OpenAI-compatible API (``/v1``): a third projection of the one run log.

Each question has one file:

- *How does a request body become a turn?* ``parse.py`` (checked, typed ``ApiRequest``) and
  ``service.py`` (the one door into the turn service; mode ``openai`` for model routes, agent mode for
  ``agent:<id>`` / ``workflow:<id>``);
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

from .service import MODE, ApiService, build_api_turn


def init_app(app: Flask) -> None:
    """Register the ``openai`` mode and the API's service (``app.extensions["odysseus.openai_api"]``)."""
    from ..routes.turn_registry import register_mode  # [adapter] turns/registry.py once TurnRequest lands
    from ..routes.turn_start import start_turn

    register_mode(app, MODE, build_api_turn)
    app.extensions["odysseus.openai_api"] = ApiService(app.extensions, start_turn)
