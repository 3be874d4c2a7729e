"""REST API for carrier accounts and phone numbers (scope ``phone:write``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.pagination import CallPages
from core.serializers import StrictSerializer, django_errors_as_drf
from secrets_app.audit import actor_for_request
from secrets_app.authentication import request_workspace
from secrets_app.scopes import grants as scope_grants
from secrets_app.services import KeyRejected
from telephony_app import api_examples as examples
from telephony_app import links, outbound, selectors, services
from telephony_app.carrier_rest import CarrierError
from telephony_app.models import (
    AgentCallSettings,
    CarrierAccount,
    MachineAction,
    PhoneCall,
    PhoneNumber,
)

PHONE_SCOPE = {method: "phone:write" for method in ("GET", "POST", "PATCH", "DELETE")}
CREDENTIAL_HELP = (
    "`credential` is Twilio's auth token or Telnyx's API key: sealed like a secret, used "
    "only to check the carrier's webhook signatures and to place calls, never shown again "
    "(`credential_last4` tells which one is saved)."
)


class CarrierAccountOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = CarrierAccount
        fields = [
            "id", "carrier", "name", "account_sid", "public_key", "connection_id",
            "credential_last4", "created_at", "updated_at",
        ]  # fmt: skip


class CarrierAccountInput(StrictSerializer):
    carrier = serializers.ChoiceField(choices=CarrierAccount.Carrier.choices)
    name = serializers.CharField(max_length=64)
    credential = serializers.CharField(max_length=512, trim_whitespace=False)
    account_sid = serializers.CharField(
        max_length=34, required=False, allow_blank=True, help_text="Twilio's Account SID."
    )
    public_key = serializers.CharField(
        max_length=64, required=False, allow_blank=True,
        help_text="Telnyx's Ed25519 public key (base64), for webhook signatures.",
    )  # fmt: skip
    connection_id = serializers.CharField(
        max_length=64, required=False, allow_blank=True,
        help_text="Telnyx's Call Control application id: needed to place calls.",
    )  # fmt: skip


class CarrierAccountUpdateInput(StrictSerializer):
    name = serializers.CharField(max_length=64, required=False)
    credential = serializers.CharField(max_length=512, required=False, trim_whitespace=False)
    account_sid = serializers.CharField(max_length=34, required=False, allow_blank=True)
    public_key = serializers.CharField(max_length=64, required=False, allow_blank=True)
    connection_id = serializers.CharField(max_length=64, required=False, allow_blank=True)


class PhoneNumberOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    account = serializers.CharField(source="account.name")
    carrier = serializers.CharField(source="account.carrier")
    agent = serializers.CharField(source="agent.slug")
    agent_version = serializers.IntegerField(
        source="agent_version.number", allow_null=True, default=None,
        help_text="The version the number's calls are pinned to; null: the published one.",
    )  # fmt: skip
    voice_webhook_url = serializers.SerializerMethodField(
        help_text="Paste this into the carrier's console as the number's voice webhook."
    )

    class Meta:
        model = PhoneNumber
        fields = [
            "id", "number", "account", "carrier", "agent", "agent_version", "label",
            "voice_webhook_url", "created_at", "updated_at",
        ]  # fmt: skip

    def get_voice_webhook_url(self, phone: PhoneNumber) -> str:
        return links.voice_webhook_url(phone, links.platform_base(self.context.get("request")))


class PhoneNumberInput(StrictSerializer):
    account = serializers.CharField(max_length=64, help_text="The carrier account's name.")
    number = serializers.CharField(max_length=32, help_text="E.164, like +14155550123.")
    agent = serializers.CharField(max_length=64, help_text="The answering agent's slug.")
    label = serializers.CharField(  # type: ignore[assignment]
        max_length=100, required=False, allow_blank=True
    )


class PhoneNumberUpdateInput(StrictSerializer):
    agent = serializers.CharField(max_length=64, required=False)
    agent_version = serializers.IntegerField(
        required=False, allow_null=True, min_value=1,
        help_text="Pin the number's calls to this version of its agent (null: unpin, "
        "calls get the agent's published version). Needs the `versions` scope too.",
    )  # fmt: skip
    label = serializers.CharField(  # type: ignore[assignment]
        max_length=100, required=False, allow_blank=True
    )


@extend_schema(tags=["Phone"])
class CarrierAccountListCreateApi(APIView):
    scopes = PHONE_SCOPE

    @extend_schema(
        summary="List carrier accounts",
        description="The workspace's Twilio and Telnyx accounts. Never their credentials.",
        responses=CarrierAccountOutput(many=True),
        examples=examples.ACCOUNT_LIST,
    )
    def get(self, request: Request) -> Response:
        accounts = selectors.carrier_account_list(workspace=request_workspace(request))
        return Response(CarrierAccountOutput(accounts, many=True).data)

    @extend_schema(
        summary="Add a carrier account",
        description="A Twilio account (`account_sid`) or a Telnyx account (`public_key`). "
        f"{CREDENTIAL_HELP} The change is in the audit log.",
        request=CarrierAccountInput,
        responses={201: CarrierAccountOutput},
        examples=examples.ACCOUNT_CREATE,
    )
    def post(self, request: Request) -> Response:
        data = CarrierAccountInput(data=request.data)
        data.is_valid(raise_exception=True)
        with django_errors_as_drf():
            account = services.carrier_account_create(
                workspace=request_workspace(request),
                actor=actor_for_request(request),
                **data.validated_data,
            )
        return Response(CarrierAccountOutput(account).data, status=status.HTTP_201_CREATED)


@extend_schema(tags=["Phone"])
class CarrierAccountDetailApi(APIView):
    scopes = PHONE_SCOPE

    def _account(self, request: Request, account_id: int) -> CarrierAccount:
        return selectors.carrier_account_get(
            workspace=request_workspace(request), account_id=account_id
        )

    @extend_schema(
        summary="Get a carrier account",
        description="One carrier account of the workspace. Never its credential.",
        responses=CarrierAccountOutput,
        examples=examples.ACCOUNT_DETAIL,
    )
    def get(self, request: Request, account_id: int) -> Response:
        return Response(CarrierAccountOutput(self._account(request, account_id)).data)

    @extend_schema(
        summary="Change a carrier account",
        description=f"Only the fields sent change. {CREDENTIAL_HELP} The change is in the "
        "audit log.",
        request=CarrierAccountUpdateInput,
        responses=CarrierAccountOutput,
        examples=examples.ACCOUNT_UPDATE,
    )
    def patch(self, request: Request, account_id: int) -> Response:
        account = self._account(request, account_id)
        data = CarrierAccountUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        with django_errors_as_drf():
            account = services.carrier_account_update(
                account=account, actor=actor_for_request(request), **data.validated_data
            )
        return Response(CarrierAccountOutput(account).data)

    @extend_schema(
        summary="Delete a carrier account",
        description="Refused (400) while numbers use it. The change is in the audit log.",
        responses={204: None},
    )
    def delete(self, request: Request, account_id: int) -> Response:
        with django_errors_as_drf():
            services.carrier_account_delete(
                account=self._account(request, account_id), actor=actor_for_request(request)
            )
        return Response(status=status.HTTP_204_NO_CONTENT)


def _number_output(phone: PhoneNumber, request: Request) -> dict[str, Any]:
    return dict(PhoneNumberOutput(phone, context={"request": request}).data)


@extend_schema(tags=["Phone"])
class PhoneNumberListCreateApi(APIView):
    scopes = PHONE_SCOPE

    @extend_schema(
        summary="List phone numbers",
        description="The workspace's numbers, their agents and their voice webhook URLs.",
        responses=PhoneNumberOutput(many=True),
        examples=examples.NUMBER_LIST,
    )
    def get(self, request: Request) -> Response:
        numbers = selectors.phone_number_list(workspace=request_workspace(request))
        return Response(PhoneNumberOutput(numbers, many=True, context={"request": request}).data)

    @extend_schema(
        summary="Add a phone number",
        description="A number of one of the workspace's carrier accounts (by name), answered "
        "by a saved agent. Paste `voice_webhook_url` into the carrier's console. The number "
        "gets a publishable key of its own (tokens only, labelled `Phone line …`): its calls' "
        "sessions belong to it, and revoking it ends them. The change is in the audit log.",
        request=PhoneNumberInput,
        responses={201: PhoneNumberOutput},
        examples=examples.NUMBER_CREATE,
    )
    def post(self, request: Request) -> Response:
        data = PhoneNumberInput(data=request.data)
        data.is_valid(raise_exception=True)
        with django_errors_as_drf():
            try:
                phone = services.phone_number_create(
                    workspace=request_workspace(request),
                    actor=actor_for_request(request),
                    **data.validated_data,
                )
            except KeyRejected as rejected:
                raise serializers.ValidationError({"number": [rejected.reason]}) from None
        return Response(_number_output(phone, request), status=status.HTTP_201_CREATED)


@extend_schema(tags=["Phone"])
class PhoneNumberDetailApi(APIView):
    scopes = PHONE_SCOPE

    def _number(self, request: Request, number_id: int) -> PhoneNumber:
        return selectors.phone_number_get(workspace=request_workspace(request), number_id=number_id)

    @extend_schema(
        summary="Get a phone number",
        description="One number of the workspace, with its voice webhook URL.",
        responses=PhoneNumberOutput,
        examples=examples.NUMBER_DETAIL,
    )
    def get(self, request: Request, number_id: int) -> Response:
        return Response(_number_output(self._number(request, number_id), request))

    @extend_schema(
        summary="Change a phone number",
        description="Another answering agent, another label, or a pin of its calls to a "
        "version of its agent (`agent_version`, docs/versions.md). Moving the number to "
        "another agent clears its pin. Calls already running keep their agent. The change "
        "is in the audit log.",
        request=PhoneNumberUpdateInput,
        responses=PhoneNumberOutput,
        examples=examples.NUMBER_UPDATE,
    )
    def patch(self, request: Request, number_id: int) -> Response:
        phone = self._number(request, number_id)
        data = PhoneNumberUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        if "agent_version" in data.validated_data and not scope_grants(
            getattr(request.auth, "scopes", []), "versions"
        ):
            raise exceptions.PermissionDenied(
                "pinning a number to a version needs the scope 'versions'; create a key "
                "with it in the dashboard",
                code="missing_scope",
            )
        with django_errors_as_drf():
            phone = services.phone_number_update(
                phone=phone, actor=actor_for_request(request), **data.validated_data
            )
        return Response(_number_output(phone, request))

    @extend_schema(
        summary="Delete a phone number",
        description="The number stops answering; its line key is revoked, which ends its "
        "live calls. The change is in the audit log.",
        responses={204: None},
    )
    def delete(self, request: Request, number_id: int) -> Response:
        services.phone_number_delete(
            phone=self._number(request, number_id), actor=actor_for_request(request)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


# ---------------------------------------------------------------- outbound calls


class CallInput(StrictSerializer):
    to = serializers.CharField(max_length=32, help_text="The number to ring, E.164.")
    agent = serializers.CharField(
        max_length=64, required=False, help_text="The agent's slug (default: the number's)."
    )
    variables = serializers.DictField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=1000),
        required=False,
        help_text="The session's variables ({{name}} in instructions and greeting); "
        "`caller` and `called` are the two numbers.",
    )


# ``from`` is a Python keyword: declared beside the others.
CallInput._declared_fields["from"] = serializers.CharField(
    max_length=32, help_text="One of the workspace's numbers (Twilio or Telnyx), E.164."
)


class PhoneCallOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    number = serializers.CharField(source="number.number", allow_null=True, default=None)
    other_end = serializers.CharField(source="caller")

    class Meta:
        model = PhoneCall
        fields = [
            "id", "call_sid", "direction", "status", "number", "other_end", "statuses",
            "answered_by", "started_at", "ended_at", "duration_ms",
        ]  # fmt: skip


class PhoneCallPageOutput(serializers.Serializer):  # type: ignore[type-arg]
    next = serializers.URLField(allow_null=True, help_text="The next (older) page, if any.")
    previous = serializers.URLField(allow_null=True)
    results = PhoneCallOutput(many=True)


class CarrierFailed(exceptions.APIException):
    status_code = status.HTTP_502_BAD_GATEWAY
    default_code = "carrier_error"


@extend_schema(tags=["Phone"])
class CallCreateApi(APIView):
    scopes = {"GET": "calls:write", "POST": "calls:write"}
    paginator_class = CallPages

    @extend_schema(
        summary="List phone calls",
        description="The workspace's calls, inbound and outbound, newest first, in pages of "
        "50 (`next` leads to older ones): their carrier ids, status history (`statuses`), "
        "who answered (`answered_by`, with answering-machine detection) and length. The "
        "conversation itself is the session's record (`GET /sessions`).",
        operation_id="calls_list",
        parameters=[OpenApiParameter("cursor", str, description="from `next` or `previous`")],
        responses=PhoneCallPageOutput,
        examples=examples.CALL_PAGE,
    )
    def get(self, request: Request) -> Response:
        calls = selectors.phone_call_list(workspace=request_workspace(request))
        paginator = self.paginator_class()
        page = paginator.paginate_queryset(calls, request, view=self)
        return paginator.get_paginated_response(PhoneCallOutput(page, many=True).data)

    @extend_schema(
        summary="Place a phone call",
        description="Ring `to` from one of the workspace's numbers (Twilio, or Telnyx through "
        "Call Control); when answered, the agent (the number's, or `agent`) talks, as on an "
        "inbound call. The carrier's status callbacks are signed, checked and kept in "
        "`statuses`, in Twilio's words for both carriers (initiated, ringing, in-progress, "
        "completed; busy, no-answer, failed, canceled). If the agent's call settings ask "
        "for answering-machine detection, `answered_by` says what the carrier detected and "
        "the call hangs up or leaves the voicemail message. At most "
        "`OUTBOUND_CALLS_PER_MINUTE` per workspace (429), refused with 403 `quota_exceeded` "
        "once a quota is used up; 502 `carrier_error` when the carrier refuses or cannot be "
        "reached.",
        request=CallInput,
        responses={
            201: PhoneCallOutput,
            502: OpenApiResponse(description="The carrier refused or could not be reached."),
        },
        examples=examples.CALL_CREATE,
    )
    def post(self, request: Request) -> Response:
        data = CallInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        try:
            with django_errors_as_drf():
                call = outbound.outbound_call_place(
                    workspace=request_workspace(request),
                    from_number=values["from"],
                    to=values["to"],
                    agent=values.get("agent"),
                    variables=values.get("variables"),
                    base_url=links.platform_base(request),
                    actor=actor_for_request(request),
                )
        except outbound.CallsThrottled as throttled:
            raise exceptions.Throttled(throttled.wait_s) from None
        except outbound.QuotaExceeded as exceeded:
            raise exceptions.PermissionDenied(str(exceeded), code="quota_exceeded") from None
        except CarrierError as error:
            raise CarrierFailed(str(error)) from None
        return Response(PhoneCallOutput(call).data, status=status.HTTP_201_CREATED)


@extend_schema(tags=["Phone"])
class CallDetailApi(APIView):
    scopes = {"GET": "calls:write"}

    @extend_schema(
        summary="Get a phone call",
        description="One call of the workspace, with its status history.",
        responses=PhoneCallOutput,
        examples=examples.CALL_DETAIL,
    )
    def get(self, request: Request, call_id: int) -> Response:
        call = selectors.phone_call_get(workspace=request_workspace(request), call_id=call_id)
        return Response(PhoneCallOutput(call).data)


# ---------------------------------------------------------------- agents' call settings


class AgentCallSettingsOutput(serializers.ModelSerializer):  # type: ignore[type-arg]
    agent = serializers.CharField(source="agent.slug")
    updated_at = serializers.DateTimeField(allow_null=True, help_text="null: never set.")

    class Meta:
        model = AgentCallSettings
        fields = ["agent", "machine_detection", "voicemail_message", "updated_at"]


class AgentCallSettingsInput(StrictSerializer):
    machine_detection = serializers.ChoiceField(
        choices=MachineAction.choices,
        help_text="When an answering machine picks up the agent's outbound call: `off` (no "
        "detection), `hang_up`, or `leave_message` (after the beep, then hang up).",
    )
    voicemail_message = serializers.CharField(
        max_length=1000, required=False, allow_blank=True,
        help_text="What `leave_message` says (spoken by the carrier's voice).",
    )  # fmt: skip


@extend_schema(tags=["Phone"])
class AgentCallSettingsApi(APIView):
    scopes = {"GET": "phone:write", "PUT": "phone:write"}

    @extend_schema(
        summary="Get an agent's call settings",
        description="What the agent's outbound calls do when an answering machine picks up.",
        responses=AgentCallSettingsOutput,
        examples=examples.CALL_SETTINGS,
    )
    def get(self, request: Request, slug: str) -> Response:
        agent = selectors.agent_get(workspace=request_workspace(request), slug=slug)
        return Response(AgentCallSettingsOutput(services.agent_call_settings(agent)).data)

    @extend_schema(
        summary="Set an agent's call settings",
        description="Answering-machine detection for the agent's outbound calls (the "
        "carrier's: Twilio's asynchronous AMD, Telnyx's `answering_machine_detection`). "
        "The change is in the audit log.",
        request=AgentCallSettingsInput,
        responses=AgentCallSettingsOutput,
        examples=examples.CALL_SETTINGS_UPDATE,
    )
    def put(self, request: Request, slug: str) -> Response:
        data = AgentCallSettingsInput(data=request.data)
        data.is_valid(raise_exception=True)
        with django_errors_as_drf():
            saved = services.agent_call_settings_update(
                agent=selectors.agent_get(workspace=request_workspace(request), slug=slug),
                actor=actor_for_request(request), **data.validated_data,
            )  # fmt: skip
        return Response(AgentCallSettingsOutput(saved).data)
