"""Provider adapters and llm_core. Never imports Flask or the store."""
