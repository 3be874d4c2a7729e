"""Each agent saved before versions existed gets version 1, published, from its settings:
sessions go on getting exactly what they got before."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db import migrations

# As sessions_app.versions.VERSIONED_FIELDS was when this migration was written.
FIELDS = (
    "name", "instructions", "greeting", "voice", "mode", "llm_model", "llm_provider",
    "stt_provider", "tts_provider", "llm_fallbacks", "tts_fallbacks", "tools", "vocabulary",
    "empty_reply", "idle_timeout_s", "max_session_s", "knowledge_mode", "knowledge_timeout_ms",
    "tool_filler", "tool_filler_after_ms", "language",
)  # fmt: skip


def publish_existing(apps: Any, schema_editor: Any) -> None:
    Agent = apps.get_model("sessions_app", "Agent")
    AgentVersion = apps.get_model("sessions_app", "AgentVersion")
    for agent in Agent.objects.filter(published_version__isnull=True).iterator():
        config = {name: getattr(agent, name) for name in FIELDS}
        config["knowledge_base_ids"] = sorted(agent.knowledge_bases.values_list("pk", flat=True))
        text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
        version = AgentVersion.objects.create(
            workspace_id=agent.workspace_id, agent=agent, number=1, config=config,
            digest=hashlib.sha256(text.encode()).hexdigest(), note="before versions",
            created_by="system",
        )  # fmt: skip
        agent.published_version = version
        agent.save(update_fields=["published_version"])


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0015_agent_versions")]

    operations = [migrations.RunPython(publish_existing, migrations.RunPython.noop)]
