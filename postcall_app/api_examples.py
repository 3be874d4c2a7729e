"""Examples of the analysis and retention operations for the OpenAPI schema
(``tests/test_openapi.py`` checks each against its schema and sends each request example)."""

from __future__ import annotations

from typing import Any

from core.api_examples import invalid, request, response

_RETENTION: dict[str, Any] = {
    "transcripts_days": 30,
    "tool_logs_days": 7,
    "analysis_days": 90,
    "recordings_days": 30,
    "zero_retention": False,
    "redact_transcripts": True,
}
RETENTION = [response("A workspace's retention", _RETENTION)]
RETENTION_UPDATE = [
    request(
        "Keep transcripts 30 days, redacted", {"transcripts_days": 30, "redact_transcripts": True}
    ),
    response("The retention after the change", _RETENTION),
    invalid("transcripts_days", "Ensure this value is greater than or equal to 1."),
]
ANALYSIS_PENDING = [
    response(
        "The analysis, queued",
        {
            "status": "pending",
            "summary": "",
            "criteria": [],
            "data": {},
            "error": "",
            "requested_at": "2025-06-03T14:10:00Z",
            "completed_at": None,
        },
        202,
    )
]
