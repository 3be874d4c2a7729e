"""What carriers call: a number's voice webhook and its calls' status callbacks."""

from __future__ import annotations

from django.urls import path

from telephony_app import views

urlpatterns = [
    path("<str:carrier>/<str:uid>/voice", views.voice, name="phone-voice"),
    path("<str:carrier>/<str:uid>/status", views.status, name="phone-status"),
    path("<str:carrier>/<str:uid>/machine", views.machine_detected, name="phone-machine"),
]
