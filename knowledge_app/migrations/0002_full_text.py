"""The chunks' full-text index, in each database's own kind (``search._full_text``).

PostgreSQL: a generated ``tsvector`` column (English stemming) with a GIN index, kept by
the database on every insert. SQLite: an FTS5 table over the chunk table's text (external
content), kept by triggers.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

POSTGRES = [
    "ALTER TABLE knowledge_app_chunk ADD COLUMN search tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english', text)) STORED",
    "CREATE INDEX knowledge_app_chunk_search ON knowledge_app_chunk USING gin (search)",
]
SQLITE = [
    "CREATE VIRTUAL TABLE knowledge_app_chunk_fts USING fts5("
    "text, content='knowledge_app_chunk', content_rowid='id', tokenize='porter unicode61')",
    "CREATE TRIGGER knowledge_app_chunk_fts_insert AFTER INSERT ON knowledge_app_chunk BEGIN "
    "INSERT INTO knowledge_app_chunk_fts(rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER knowledge_app_chunk_fts_delete AFTER DELETE ON knowledge_app_chunk BEGIN "
    "INSERT INTO knowledge_app_chunk_fts(knowledge_app_chunk_fts, rowid, text) "
    "VALUES ('delete', old.id, old.text); END",
    "CREATE TRIGGER knowledge_app_chunk_fts_update AFTER UPDATE ON knowledge_app_chunk BEGIN "
    "INSERT INTO knowledge_app_chunk_fts(knowledge_app_chunk_fts, rowid, text) "
    "VALUES ('delete', old.id, old.text); "
    "INSERT INTO knowledge_app_chunk_fts(rowid, text) VALUES (new.id, new.text); END",
]
UNDO = {
    "postgresql": ["ALTER TABLE knowledge_app_chunk DROP COLUMN search"],
    "sqlite": [
        "DROP TRIGGER knowledge_app_chunk_fts_insert",
        "DROP TRIGGER knowledge_app_chunk_fts_delete",
        "DROP TRIGGER knowledge_app_chunk_fts_update",
        "DROP TABLE knowledge_app_chunk_fts",
    ],
}


def _run(statements: dict[str, list[str]]) -> Any:
    def run(apps: Any, schema_editor: Any) -> None:
        for statement in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("knowledge_app", "0001_initial")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": POSTGRES, "sqlite": SQLITE}), _run(UNDO), elidable=False
        )
    ]
