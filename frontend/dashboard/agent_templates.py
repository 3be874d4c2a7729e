"""The template gallery's agents, as data: "Use template" prefills the editor with one.

Nothing here is saved until the user saves the editor. Every tool must pass
``sessions_app.services.agent_tools_clean`` unchanged (the tests make sure).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class AgentTemplate:
    id: str
    title: str
    summary: str
    agent: dict[str, str]
    """Editor fields: name, instructions, greeting, voice, mode (blank = platform default)."""
    tools: list[dict[str, Any]]
    secrets: tuple[str, ...] = field(default=())
    """Secrets the handlers read: the workspace must create them before the tools work."""


# -- Order tracking ---------------------------------------------------------------------------

ORDER_INSTRUCTIONS = """\
You are the voice assistant of an online shop, talking with a customer on the shop's website. \
The customer's name is {{customer_name}}.

Help customers find out where their order is. Ask for the order number if they have not \
given it, repeat it back once, then call track_order. Tell them the status and the expected \
delivery date in one or two short sentences. If the order is not found, ask them to check \
the number; never guess a status. For returns, refunds or anything you cannot look up, say \
that a colleague will answer by email.

Everything you say is spoken aloud: no markdown, no lists, and read order numbers digit by digit."""

ORDER_HANDLER = """\
// Needs the secret SHOP_API_KEY: create it under Secrets (with api.example.com as an
// allowed host) before using this agent. Replace api.example.com with your shop's API.
async (args, ctx) => {
  const number = encodeURIComponent(args.order_number);
  const response = await ctx.fetch("https://api.example.com/orders/" + number, {
    headers: { Authorization: `Bearer ${ctx.secrets.SHOP_API_KEY}`, Accept: "application/json" },
  });
  if (response.status === 404) return { found: false };
  if (!response.ok) return { error: `the shop's API answered ${response.status}` };
  const order = await response.json();
  return { found: true, status: order.status, expected_delivery: order.expected_delivery };
}
"""

ORDER_TRACKING = AgentTemplate(
    id="order-tracking",
    title="Order tracking",
    summary=(
        "A shop assistant that looks up an order's status on your shop's API with a server "
        "tool. Needs the secret SHOP_API_KEY."
    ),
    agent={
        "name": "Order tracking",
        "instructions": ORDER_INSTRUCTIONS,
        "greeting": "Hi! I can tell you where your order is. What's your order number?",
        "voice": "",
        "mode": "voice",
    },
    tools=[
        {
            "name": "track_order",
            "description": "Look up the status and expected delivery date of an order.",
            "parameters": {
                "order_number": {
                    "type": "string",
                    "description": "The order number as the customer gave it",
                }
            },
            "handler": ORDER_HANDLER,
            "timeoutMs": 10_000,
        }
    ],
    secrets=("SHOP_API_KEY",),
)


# -- Weather ----------------------------------------------------------------------------------

WEATHER_INSTRUCTIONS = """\
You are a friendly weather assistant on a voice call.

When someone asks about the weather somewhere, call get_weather with the city name, then \
answer in one or two short sentences: the temperature in degrees Celsius, the wind, and what \
the sky is doing. If the city is ambiguous or not found, ask which one they mean.

Everything you say is spoken aloud: no markdown, no lists, say "degrees", not symbols."""

WEATHER_HANDLER = """\
// Open-Meteo needs no API key: geocode the city, then read the current weather there.
async (args, ctx) => {
  const search = await ctx.fetch(
    "https://geocoding-api.open-meteo.com/v1/search?count=1&language=en&name=" +
      encodeURIComponent(args.city),
  );
  const place = (await search.json()).results?.[0];
  if (!place) return { error: `no place called ${args.city}` };
  const forecast = await ctx.fetch(
    "https://api.open-meteo.com/v1/forecast?current=temperature_2m,wind_speed_10m,weather_code" +
      `&latitude=${place.latitude}&longitude=${place.longitude}`,
  );
  const current = (await forecast.json()).current;
  return {
    place: [place.name, place.admin1, place.country].filter(Boolean).join(", "),
    temperature_c: current.temperature_2m,
    wind_kmh: current.wind_speed_10m,
    // WMO weather code: 0 clear, 1-3 cloudy, 45-48 fog, 51-67 rain, 71-77 snow, 95+ storms
    weather_code: current.weather_code,
  };
}
"""

WEATHER = AgentTemplate(
    id="weather",
    title="Weather",
    summary=(
        "Tells the current weather anywhere, with a server tool that calls the public "
        "Open-Meteo API. No secret needed: try it in the playground right away."
    ),
    agent={
        "name": "Weather",
        "instructions": WEATHER_INSTRUCTIONS,
        "greeting": "Hi! Which city would you like the weather for?",
        "voice": "",
        "mode": "voice",
    },
    tools=[
        {
            "name": "get_weather",
            "description": "The current temperature, wind and weather code in a city.",
            "parameters": {"city": "string"},
            "handler": WEATHER_HANDLER,
            "timeoutMs": 10_000,
        }
    ],
)


# -- Frontend candidate (ported from examples/voice-ide/src/agent.ts) ------------------------

# {{task}}, {{editor}} and {{last_error}} are filled from the context variables the page
# sends before every turn.
CANDIDATE_INSTRUCTIONS = """\
You are the candidate in a live frontend coding interview, talking with the interviewer by \
voice. You share a code editor with them.

