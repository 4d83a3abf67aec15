"""Agent Alloy: a supervisor agent delegates tasks to specialist agents inside one run.

- ``plan``: limits from config, each agent's model/tools/prompt, the ``delegate_to`` tool;
- ``delegation``: one child turn's bookkeeping (relabelling its events, its record);
- ``workflow_loop``: the agent loop of a workflow member, running ``delegate_to`` calls
  concurrently as child turns whose events merge into the run's one log.

No Flask and no SQL here: ``turns/workflow.py`` resolves workflows and agents.
"""
