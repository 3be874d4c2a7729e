"""The secrets a handler reads by name, told from its syntax tree (never by running it):
what the agent warnings compare with the workspace's secrets."""

from __future__ import annotations

import pytest

from tools_app.handler_shape import secret_names


@pytest.mark.parametrize(
    ("source", "names"),
    [
        ("async (args, ctx) => ctx.secrets.API_KEY", {"API_KEY"}),
        ("(a, c) => `Bearer ${c.secrets['TOKEN']}` + c.secrets[\"OTHER\"]", {"TOKEN", "OTHER"}),
        ("async (args, { secrets }) => secrets.WEATHER_API_KEY", {"WEATHER_API_KEY"}),
        ("async (args, { secrets: s, fetch }) => s.ONE", {"ONE"}),
        (
            "async (a, ctx) => { const { A, B: b, 'C': c } = ctx.secrets; return [A, b, c] }",
            {"A", "B", "C"},
        ),
        ("async (a, ctx) => { const s = ctx.secrets; return s.ALIASED }", {"ALIASED"}),
        ("async (a, ctx) => ctx?.secrets?.OPTIONAL", {"OPTIONAL"}),
        ("function handler(args, ctx) { return ctx.secrets.IN_A_FUNCTION }", {"IN_A_FUNCTION"}),
        # Not knowable, or not secrets:
        ("async (a, ctx) => ctx.secrets[a.name]", set()),
        ("async (a, ctx) => Object.keys(ctx.secrets)", set()),
        ("async (a, ctx) => a.secrets_like.X + ctx.fetch.name", set()),
        (
            "async (a, ctx) => { // ctx.secrets.IN_A_COMMENT\n return 'ctx.secrets.IN_A_STRING' }",
            set(),
        ),
        ("this is not ) javascript (", set()),
    ],
)
def test_secret_names_are_read_from_the_syntax_tree(source: str, names: set[str]) -> None:
    assert secret_names(source) == names
