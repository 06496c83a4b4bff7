"""Skill retrieval by embeddings: the real ``openai`` SDK against the fake server's /embeddings.

A deployment that names an ``embedding_model`` recalls skills by the cosine
of their embeddings; without one, or when the embedding model fails, BM25
recalls them. The fake server's vectors count a few words
(:attr:`FakeLLM.embedding_words`), so which skills are recalled is known.
"""

from __future__ import annotations

from pathlib import Path

from coordinator.commands import Ingest, TeamIdle
from engine.embeddings import ModelEmbedder, open_embedder
from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from engine.settings import EngineConfig
from protocol.settings import GroupSettingsPatch
from protocol.tasks import Skill, SkillSource
from team.skills import BM25Retriever, EmbeddingRetriever
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import ROSTER

ZEBRA = """---
name: zebra-rollout
description: Roll a product out to a herd of testers first
---

1. Pick a zebra cohort.
2. Widen it week by week.
"""


def library() -> list[Skill]:
    def skill(name: str, text: str) -> Skill:
        return Skill(name=name, description=text, content=text, source=SkillSource.DATA)

    return [skill("zebra-care", "feed the zebra"), skill("launch-plan", "plan a launch")]


def embedding_config(fake: FakeLLM) -> EngineConfig:
    return EngineConfig(embedding_model="openai:embed-test", openai_base_url=fake.base_url)


async def test_embeddings_rank_skills_through_the_openai_sdk(fake_llm: FakeLLM) -> None:
    fake_llm.embedding_words = ("zebra",)
    embedder = open_embedder(embedding_config(fake_llm))
    assert isinstance(embedder, ModelEmbedder)
    try:
        ranked = await EmbeddingRetriever(embedder).rank("a zebra launch", library(), 5)
    finally:
        await embedder.aclose()
    # Only the zebra axis counts: "launch" is not a word the model knows.
    assert [s.name for s in ranked] == ["zebra-care"]
    calls = [r for r in fake_llm.requests if r.path == "/v1/embeddings"]
    assert [c.body["model"] for c in calls] == ["embed-test", "embed-test"]
    assert calls[1].body["encoding_format"] == "float"
    assert open_embedder(EngineConfig()) is None  # no embedding model: BM25


async def test_a_failing_embedding_model_falls_back_to_bm25(fake_llm: FakeLLM) -> None:
    fake_llm.embedding_words = ("zebra",)
    fake_llm.embedding_error = 503
    embedder = open_embedder(embedding_config(fake_llm))
    assert embedder is not None
    try:
        ranked = await EmbeddingRetriever(embedder).rank("plan a launch", library(), 5)
    finally:
        await embedder.aclose()
    assert ranked == BM25Retriever().ranked("plan a launch", library(), 5)
    assert [s.name for s in ranked] == ["launch-plan"]


def candidates_picked(request: ModelRequest) -> Reply:
    """Skill selection picks every candidate shown; a plan of one VP."""
    purpose = request.context.purpose
    prompt = str(request.messages[-1].content)
    if purpose == "team.router":
        return Reply('{"action": "new_task", "reason": "r", "short_title": "Rollout"}')
    if purpose == "team.planner":
        return Reply('{"mode": "single", "vp": "steve", "reason": "one voice"}')
    if isinstance(purpose, str) and purpose.startswith("team.skills"):
        shown = prompt.split("Candidate skills:\n")[1].split("\n\nReturn only")[0]
        names = [line[2:].split(":")[0] for line in shown.splitlines() if line.startswith("- ")]
        return Reply(str(names).replace("'", '"'))
    return Reply("done")


async def test_a_deployment_with_an_embedding_model_recalls_skills_by_embeddings(
    make_runtime: MakeRuntime, fake_llm: FakeLLM
) -> None:
    fake_llm.embedding_words = ("zebra",)
    rt = make_runtime(
        provider_overrides={"offline": ScriptedModel(candidates_picked)},
        engine={"embedding_model": "openai:embed-test", "openai_base_url": fake_llm.base_url},
    )
    skills = Path(rt.config.store.data_dir) / "skills"
    skills.mkdir(parents=True, exist_ok=True)
    (skills / "zebra-rollout.md").write_text(ZEBRA, encoding="utf-8")
    group = await rt.create_group("herd", ROSTER, settings=GroupSettingsPatch(team_mode=True))
    await rt.send(Ingest(group.id, "ann", "Plan the zebra rollout of our product launch"))
    await rt.send(TeamIdle(group.id))
    store = await rt.store()
    [task] = await store.list_tasks(group.id)
    assert task.attempt is not None
    [run] = task.attempt.runs
    # BM25 would also recall launch-plan ("plan", "launch"); the embeddings know only zebras.
    assert [s.name for s in run.skills] == ["zebra-rollout"]
    assert any(r.path == "/v1/embeddings" for r in fake_llm.requests)
