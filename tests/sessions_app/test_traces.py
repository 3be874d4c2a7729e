"""Traces of a real session: a typed turn with a server tool call, through the consumer, is
exported over OTLP/HTTP (the SDK's exporter, protobuf over HTTP) to a local receiver that
decodes what arrives, as a collector would."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from engine import tracing
from engine.tracing import otel
from tests.engine.providers.llm.openai import fake_server as fake_openai
from tests.factories import Tenant, make_tenant, order_tool
from tests.postcall_app.conftest import echo_tools  # noqa: F401  (the fixture)
from tests.sessions_app.wsclient import Client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("echo_tools")]


class _Receiver(BaseHTTPRequestHandler):
    spans: list[Any] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                type(self).spans.extend(scope.spans)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    _Receiver.spans = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    provider = otel.otlp_provider()
    previous = tracing.install(otel.OTelTracer(provider))
    yield _Receiver.spans
    tracing.install(previous)
    provider.shutdown()
    server.shutdown()


def _attributes(span: Any) -> dict[str, Any]:
    values = {}
    for attribute in span.attributes:
        value = attribute.value
        values[attribute.key] = getattr(value, value.WhichOneof("value"))
    return values


async def test_a_session_is_exported_as_spans_over_otlp(
    collector: list[Any], llm: fake_openai.FakeOpenAIServer, transactional_db: None
) -> None:
    tenant: Tenant = await sync_to_async(make_tenant)("traces@example.com")
    llm.script(
        *fake_openai.tool_call(0, "call_1", "track_order", json.dumps({"order_number": "77"})),
        fake_openai.Finish("tool_calls"),
        fake_openai.Done(),
    )
    llm.script(fake_openai.text_reply("Order 77 has shipped."))
    configure = {"type": "configure", "mode": "text", "tools": [order_tool()]}
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send(configure)
        ready = await client.until("ready")
        await client.send({"type": "text", "text": "Where is order 77?"})
        await client.until("metrics")
    tracing_provider = tracing.tracer()
    assert isinstance(tracing_provider, otel.OTelTracer)
    assert tracing_provider.force_flush()

    spans = {span.name: span for span in collector}
    assert {"voice.session", "voice.turn", "voice.tool_call", "voice.llm_request"} <= set(spans)
    session, turn = spans["voice.session"], spans["voice.turn"]
    assert _attributes(session)["session.id"] == ready["sessionId"]
    assert turn.parent_span_id == session.span_id and turn.trace_id == session.trace_id
    assert _attributes(spans["voice.tool_call"])["tool.name"] == "track_order"
    assert _attributes(spans["voice.llm_request"])["llm.provider"].startswith("platform:")
    everything = repr([_attributes(span) for span in collector])
    assert "Order 77" not in everything and "order_number" not in everything
