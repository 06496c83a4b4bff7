"""Tokenising memory text and queries, shared by both backends.

Two kinds of terms come out of a text:

- words of alphabetic scripts, lower-cased and lightly stemmed, so
  "deadlines", "deadline" and "Deadline" meet;
- overlapping character bigrams of CJK runs. Chinese and Japanese are written
  without spaces and most words are two characters long, so a bigram index
  finds a word wherever it occurs without needing a dictionary.

The SQLite backend indexes ``fts_document`` (words and bigrams, spaced) and
lets FTS5's ``porter unicode61`` tokenizer stem the words; the Redis backend,
which has no full-text engine, takes everything from here. The light stemmer
below is not Porter's, but it conflates the same common forms (plurals, -ed,
-ing, -ment, -ence), which is what matters for recall.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

# Letters and digits; "_" and punctuation separate words, like FTS5's unicode61.
_WORD = re.compile(r"[^\W_]+")

# Han (with extensions and compatibility ideographs), kana and Hangul.
_CJK_RANGES = (
    (0x3040, 0x30FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0x20000, 0x3134F),
)

# Words too common to say anything about a topic. They are still indexed (a
# query of nothing but stop words still finds something) but left out of
# queries, where in an OR query they would only add noise.
STOP_WORDS = frozenset(
    """
    a about after all also am an and any are as at be been before being but by
    can could did do does doing for from had has have having he her here hers
    him his how i if in into is it its just me my no not now of on or our ours
    out over said she should so some than that the their them then there these
    they this those to too up us very was we were what when where which while
    who whom why will with would you your yours
    """.split()
)

# A query longer than this many distinct terms is cut: beyond it a user is
# pasting text, not asking, and every extra term only slows the search.
MAX_QUERY_TERMS = 32

# (suffix, replacement), longest first within each group; the first that
# fits wins. A rule applies only when at least three letters remain.
_SUFFIXES = (
    ("ational", "ate"),
    ("ization", "ize"),
    ("fulness", "ful"),
    ("iveness", "ive"),
    ("ousness", "ous"),
    ("ements", ""),
    ("ement", ""),
    ("ments", ""),
    ("ment", ""),
    ("ences", ""),
    ("ence", ""),
    ("ances", ""),
    ("ance", ""),
    ("ings", ""),
    ("ing", ""),
    ("edly", ""),
    ("ies", "y"),
    ("ied", "y"),
    ("sses", "ss"),
    ("ed", ""),
)
# Endings that look like plurals but are not ("status", "analysis", "class").
_NOT_PLURAL = ("ss", "us", "is")


_CJK_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _CJK_RANGES)
# One run of CJK characters (group 1), or of any others (group 2).
_SCRIPT_RUN = re.compile(f"([{_CJK_CLASS}]+)|([^{_CJK_CLASS}]+)")


def normalise(text: str) -> str:
    """NFKC and lower case; full-width Latin and digits become ASCII."""
    return unicodedata.normalize("NFKC", text).lower()


def _segments(text: str) -> Iterator[tuple[str, bool]]:
    """Runs of letters/digits, split where the script changes to or from CJK."""
    for match in _WORD.finditer(normalise(text)):
        for part in _SCRIPT_RUN.finditer(match.group()):
            yield part.group(), part.group(1) is not None


def bigrams(run: str) -> list[str]:
    """Overlapping bigrams of one CJK run; a lone character stands alone."""
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def stem(word: str) -> str:
    """A light suffix-stripping stemmer for English words."""
    if len(word) <= 3 or not (word.isascii() and word.isalpha()):
        return word
    for suffix, repl in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + repl
            break
    else:
        if word.endswith("s") and not word.endswith(_NOT_PLURAL):
            word = word[:-1]
    # "planned" -> "plann" -> "plan"; but keep "call", "pass", "buzz".
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouyslz":
        word = word[:-1]
    # "decide"/"decided" and "city"/"cities" end the same after these two.
    if len(word) > 4 and word.endswith("e"):
        word = word[:-1]
    if len(word) > 3 and word.endswith("y"):
        word = word[:-1] + "i"
    return word


def words(text: str) -> list[str]:
    """The non-CJK words of a text, normalised but not stemmed."""
    return [seg for seg, cjk in _segments(text) if not cjk]


def cjk_terms(text: str) -> list[str]:
    """The bigrams of every CJK run in a text."""
    out: list[str] = []
    for seg, cjk in _segments(text):
        if cjk:
            out.extend(bigrams(seg))
    return out


def fts_document(text: str) -> str:
    """A text as the SQLite index sees it: its words and CJK bigrams.

    Words stay unstemmed (FTS5's porter tokenizer stems them); the spaces
    also split a word off the Chinese it is written against ("用PostgreSQL做"),
    which unicode61 on the raw text would keep as one token.
    """
    out: list[str] = []
    for seg, cjk in _segments(text):
        out.extend(bigrams(seg) if cjk else [seg])
    return " ".join(out)


def index_terms(text: str) -> list[str]:
    """Every term of a text as the Redis index stores it (with repeats)."""
    out: list[str] = []
    for seg, cjk in _segments(text):
        out.extend(bigrams(seg) if cjk else [stem(seg)])
    return out


def _query_words(query: str) -> list[str]:
    found = words(query)
    kept = [w for w in found if w not in STOP_WORDS]
    # A query of nothing but stop words ("what is it?") still means something.
    return kept or found


def query_terms(query: str) -> list[str]:
    """Distinct index terms of a query, stop words dropped, at most 32."""
    terms = [stem(w) for w in _query_words(query)] + cjk_terms(query)
    return list(dict.fromkeys(terms))[:MAX_QUERY_TERMS]


def fts_query(query: str) -> str | None:
    """An FTS5 MATCH expression that ORs the query's terms; ``None`` if none.

    Every term is a quoted string built only from letters and digits, so
    quotes, parentheses, ``*``, ``:``, ``-``, ``^`` and the words AND, OR, NOT
    and NEAR that a user types are never read as FTS5 syntax, and MATCH never
    raises on user input. Words stay unstemmed: FTS5 stems them itself.
    """
    terms = list(dict.fromkeys(_query_words(query) + cjk_terms(query)))[:MAX_QUERY_TERMS]
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
