"""Agent cards: a group, and each VP in it, described as A2A agents.

A group's card is named after the group; its skills are its VPs, one per
VP, from the persona (name, role, area, traits, the ``@id`` that addresses
it). A VP's card is the persona itself, with one skill. Both name one
JSON-RPC interface at the agent's URL and one security scheme: the
gateway's bearer token (``Authorization: Bearer <token>``, the token
``POST /api/login`` returns).
"""

from __future__ import annotations

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol

from personas.loader import PersonaLibrary
from store.base import Group

SCHEME = "yeaftBearer"
VERSION = "1.0.0"
_MODES = ["text/plain"]


def vp_skill(personas: PersonaLibrary, vp_id: str, group_name: str) -> AgentSkill:
    """One VP as a skill: who it is, and how a message addresses it."""
    persona = personas.get(vp_id)
    if persona is None:
        return AgentSkill(
            id=vp_id,
            name=vp_id,
            description=f"{vp_id}, a VP of {group_name}",
            tags=["vp"],
            examples=[f"@{vp_id} what do you think?"],
        )
    about = f"{persona.name}, {persona.role} ({persona.area})"
    if persona.traits:
        about += ": " + ", ".join(persona.traits)
    return AgentSkill(
        id=persona.id,
        name=f"{persona.name} ({persona.role})",
        description=about,
        tags=[persona.area, *persona.traits],
        examples=[f"@{persona.id} what do you think?"],
        input_modes=_MODES,
        output_modes=_MODES,
    )


def _card(name: str, description: str, url: str, skills: list[AgentSkill]) -> AgentCard:
    # The bearer scheme with no scopes: the token is all there is.
    requirement = SecurityRequirement(schemes={SCHEME: StringList(list=[])})
    card = AgentCard(
        name=name,
        description=description,
        version=VERSION,
        provider=AgentProvider(organization="Yeaft", url=url.split("/a2a/", 1)[0]),
        supported_interfaces=[
            AgentInterface(
                url=url,
                protocol_binding=TransportProtocol.JSONRPC,
                protocol_version=PROTOCOL_VERSION_1_0,
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=_MODES,
        default_output_modes=_MODES,
        skills=skills,
        security_requirements=[requirement],
    )
    card.security_schemes[SCHEME].CopyFrom(
        SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="Bearer",
                bearer_format="JWT",
                description="The gateway's session token (POST /api/login), as for /api",
            )
        )
    )
    return card


def group_card(personas: PersonaLibrary, group: Group, url: str) -> AgentCard:
    """The card of a group: its VPs are its skills."""
    names = ", ".join(f"@{vp}" for vp in group.roster) or "no VPs yet"
    description = (
        f"The Yeaft group {group.name!r}: a team of VPs ({names}). A message is yours in "
        "the group; @name addresses a VP, and each addressed VP's reply is an artifact "
        "named by the VP."
    )
    skills = [vp_skill(personas, vp, group.name) for vp in group.roster]
    return _card(group.name, description, url, skills)


def vp_card(personas: PersonaLibrary, group: Group, vp_id: str, url: str) -> AgentCard:
    """The card of one VP in a group: a message to it addresses that VP."""
    skill = vp_skill(personas, vp_id, group.name)
    persona = personas.get(vp_id)
    name = persona.name if persona is not None else vp_id
    description = (
        f"{skill.description}. A VP of the Yeaft group {group.name!r}: a message here is "
        f"yours in the group, addressed to @{vp_id}."
    )
    return _card(name, description, url, [skill])