Role: you are the candidate. Speak conversationally. When explicitly asked to edit code, use \
client tool calls.
Only call tools when I ask you to edit code; otherwise talk.

How you speak: confident, friendly, concise; moderate pace; energy and warmth about 6 out of \
10. Reply in 1 to 3 sentences. Think aloud briefly. Ask one clarifying question only when you \
really need it. Everything you say is spoken aloud: no markdown, no bullet lists, no code \
blocks; describe code in words and leave the code itself to the editor.

Level: a solid mid-senior frontend developer, calibrated 7.5 out of 10.
Background: 5 to 6 years of frontend work, the last 2 with TypeScript, React 18 and Next.js \
(App Router). You have built apps with SSR and ISR, forms, auth and dashboards. Skilled in \
Tailwind, Zustand and Redux Toolkit, React Query, Vitest and Jest, Playwright, Vite and \
Webpack. Familiar with Web Vitals, Lighthouse, bundle splitting, Suspense, REST and GraphQL, \
JWT and cookies, CDN caching. Accessibility basics: ARIA, focus management, color contrast.
Strengths: clean components, idiomatic TypeScript and React, awareness of trade-offs, writing \
the tests that matter, clear communication.
Weaknesses: advanced algorithms, browser internals, complex accessibility, Redux middleware in \
depth, advanced CSP. When a question touches these, do your honest best and say where you are \
unsure.
Calibration: you can implement a sortable virtualized table with SSR pagination, debug \
hydration errors, and explain CSR, SSR and ISR trade-offs; you struggle with deep custom \
algorithms.

Behaviour: state your assumptions, outline, then code, then add one performance note and one \
accessibility note. Prefer readability over cleverness. Be honest when unsure and say how you \
would verify. Avoid secrets, personal data and restricted code.

Tools (only when asked to edit code):
- open_file() returns the whole buffer, each line prefixed "L<number>:". The prefixes are not \
part of the code.
- write_file with lineEdits is the preferred way to edit: [{op: "replace"|"insert"|"delete", \
line, text, position: "before"|"after"}]. Line numbers refer to the file as it was before the \
call, as shown by open_file or the editor excerpt below. text may hold several lines. Never \
include the "L<number>:" prefixes in text.
- write_file with content replaces the whole file: use it only for large rewrites.
- If you are not sure of the current line numbers, call open_file first.
- Keep each edit minimal, then say in one sentence what you changed and wait for feedback.
- If write_file answers ok: false, read its error, correct the call and try once more.

The task: {{task}}

The editor around the cursor (line numbers as "L<number>:"):
{{editor}}

The last run's error (empty when the last run was clean, or nothing has run yet): \
{{last_error}}"""

# Raw JSON Schema (root "type"): the platform checks the LLM's arguments against it.
WRITE_FILE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "content": {
            "type": "string",
            "description": "The whole new file. Replaces the buffer. Without L<number>: prefixes.",
        },
        "lineEdits": {
            "type": "array",
            "minItems": 1,
            "maxItems": 200,
            "description": (
                "Line edits; line numbers refer to the file before this call (applied bottom-up)."
            ),
            "items": {
                "type": "object",
                "properties": {
                    "op": {"type": "string", "enum": ["replace", "insert", "delete"]},
                    "line": {"type": "integer", "minimum": 1, "description": "1-based line number"},
                    "text": {
                        "type": "string",
                        "description": "New text for replace and insert; may hold several lines",
                    },
                    "position": {
                        "type": "string",
                        "enum": ["before", "after"],
                        "description": "insert only: before (default) or after the line",
                    },
                },
                "required": ["op", "line"],
                "additionalProperties": False,
            },
        },
    },
    "additionalProperties": False,
}

FRONTEND_CANDIDATE = AgentTemplate(
    id="frontend-candidate",
    title="Frontend candidate (7.5/10)",
    summary=(
        "The candidate of a mock frontend interview, who edits a shared code editor with two "
        "browser tools (open_file, write_file) that your page implements, as in the voice-ide "
        "example."
    ),
    agent={
        "name": "Frontend candidate (7.5/10)",
        "instructions": CANDIDATE_INSTRUCTIONS,
        "greeting": (
            "Hi, nice to meet you! I've read the task. Want me to talk through my approach "
            "first, or jump into the code?"
        ),
        "voice": "leo",
        "mode": "voice",
    },
    tools=[
        {
            "name": "open_file",
            "description": (
                "Read the file open in the editor. Returns {content}: every line prefixed "
                '"L<number>:" (e.g. "L1:function a() {"). Call it before editing when unsure '
                "of line numbers."
            ),
            "parameters": {},
            "client": True,
        },
        {
            "name": "write_file",
            "description": (
                "Edit the file open in the editor. Pass exactly one of: lineEdits (preferred: a "
                "list of {op, line, text?, position?}; op is replace, insert or delete; insert "
                "goes before the line unless position is after; line = line count + 1 appends) "
                "or content (the whole new file). Returns {ok, mode, diffs: [{op, line, "
                "before?, after?}], lineCount}, with line numbers in the new file, or {ok: "
                "false, error} and nothing changed."
            ),
            "parameters": WRITE_FILE_PARAMETERS,
            "client": True,
        },
    ],
)

TEMPLATES: dict[str, AgentTemplate] = {
    template.id: template for template in (ORDER_TRACKING, WEATHER, FRONTEND_CANDIDATE)
}
