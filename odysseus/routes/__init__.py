"""Flask blueprints, one module per endpoint family, and the JSON error handlers (``errors``).

Only this package speaks HTTP. The composition root (``odysseus.composition``) registers
every blueprint and calls each part's ``init_app``; nothing here wires itself.
"""
