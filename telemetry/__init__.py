"""Traces (OpenTelemetry): configuration and the spans every layer records.

Below every other layer: it imports nothing of the project.
"""
