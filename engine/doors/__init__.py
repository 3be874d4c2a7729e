"""Doors: the transports a session is reached through, behind one interface (``door``).

``door`` holds the seam (``Door``, ``DoorHost``, ``DoorAudio``, ``CallControl``),
``audio`` the conversions between a door's line and the session (μ-law, resampling), and
each door's engine half is one module: ``browser`` (the WebSocket of protocol v1). The
phone's media stream (``telephony_app.door``) is a door too: it lives in its app because
it claims the call's row in the database.
"""
