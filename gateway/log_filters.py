"""Filters on uvicorn's loggers: no tokens, no tracebacks for a client's bad
text, no access lines for routine polls. ``install_log_filters`` adds them.
"""

from __future__ import annotations

import logging
import re


class _RedactTokens(logging.Filter):
    """Hide ``token=...`` query values in log lines (uvicorn logs WebSocket paths).

    Invite links' secrets too: ``/invite/<token>`` paths and ``invite=<token>``
    query values (``gateway.invites``).
    """

    _pattern = re.compile(r"(token=|invite=|/invite/)[^&\s\"'?]+")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            record.args = tuple(
                self._pattern.sub(r"\1[redacted]", a) if isinstance(a, str) else a
                for a in (record.args if isinstance(record.args, tuple) else (record.args,))
            )
        if isinstance(record.msg, str) and ("token=" in record.msg or "invite" in record.msg):
            record.msg = self._pattern.sub(r"\1[redacted]", record.msg)
        return True


class _QuietInvalidText(logging.Filter):
    """Log a text message that is not UTF-8 on one INFO line, without a traceback.

    uvicorn's WebSocket protocol already answers such a message correctly:
    it closes the connection with 1007 (invalid frame payload data). But it
    reports it with ``logger.exception``, so any client could fill the
    server log with tracebacks about its own bad input. The record is
    recognised by uvicorn's message; if a newer uvicorn words it differently
    this filter does nothing, and ``tests/test_gateway_ws.py`` says so.
    """

    MESSAGE = "Invalid UTF-8 sequence received from client."

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != self.MESSAGE or record.exc_info is None:
            return True
        record.msg = "closed a WebSocket with 1007: a text message was not UTF-8"
        record.args = ()
        record.exc_info = None
        record.exc_text = None
        record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
        # The level check ran for ERROR; run it again for what the record is now.
        return logging.getLogger(record.name).isEnabledFor(logging.INFO)


class _QuietPolls(logging.Filter):
    """Leave answered polls out of the access log.

    The web UI reads its unread counts (``GET /api/inbox``) at every
    connect and every return to the front (the rest is pushed), and probes
    ask for ``/healthz`` and ``/metrics``; logged, they bury the requests a
    person made. A poll that failed is still logged.
    The record is uvicorn's access line, whose arguments are ``(client,
    method, path, http version, status)``.
    """

    PATHS = ("/api/inbox", "/healthz", "/metrics")

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not isinstance(args, tuple) or len(args) != 5:
            return True
        _, method, path, _, status = args
        if method != "GET" or not isinstance(status, int) or status >= 400:
            return True
        return str(path).split("?", 1)[0] not in self.PATHS


def _add_once(logger: logging.Logger, kind: type[logging.Filter]) -> None:
    if not any(isinstance(f, kind) for f in logger.filters):
        logger.addFilter(kind())


def install_log_filters() -> None:
    """Token redaction on uvicorn's loggers, the 1007 line and quiet polls (each once)."""
    errors, access = logging.getLogger("uvicorn.error"), logging.getLogger("uvicorn.access")
    for logger in (errors, access):
        _add_once(logger, _RedactTokens)
    _add_once(errors, _QuietInvalidText)
    _add_once(access, _QuietPolls)
