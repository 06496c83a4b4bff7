"""Team mode: intent routing, planning, skills, evidence and learning.

Plain asyncio and pydantic, no Ray: every model call goes through a
:class:`team.calls.Complete` the caller supplies (the coordinator asks a VP
actor to make it), so each component is tested with a scripted function.
"""
