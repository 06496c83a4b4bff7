"""The deterministic safety gate a skill draft passes before a person may publish it.

:func:`check_draft` calls no model: the same draft always gets the same
report. A published skill is text every future VP run may be handed, so the
gate refuses what would be harmful to hand on, and says why in plain words:

- a name that is not a slug, an empty description or body, oversize text;
- anything that looks like a credential: provider API keys (``sk-``,
  ``AKIA``, ``ghp_``, ``xox?-``), private key blocks, and ``password=`` or
  ``api_key=`` assignments with a real value (placeholders such as
  ``$API_KEY`` or ``<your key>`` are fine);
- prompt-injection phrasing in English or Chinese ("ignore previous
  instructions", "you are now a ...", 忽略之前的指令 ...);
- destructive or remote-execution commands (``rm -rf /``, ``mkfs``, ``dd``
  onto a device, ``curl ... | sh``, ``chmod 777 /``, a fork bomb);
- tools the server does not know, when the caller says which it knows.

A problem never quotes a secret back: the report is shown to people.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

from protocol.tasks import SafetyReport, SkillDraft
from team.skills.loader import NAME_MAX, is_slug

__all__ = ["CONTENT_MAX", "DESCRIPTION_MAX", "check_draft", "check_text"]

CONTENT_MAX = 20_000
DESCRIPTION_MAX = 500

_SECRETS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an API key starting with 'sk-'", re.compile(r"\bsk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_]{20,}")),
    ("an AWS access key id (AKIA...)", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a GitHub token (ghp_...)", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}")),
    ("a Slack token (xox..-)", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a private key block", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")),
)
# ``password = value`` and friends. A value counts when it is not a
# placeholder; after a colon (as in prose: "Token: see below") it must also
# look machine-made (contain a digit), so ordinary sentences are not flagged.
_ASSIGNMENT = re.compile(
    r"(?i)\b(password|passwd|pwd|api[_-]?key|secret[_-]?key|secret|access[_-]?token|"
    r"auth[_-]?token|token)\b[\"']?\s*([=:])\s*[\"']?([^\s\"'`,;)]+)"
)
_PLACEHOLDER = re.compile(
    r"(?i)^(?:[$<{%]|\*+$|x+$|\.+$|none$|null$|true$|false$|"
    r".*(?:your|example|placeholder|redacted|changeme|environ|getenv|xxx))"
)

_INJECTION = (
    r"\b(?:ignore|forget|skip)\s+(?:all\s+|any\s+)?(?:of\s+)?(?:the\s+|your\s+)?"
    r"(?:previous|prior|above|earlier|preceding)\s+(?:instructions|prompts?|rules|messages)",
    r"\bdisregard\s+(?:all\s+|any\s+)?(?:of\s+)?(?:the\s+|your\s+)?(?:previous\s+|prior\s+|above\s+)?"
    r"(?:system\s+prompt|system\s+message|instructions|rules)",
    r"\boverride\s+(?:the\s+|your\s+)?system\s+(?:prompt|message|instructions)",
    r"\b(?:reveal|print|show|repeat|leak|output)\s+(?:the\s+|your\s+)?(?:hidden\s+)?"
    r"system\s+(?:prompt|message)",
    r"\byou\s+are\s+now\s+(?:a|an|no\s+longer|free|unrestricted|jailbroken|dan)\b",
    r"\byou\s+are\s+now\s+in\s+(?:developer|dan|god|jailbreak)\s+mode\b",
    r"\bdeveloper\s+mode\s+enabled\b",
    r"(?:忽略|无视|忘记|忘掉)(?:掉)?(?:之前|先前|以上|上述|前面|此前|所有|全部)(?:的)?(?:所有|全部)?"
    r"(?:的)?(?:指令|指示|提示词?|规则|要求|设定)",
    r"(?:忽略|无视)(?:你的)?系统提示词?",
    r"你现在是(?:一个|一名|一位|不受|没有|无限制)",
    r"(?:泄露|输出|打印|显示)(?:你的)?系统提示词?",
)
_INJECTION_PATTERNS = tuple(re.compile(p, re.IGNORECASE) for p in _INJECTION)

# A path that is the root or a home directory itself, not something inside it.
_ROOTISH = r"(?:/\*?|~/?\*?|\$HOME/?\*?)(?=$|[\s\"'`;|&)])"
_DESTRUCTIVE: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "deletes the whole file system or home directory (rm -rf /)",
        re.compile(r"\brm\s+(?:-{1,2}[a-zA-Z-]+\s+)+(?:--no-preserve-root\s+)?" + _ROOTISH),
    ),
    ("formats a disk (mkfs)", re.compile(r"\bmkfs(?:\.[a-z0-9]+)?\b")),
    (
        "overwrites a device with dd",
        re.compile(r"\bdd\b[^\n]*\bof=/dev/(?!null\b|zero\b|stdout\b|stderr\b)"),
    ),
    (
        "overwrites a disk device",
        re.compile(r">\s*/dev/(?:sd|hd|vd|xvd|nvme|disk|mmcblk)[a-z0-9]*"),
    ),
    (
        "pipes a downloaded script into a shell (curl | sh)",
        re.compile(
            r"\b(?:curl|wget)\b[^\n|]*\|\s*(?:sudo\s+)?"
            r"(?:(?:ba|z|k|da|fi)?sh|python3?|perl|ruby)\b"
        ),
    ),
    (
        'runs a downloaded script (sh -c "$(curl ...)")',
        re.compile(
            r"(?:\b(?:ba|z|k|da)?sh\s+(?:-[a-z]+\s+)*|\beval\s+|\bsource\s+)"
            r"[\"']?(?:\$\(|<\(|`)\s*(?:curl|wget)\b"
        ),
    ),
    (
        "makes the whole file system writable by everyone (chmod 777 /)",
        re.compile(r"\bchmod\s+(?:-[a-zA-Z]+\s+)*0?777\s+" + _ROOTISH),
    ),
    ("contains a fork bomb", re.compile(r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;?\s*:")),
)


def _secret_problems(field: str, text: str) -> Iterable[str]:
    for label, pattern in _SECRETS:
        if pattern.search(text):
            yield f"the {field} contains what looks like {label}; remove the secret"
    for match in _ASSIGNMENT.finditer(text):
        key, separator, value = match.groups()
        if _PLACEHOLDER.match(value) or len(value) < 4:
            continue
        if separator == ":" and not re.search(r"\d", value):
            continue
        yield (
            f"the {field} assigns a value to '{key}', which looks like a credential; "
            "use a placeholder such as $API_KEY instead"
        )
        return  # one such line is enough to say; the others are the same fix


def _injection_problems(field: str, text: str) -> Iterable[str]:
    for pattern in _INJECTION_PATTERNS:
        match = pattern.search(text)
        if match:
            yield (
                f"the {field} contains prompt-injection wording ({match.group(0)!r}); "
                "a skill must not try to override the instructions of the run that uses it"
            )


def _command_problems(field: str, text: str) -> Iterable[str]:
    for label, pattern in _DESTRUCTIVE:
        match = pattern.search(text)
        if match:
            shown = " ".join(match.group(0).split())[:60]
            yield f"the {field} has a command that {label}: {shown!r}"


def check_text(field: str, text: str) -> list[str]:
    """The secret, injection and command problems of one piece of text, ``field`` naming it."""
    return [
        *_secret_problems(field, text),
        *_injection_problems(field, text),
        *_command_problems(field, text),
    ]


def _shape_problems(draft: SkillDraft) -> Iterable[str]:
    if not is_slug(draft.name):
        yield (
            f"the name {draft.name!r} is not valid: use lowercase letters, digits and single "
            f"hyphens, at most {NAME_MAX} characters"
        )
    if not draft.description.strip():
        yield "the description is empty"
    elif len(draft.description) > DESCRIPTION_MAX:
        yield (
            f"the description is {len(draft.description)} characters long; "
            f"the limit is {DESCRIPTION_MAX}"
        )
    if not draft.content.strip():
        yield "the skill text (content) is empty"
    elif len(draft.content) > CONTENT_MAX:
        yield f"the content is {len(draft.content)} characters long; the limit is {CONTENT_MAX}"


def _tool_problems(tools: list[str], known_tools: Collection[str] | None) -> Iterable[str]:
    for tool in tools:
        if not tool.strip():
            yield "the tools list has an empty name"
        elif known_tools is not None and tool not in known_tools:
            yield f"the tool {tool!r} is not a tool this server knows"


def check_draft(draft: SkillDraft, known_tools: Collection[str] | None = None) -> SafetyReport:
    """Check ``draft`` against every rule; ``ok`` only when no problem was found.

    ``known_tools``: the tool names a skill may list; None skips that rule.
    """
    problems = [
        *_shape_problems(draft),
        *check_text("name", draft.name),
        *check_text("description", draft.description),
        *check_text("content", draft.content),
        *_tool_problems(draft.tools, known_tools),
    ]
    # The same wording found in two fields is two problems; the same one
    # twice in a field is said once.
    problems = list(dict.fromkeys(problems))
    return SafetyReport(ok=not problems, problems=problems)
