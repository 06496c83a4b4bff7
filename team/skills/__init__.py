"""Skills for team mode: markdown procedures a VP is handed for a run.

- :mod:`~team.skills.loader`: skill files (front matter and body) and the
  :class:`SkillLibrary` of built-in, data-directory and learned skills;
- :mod:`~team.skills.retrieve`: narrowing a library to the skills related to
  a query (BM25, or embeddings from an offline model);
- :mod:`~team.skills.select`: the model choosing among those, for a team node
  (:func:`resolve_node_skills`) or a single run (:func:`assemble_skills`), and
  the message that activates a chosen skill;
- :mod:`~team.skills.guidance`: one-off guidance for a node no skill fits;
- :mod:`~team.skills.drafts`: a skill draft learned from an accepted task;
- :mod:`~team.skills.safety`: the deterministic check every draft passes.

Nothing here imports Ray or a layer above ``team``; every model call goes
through a :class:`team.calls.Complete` the caller supplies.
"""

from team.skills.drafts import (
    choose_action,
    evidence_tool_names,
    related_skills,
    render_attempts,
    synthesize_draft,
)
from team.skills.guidance import EPHEMERAL_PREFIX, ephemeral_guidance, fallback_guidance
from team.skills.loader import (
    SkillFileError,
    SkillLibrary,
    is_slug,
    parse_skill,
    render_skill,
    slugify,
    strip_front_matter,
)
from team.skills.retrieve import BM25Retriever, Embedder, EmbeddingRetriever, Retriever, tokenize
from team.skills.safety import check_draft
from team.skills.select import (
    activation_message,
    assemble_skills,
    node_skill_query,
    pick_names,
    resolve_node_skills,
)

__all__ = [
    "EPHEMERAL_PREFIX",
    "BM25Retriever",
    "Embedder",
    "EmbeddingRetriever",
    "Retriever",
    "SkillFileError",
    "SkillLibrary",
    "activation_message",
    "assemble_skills",
    "check_draft",
    "choose_action",
    "ephemeral_guidance",
    "evidence_tool_names",
    "fallback_guidance",
    "is_slug",
    "node_skill_query",
    "parse_skill",
    "pick_names",
    "related_skills",
    "render_attempts",
    "render_skill",
    "resolve_node_skills",
    "slugify",
    "strip_front_matter",
    "synthesize_draft",
    "tokenize",
]
