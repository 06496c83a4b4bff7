"""Redis client errors as store errors (unreachable or failed), for every Redis module."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from store.base import StoreError, StoreUnavailable


@contextlib.contextmanager
def redis_errors() -> Iterator[None]:
    try:
        yield
    except (RedisConnectionError, RedisTimeoutError) as exc:
        # Refused, dropped or timed out, or a server still loading its data
        # (BusyLoadingError is a ConnectionError): worth retrying later.
        raise StoreUnavailable(f"redis store unavailable: {exc}") from exc
    except RedisError as exc:
        raise StoreError(f"redis store: {exc}") from exc
