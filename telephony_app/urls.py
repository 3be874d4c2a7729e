from __future__ import annotations

from django.urls import path

from telephony_app import api

urlpatterns = [
    path("carrier-accounts", api.CarrierAccountListCreateApi.as_view(), name="carrier-accounts"),
    path(
        "carrier-accounts/<id:account_id>",
        api.CarrierAccountDetailApi.as_view(),
        name="carrier-account-detail",
    ),
    path("calls", api.CallCreateApi.as_view(), name="calls"),
    path("calls/<id:call_id>", api.CallDetailApi.as_view(), name="call-detail"),
    path(
        "agents/<slug:slug>/call-settings",
        api.AgentCallSettingsApi.as_view(),
        name="agent-call-settings",
    ),
    path("phone-numbers", api.PhoneNumberListCreateApi.as_view(), name="phone-numbers"),
    path(
        "phone-numbers/<id:number_id>",
        api.PhoneNumberDetailApi.as_view(),
        name="phone-number-detail",
    ),
]
