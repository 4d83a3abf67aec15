"""Agent mode: the tool-calling loop (agent_loop), its guards and approval logic. No Flask, no SQL."""
