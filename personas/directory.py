"""The persona directory: name lookups that notice new persona files.

A person may drop ``<id>.md`` into the persona directory while the system
runs and then ``@mention`` the new VP. So a lookup that misses re-reads the
persona files and tries again, but at most once per ``reload_after_s``
(measured on the injected clock): a message full of typos must not turn
into a file-system scan per name. Every reload of the persona files in a
running process happens here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from personas.loader import PersonaLibrary, load_personas
from personas.model import Persona

log = logging.getLogger(__name__)

# How often an unknown name may trigger a reload of the persona files.
PERSONA_RELOAD_S = 1.0


class PersonaDirectory:
    """A :class:`PersonaLibrary` that reloads itself when asked for an unknown name.

    Invariants: ``library`` is always a complete library (a reload replaces it
    in one assignment); two reloads are more than ``reload_after_s`` apart
    on ``clock``; a name that is found never causes a reload.
    """

    def __init__(
        self,
        load: Callable[[], PersonaLibrary],
        *,
        clock: Callable[[], float] = time.monotonic,
        reload_after_s: float = PERSONA_RELOAD_S,
    ) -> None:
        self._load = load
        self._clock = clock
        self.reload_after_s = reload_after_s
        self.library = load()
        self._loaded_at = clock()

    @classmethod
    def open(
        cls,
        user_dir: Path | str | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        reload_after_s: float = PERSONA_RELOAD_S,
    ) -> PersonaDirectory:
        """The built-in personas plus ``user_dir``'s files (see :func:`load_personas`)."""
        path = Path(user_dir) if user_dir else None
        return cls(lambda: load_personas(path), clock=clock, reload_after_s=reload_after_s)

    def lookup(self, name: str) -> Persona | None:
        """The persona ``name`` means (an id, an alias or ``vp-<id>``, any case), or None.

        On a miss the files are read again when the last read is older than
        ``reload_after_s``.
        """
        persona = self.library.resolve(name)
        if persona is None and self._clock() - self._loaded_at > self.reload_after_s:
            self.reload()
            persona = self.library.resolve(name)
        return persona

    def resolve(self, name: str) -> str | None:
        """The persona id ``name`` means, or None; the ``resolve`` of ``select_targets``."""
        persona = self.lookup(name)
        return persona.id if persona is not None else None

    def reload(self) -> PersonaLibrary:
        """Read the persona files again now, and return the new library."""
        self.library = self._load()
        self._loaded_at = self._clock()
        log.debug("persona files reloaded: %s personas", len(self.library))
        return self.library

    def ids(self) -> list[str]:
        """Every persona id currently known, sorted (no reload)."""
        return self.library.ids()
