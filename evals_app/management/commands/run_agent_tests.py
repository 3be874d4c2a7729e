"""Run an agent's tests here and now (for CI): exit 0 when all pass, 1 when one fails, 2 when
the run could not happen (no LLM, no tests, unknown agent, no offline speech models for a
spoken run)."""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from evals_app import services
from evals_app.models import Status
from secrets_app.models import Workspace
from sessions_app import selectors, versions


class Command(BaseCommand):
    help = "Run an agent's tests against its draft or a version; non-zero exit on failure."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", type=int, required=True, help="the workspace's id")
        parser.add_argument("--agent", required=True, help="the agent's slug")
        parser.add_argument(
            "--agent-version", type=int, help="a version number (default: the draft)"
        )
        parser.add_argument(
            "--spoken", action="store_true",
            help="speak every user turn (offline voice) and hear it (offline recogniser)",
        )  # fmt: skip
        parser.add_argument("--json", action="store_true", help="print the run as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        workspace = Workspace.objects.filter(pk=options["workspace"]).first()
        agent = (
            selectors.agent_find(workspace=workspace, slug=options["agent"]) if workspace else None
        )
        if workspace is None or agent is None:
            raise CommandError("no such agent in that workspace", returncode=2)
        number = options["agent_version"]
        version = versions.version_get(agent=agent, number=number) if number else None
        try:
            run = services.test_run_create(agent=agent, version=version, spoken=options["spoken"])
        except ValidationError as refused:
            raise CommandError(" ".join(refused.messages), returncode=2) from None
        run = services.test_run_execute(run_id=run.pk)
        if options["json"]:
            self.stdout.write(json.dumps({"status": run.status, "message": run.message,
                                          "results": run.results}, indent=2))  # fmt: skip
        else:
            self._report(run.results)
            self.stdout.write(f"{run.status}: {run.message}")
        if run.status == Status.ERROR:
            raise CommandError(run.message, returncode=2)
        if run.status != Status.PASSED:
            raise CommandError("tests failed", returncode=1)

    def _report(self, results: list[dict[str, Any]]) -> None:
        for result in results:
            self.stdout.write(f"{'PASS' if result['passed'] else 'FAIL'} {result['test']}")
            for turn in result["turns"]:
                if turn.get("spoken"):
                    self.stdout.write(f"  said {turn['user']!r}, heard {turn['heard']!r}")
                for check in turn["checks"]:
                    mark = "ok " if check["passed"] else "NOT"
                    self.stdout.write(f"  {mark} {check['check']}: {check['detail'][:200]}")
