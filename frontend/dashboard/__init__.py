"""The customer dashboard: server-rendered pages, one module per room.

Every workspace page lives under ``/w/<workspace_id>/`` and is wrapped by
``scope.workspace_page``, which answers 404 to anyone who is not a member.
"""
