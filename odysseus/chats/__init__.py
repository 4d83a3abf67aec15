"""Conversation features around the run engine: titles, export and import. No Flask here."""
