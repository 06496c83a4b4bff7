"""Team mode in the coordinator: tasks routed, planned, run and decided.

``desk`` holds a shard's tasks and their decisions, ``run`` runs a task's
attempts as turns of the group's VPs, ``calls`` says which messages take the
task path and makes team mode's model calls through a VP.
"""
