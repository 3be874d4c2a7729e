"""REST API for knowledge bases, their documents, a search, an agent's knowledge, and the
workspace's embedding connections (a base's own embedding provider)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import exceptions, serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.parsers import JsonParser
from core.serializers import StrictSerializer, django_errors_as_drf
from knowledge_app import api_examples as examples
from knowledge_app import search, selectors, services
from knowledge_app.models import Document, KnowledgeBase
from secrets_app.audit import actor_for_request
from secrets_app.authentication import request_workspace
from secrets_app.models import ProviderCredential
from sessions_app import selectors as agent_selectors

SCOPE = "knowledge"


class EmbeddingOutput(serializers.Serializer):  # type: ignore[type-arg]
    connection = serializers.CharField(
        allow_null=True, help_text="The embedding connection's name; null: the offline model."
    )
    model = serializers.CharField(help_text="The model, and the connection serving it.")
    documents = serializers.IntegerField(help_text="Documents with passages.")
    embedded = serializers.IntegerField(
        help_text="Of them, embedded with this model; the others are found by full text "
        "alone until their re-indexing reaches them."
    )
    reindexing = serializers.BooleanField()


class KnowledgeBaseOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    id = serializers.UUIDField(source="uid")
    documents = serializers.SerializerMethodField()
    embedding = serializers.SerializerMethodField()

    class Meta:
        model = KnowledgeBase
        fields = ["id", "name", "description", "documents", "embedding", "created_at"]

    def get_documents(self, base: KnowledgeBase) -> int:
        return base.documents.count()

    @extend_schema_field(EmbeddingOutput)
    def get_embedding(self, base: KnowledgeBase) -> dict[str, Any]:
        state = selectors.embedding_status(base=base)
        return {**EmbeddingOutput(state).data, "reindexing": state.reindexing}


class BaseEmbeddingInput(StrictSerializer):
    connection = serializers.CharField(
        max_length=64, allow_null=True, allow_blank=True,
        help_text="The name of one of the workspace's embedding connections; null or \"\": "
        "the offline model. Another model re-indexes the base's documents in the background.",
    )  # fmt: skip


class EmbeddingConnectionOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    has_key = serializers.BooleanField(
        help_text="Whether a key is saved. The key itself is never shown again."
    )

    class Meta:
        model = ProviderCredential
        fields = ["name", "base_url", "model", "has_key", "created_at", "updated_at"]


class EmbeddingConnectionInput(StrictSerializer):
    name = serializers.CharField(
        max_length=64, help_text="How knowledge bases choose it, like openai-small."
    )
    base_url = serializers.CharField(
        max_length=500,
        help_text="An OpenAI-compatible API: POST {base_url}/embeddings. Public addresses "
        "only (the egress guard).",
    )
    model = serializers.CharField(max_length=100)
    api_key = serializers.CharField(
        required=False, allow_blank=True, write_only=True, trim_whitespace=False,
        help_text="Sent as Authorization: Bearer, to this base URL's host only. Absent when "
        "changing a connection: the saved key is kept.",
    )  # fmt: skip


class KnowledgeBaseInput(StrictSerializer):
    name = serializers.CharField(max_length=100)
    description = serializers.CharField(max_length=500, required=False, allow_blank=True)


class DocumentOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    id = serializers.UUIDField(source="uid")

    class Meta:
        model = Document
        fields = [
            "id", "title", "kind", "url", "size_bytes", "status", "progress", "error",
            "characters", "chunk_count", "created_at", "fetched_at", "indexed_at",
            "refresh_hours", "refresh_due_at",
        ]  # fmt: skip


class DocumentInput(StrictSerializer):
    file = serializers.FileField(
        required=False, help_text="The document (PDF, Markdown, text, HTML or DOCX)."
    )
    url = serializers.CharField(
        max_length=500, required=False,
        help_text="Or a public http(s) URL, fetched by the indexing job through the egress "
        "guard.",
    )  # fmt: skip
    title = serializers.CharField(max_length=200, required=False, allow_blank=True)
    refresh_hours = serializers.IntegerField(
        min_value=0, max_value=services.REFRESH_MAX_HOURS, required=False,
        help_text="A URL's: fetch it again every so many hours (at least "
        "KNOWLEDGE_REFRESH_MIN_HOURS, 1 by default); 0 or absent: only on refresh.",
    )  # fmt: skip

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if ("file" in data) == ("url" in data):
            raise serializers.ValidationError({"file": ["send a file or a url (one of them)"]})
        if data.get("refresh_hours") and "url" not in data:
            raise serializers.ValidationError({"refresh_hours": ["only a url is fetched again"]})
        return data


class DocumentScheduleInput(StrictSerializer):
    refresh_hours = serializers.IntegerField(
        min_value=0, max_value=services.REFRESH_MAX_HOURS,
        help_text="Fetch this URL document again every so many hours (at least "
        "KNOWLEDGE_REFRESH_MIN_HOURS, 1 by default); 0: only on refresh.",
    )  # fmt: skip


class SearchInput(StrictSerializer):
    query = serializers.CharField(max_length=search.QUERY_MAX_CHARS)
    k = serializers.IntegerField(min_value=1, max_value=20, default=5)


class PassageOutput(serializers.Serializer):  # type: ignore[type-arg]
    def get_fields(self) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
        # "source" is a Field attribute, so this field cannot be declared as one.
        return {
            "source": serializers.CharField(
                help_text="How chat steps and records name it: K<chunk>."
            ),
            **super().get_fields(),
        }

    document_id = serializers.UUIDField(source="document_uid")
    document = serializers.CharField(source="document_title")
    position = serializers.IntegerField(help_text="The passage's place in its document: 1, 2…")
    text = serializers.CharField()
    score = serializers.FloatField(help_text="Reciprocal-rank-fusion score; higher is better.")


class AgentKnowledgeInput(StrictSerializer):
    knowledge_bases = serializers.ListField(
        child=serializers.CharField(max_length=36), max_length=20,
        help_text="Ids of the workspace's knowledge bases; [] detaches them all.",
    )  # fmt: skip
    mode = serializers.ChoiceField(
        choices=services.MODES, default="tool",
        help_text="tool: the LLM calls search_knowledge; prefetch: the platform searches "
        "with the user's words before each turn's first LLM request.",
    )  # fmt: skip


class AgentKnowledgeOutput(serializers.Serializer):  # type: ignore[type-arg]
    knowledge_bases = serializers.ListField(child=serializers.UUIDField())
    mode = serializers.ChoiceField(choices=services.MODES)


def _base(request: Request, knowledge_base_id: str) -> KnowledgeBase:
    return selectors.knowledge_base_get(workspace=request_workspace(request), uid=knowledge_base_id)


@extend_schema(tags=["Knowledge bases"])
class KnowledgeBaseListApi(APIView):
    scopes = {"GET": SCOPE, "POST": SCOPE}

    @extend_schema(
        summary="List knowledge bases",
        description="The workspace's knowledge bases and how many documents each holds.",
        responses=KnowledgeBaseOutput(many=True),
        examples=examples.BASE_LIST,
    )
    def get(self, request: Request) -> Response:
        bases = selectors.knowledge_base_list(workspace=request_workspace(request))
        return Response(KnowledgeBaseOutput(bases, many=True).data)

    @extend_schema(
        summary="Create a knowledge base",
        description="An empty knowledge base; add documents to it, then attach it to agents.",
        request=KnowledgeBaseInput,
        responses={201: KnowledgeBaseOutput},
        examples=examples.BASE_CREATE,
    )
    def post(self, request: Request) -> Response:
        data = KnowledgeBaseInput(data=request.data)
        data.is_valid(raise_exception=True)
        with django_errors_as_drf("name"):
            base = services.knowledge_base_create(
                workspace=request_workspace(request), actor=actor_for_request(request),
                **data.validated_data,
            )  # fmt: skip
        return Response(KnowledgeBaseOutput(base).data, status=status.HTTP_201_CREATED)


@extend_schema(tags=["Knowledge bases"])
class KnowledgeBaseDetailApi(APIView):
    scopes = {"GET": SCOPE, "DELETE": SCOPE}

    @extend_schema(
        summary="Get a knowledge base",
        description="One knowledge base of the workspace, by its id.",
        responses=KnowledgeBaseOutput,
        examples=examples.BASE_DETAIL,
    )
    def get(self, request: Request, knowledge_base_id: str) -> Response:
        return Response(KnowledgeBaseOutput(_base(request, knowledge_base_id)).data)

    @extend_schema(
        summary="Delete a knowledge base",
        description="The knowledge base, its documents and their passages; agents that "
        "had it attached answer without it from their next session on.",
        responses={204: None},
    )
    def delete(self, request: Request, knowledge_base_id: str) -> Response:
        base = _base(request, knowledge_base_id)
        services.knowledge_base_delete(base=base, actor=actor_for_request(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["Knowledge bases"])
class DocumentListApi(APIView):
    scopes = {"GET": SCOPE, "POST": SCOPE}
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        summary="List a knowledge base's documents",
        description="Each document with its indexing status (`pending`, `indexing` with "
        "`progress` in percent, `ready`, `failed` with the reason in `error`).",
        responses=DocumentOutput(many=True),
        examples=examples.DOCUMENT_LIST,
    )
    def get(self, request: Request, knowledge_base_id: str) -> Response:
        documents = selectors.document_list(base=_base(request, knowledge_base_id))
        return Response(DocumentOutput(documents, many=True).data)

    @extend_schema(
        summary="Add a document",
        description="A `file` (multipart upload: PDF, Markdown, plain text, HTML or DOCX) "
        "or a `url`: a URL the egress guard's rules refuse as written (a private address, a "
        "port off `EGRESS_PORTS`) is refused now; otherwise the document is `pending` and the "
        "indexing job fetches it through the guard after the answer (a failed fetch is the "
        "document's `error`). `refresh_hours` fetches a URL again on a schedule. Poll the "
        "document for its status. Limits: docs/limits.md.",
        request={"multipart/form-data": DocumentInput},
        responses={201: DocumentOutput},
        examples=examples.DOCUMENT_CREATED,
    )
    def post(self, request: Request, knowledge_base_id: str) -> Response:
        base = _base(request, knowledge_base_id)
        data = DocumentInput(data=request.data)
        data.is_valid(raise_exception=True)
        values, actor = data.validated_data, actor_for_request(request)
        with django_errors_as_drf("file"):
            if "url" in values:
                document = services.document_add_url(
                    base=base, url=values["url"], title=values.get("title", ""),
                    refresh_hours=values.get("refresh_hours", 0), actor=actor,
                )  # fmt: skip
            else:
                upload = values["file"]
                content = services.upload_read(file=upload)
                document = services.document_upload(
                    base=base, filename=upload.name or "", content=content,
                    content_type=upload.content_type or "", title=values.get("title", ""),
                    actor=actor,
                )  # fmt: skip
        return Response(DocumentOutput(document).data, status=status.HTTP_201_CREATED)


@extend_schema(tags=["Knowledge bases"])
class DocumentDetailApi(APIView):
    scopes = {"GET": SCOPE, "PATCH": SCOPE, "DELETE": SCOPE}
    parser_classes = [JsonParser]

    @extend_schema(
        summary="Get a document",
        description="One document, with its indexing status and progress.",
        responses=DocumentOutput,
        examples=examples.DOCUMENT_DETAIL,
    )
    def get(self, request: Request, knowledge_base_id: str, document_id: str) -> Response:
        base = _base(request, knowledge_base_id)
        return Response(DocumentOutput(selectors.document_get(base=base, uid=document_id)).data)

    @extend_schema(
        summary="Change a URL document's refresh",
        description="`refresh_hours`: how often Celery beat fetches the URL again (0: "
        "never on its own). The next fetch is due that long after the last one. An uploaded "
        "document answers 400.",
        request=DocumentScheduleInput,
        responses=DocumentOutput,
        examples=examples.DOCUMENT_SCHEDULE,
    )
    def patch(self, request: Request, knowledge_base_id: str, document_id: str) -> Response:
        document = selectors.document_get(base=_base(request, knowledge_base_id), uid=document_id)
        data = DocumentScheduleInput(data=request.data)
        data.is_valid(raise_exception=True)
        with django_errors_as_drf("refresh_hours"):
            document = services.document_set_refresh(
                document=document, refresh_hours=data.validated_data["refresh_hours"],
                actor=actor_for_request(request),
            )  # fmt: skip
        return Response(DocumentOutput(document).data)

    @extend_schema(
        summary="Delete a document",
        description="The document and its passages: searches stop finding them at once.",
        responses={204: None},
    )
    def delete(self, request: Request, knowledge_base_id: str, document_id: str) -> Response:
        document = selectors.document_get(base=_base(request, knowledge_base_id), uid=document_id)
        services.document_delete(document=document, actor=actor_for_request(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["Knowledge bases"])
class DocumentRefreshApi(APIView):
    scopes = {"POST": SCOPE}

    @extend_schema(
        summary="Refresh a document",
        description="A URL document is fetched again by the indexing job (through the "
        "egress guard) and indexed anew unless its bytes are unchanged; an uploaded one is "
        "indexed again. Its passages are swapped in when indexing finishes; until then "
        "searches find the previous ones. Refused (400) while it is pending or indexing.",
        request=None,
        responses=DocumentOutput,
        examples=examples.DOCUMENT_REFRESHED,
    )
    def post(self, request: Request, knowledge_base_id: str, document_id: str) -> Response:
        document = selectors.document_get(base=_base(request, knowledge_base_id), uid=document_id)
        with django_errors_as_drf("url"):
            document = services.document_refresh(
                document=document, actor=actor_for_request(request)
            )
        return Response(DocumentOutput(document).data)


@extend_schema(tags=["Knowledge bases"])
class KnowledgeSearchApi(APIView):
    scopes = {"POST": SCOPE}
    parser_classes = [JsonParser]

    @extend_schema(
        summary="Search a knowledge base",
        description="The `k` passages that best answer `query`, as an agent's "
        "`search_knowledge` tool gets them: full text and embeddings, fused. "
        "At most `KNOWLEDGE_SEARCHES_PER_MINUTE` per workspace, whichever key asks (429).",
        request=SearchInput,
        responses=PassageOutput(many=True),
        examples=examples.SEARCH,
    )
    def post(self, request: Request, knowledge_base_id: str) -> Response:
        base = _base(request, knowledge_base_id)
        data = SearchInput(data=request.data)
        data.is_valid(raise_exception=True)
        wait_s = services.search_throttle(workspace=base.workspace)
        if wait_s is not None:
            raise exceptions.Throttled(wait_s)
        passages = search.search(
            workspace_id=base.workspace_id, knowledge_base_ids=[base.pk],
            query=data.validated_data["query"], k=data.validated_data["k"],
        )  # fmt: skip
        return Response(PassageOutput(passages, many=True).data)


@extend_schema(tags=["Agents"])
class AgentKnowledgeApi(APIView):
    scopes = {"GET": "agents", "PUT": "agents"}
    parser_classes = [JsonParser]

    def _output(self, agent: Any) -> Response:
        bases = [str(base.uid) for base in agent.knowledge_bases.order_by("name", "pk")]
        return Response({"knowledge_bases": bases, "mode": agent.knowledge_mode})

    @extend_schema(
        summary="Get an agent's knowledge bases",
        description="The knowledge bases the agent answers from, and how it searches them.",
        responses=AgentKnowledgeOutput,
        examples=examples.AGENT_KNOWLEDGE[1:],
    )
    def get(self, request: Request, slug: str) -> Response:
        workspace = request_workspace(request)
        return self._output(agent_selectors.agent_get(workspace=workspace, slug=slug))

    @extend_schema(
        summary="Set an agent's knowledge bases",
        description="Replaces the list. `mode` `tool` offers the LLM a `search_knowledge` "
        "tool; `prefetch` searches with the user's words before each turn's first LLM "
        "request. Either way the turn's `chat` steps name the passages given to the LLM.",
        request=AgentKnowledgeInput,
        responses=AgentKnowledgeOutput,
        examples=examples.AGENT_KNOWLEDGE,
    )
    def put(self, request: Request, slug: str) -> Response:
        agent = agent_selectors.agent_get(workspace=request_workspace(request), slug=slug)
        data = AgentKnowledgeInput(data=request.data)
        data.is_valid(raise_exception=True)
        with django_errors_as_drf("knowledge_bases"):
            services.agent_knowledge_set(
                agent=agent, knowledge_base_uids=data.validated_data["knowledge_bases"],
                mode=data.validated_data["mode"], actor=actor_for_request(request),
            )  # fmt: skip
        return self._output(agent)


def _connection(request: Request, name: str) -> ProviderCredential:
    return selectors.embedding_connection_get(workspace=request_workspace(request), name=name)


@extend_schema(tags=["Knowledge bases"])
class KnowledgeBaseEmbeddingApi(APIView):
    scopes = {"PUT": SCOPE}
    parser_classes = [JsonParser]

    @extend_schema(
        summary="Choose a knowledge base's embedding model",
        description="`connection`: one of the workspace's embedding connections by name, or "
        "null for the offline model. Vectors of different models are never compared: a "
        "change re-indexes the base's documents off the request (their `status` and "
        "`progress` show it; `embedding.embedded` counts those done); until a document is "
        "done, searches find its passages by full text alone.",
        request=BaseEmbeddingInput,
        responses=KnowledgeBaseOutput,
        examples=examples.BASE_EMBEDDING,
    )
    def put(self, request: Request, knowledge_base_id: str) -> Response:
        base = _base(request, knowledge_base_id)
        data = BaseEmbeddingInput(data=request.data)
        data.is_valid(raise_exception=True)
        with django_errors_as_drf("connection"):
            services.knowledge_base_set_embedding(
                base=base, connection_name=data.validated_data["connection"] or None,
                actor=actor_for_request(request),
            )  # fmt: skip
        return Response(KnowledgeBaseOutput(base).data)


@extend_schema(tags=["Knowledge bases"])
class EmbeddingConnectionListApi(APIView):
    scopes = {"GET": SCOPE, "POST": SCOPE}
    parser_classes = [JsonParser]

    @extend_schema(
        summary="List embedding connections",
        description="The workspace's OpenAI-compatible embedding endpoints, which its "
        "knowledge bases may embed with instead of the offline model. Keys are never shown.",
        responses=EmbeddingConnectionOutput(many=True),
        examples=examples.CONNECTION_LIST,
    )
    def get(self, request: Request) -> Response:
        connections = selectors.embedding_connection_list(workspace=request_workspace(request))
        return Response(EmbeddingConnectionOutput(connections, many=True).data)

    @extend_schema(
        summary="Save an embedding connection",
        description="Creates the connection, or changes the one of that name (201 or 200). "
        "The key is sealed like the workspace's other provider keys and never shown again. "
        "A new base URL or model re-indexes the knowledge bases that embed with it.",
        request=EmbeddingConnectionInput,
        responses={201: EmbeddingConnectionOutput, 200: EmbeddingConnectionOutput},
        examples=examples.CONNECTION_SAVE,
    )
    def post(self, request: Request) -> Response:
        workspace = request_workspace(request)
        data = EmbeddingConnectionInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        existed = selectors.embedding_connection_list(workspace=workspace).filter(
            name=values["name"]
        )
        created = not existed.exists()
        with django_errors_as_drf("name"):
            connection = services.embedding_connection_set(
                workspace=workspace, name=values["name"], base_url=values["base_url"],
                model=values["model"], api_key=values.get("api_key") or None,
                actor=actor_for_request(request),
            )  # fmt: skip
        answer = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(EmbeddingConnectionOutput(connection).data, status=answer)


@extend_schema(tags=["Knowledge bases"])
class EmbeddingConnectionDetailApi(APIView):
    scopes = {"GET": SCOPE, "DELETE": SCOPE}

    @extend_schema(
        summary="Get an embedding connection",
        description="One embedding connection of the workspace, by name (never its key).",
        responses=EmbeddingConnectionOutput,
        examples=examples.CONNECTION_DETAIL,
    )
    def get(self, request: Request, name: str) -> Response:
        return Response(EmbeddingConnectionOutput(_connection(request, name)).data)

    @extend_schema(
        summary="Delete an embedding connection",
        description="Refused (400) while a knowledge base embeds with it: choose another "
        "model for those bases first.",
        responses={204: None},
    )
    def delete(self, request: Request, name: str) -> Response:
        connection = _connection(request, name)
        with django_errors_as_drf("name"):
            services.embedding_connection_delete(
                workspace=request_workspace(request), connection=connection,
                actor=actor_for_request(request),
            )  # fmt: skip
        return Response(status=status.HTTP_204_NO_CONTENT)
