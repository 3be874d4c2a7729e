"""The V8 sandbox that runs tool handlers: results, errors, limits, isolation, Web APIs.

Every call here goes the production way: through a pool of jailed worker processes
(``tools_app.pool``), whose parent is this test process.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import time
from dataclasses import replace
from typing import Any

import pytest

from tests.tools_app.jailed import run_jailed, worker_pids
from tools_app.calls import SandboxLimits, SandboxResult
from tools_app.pool import FetchDenied
from tools_app.sandbox import CONSOLE_TRUNCATED
from tools_app.services import handler_check


class FakeFetcher:
    """Answers ctx.fetch the way the egress proxy does, and records what it was asked."""

    def __init__(self, *, delay: float = 0.0, error: Exception | None = None) -> None:
        self.delay = delay
        self.error = error
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.cancelled = 0

    async def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            if self.error is not None:
                raise self.error
            body = json.dumps({"got": request}).encode()
            return {
                "status": 200,
                "headers": [["Content-Type", "application/json"], ["Set-Cookie", "a=1"]],
                "body": base64.b64encode(body).decode(),
                "url": request["url"],
            }
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1


async def run(source: str, args: dict[str, Any] | None = None, **options: Any) -> SandboxResult:
    options.setdefault("wall_time_s", 5.0)
    options["fetcher"] = options.get("fetcher") or FakeFetcher()
    return await run_jailed(source, args, **options)


async def value(source: str, args: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    result = await run(source, args, **kwargs)
    assert result.ok, result.error
    assert result.result_json is not None
    return json.loads(result.result_json)


async def error(source: str, **kwargs: Any) -> str:
    result = await run(source, **kwargs)
    assert not result.ok
    assert result.result_json is None
    assert result.error is not None
    return result.error


# -- Results -------------------------------------------------------------------------


async def test_async_handler_result_comes_back_as_json() -> None:
    result = await run("async (args, ctx) => ({ sum: args.a + args.b })", {"a": 2, "b": 3})
    assert replace(result, cpu_ms=0.0) == SandboxResult(
        ok=True,
        result_json='{"sum":5}',
        error=None,
        timed_out=False,
        console="",
        fetch_count=0,
        truncated=False,
    )


async def test_sync_handlers_work_too() -> None:
    assert await value("function (args) { return args.items.length }", {"items": [1, 2]}) == 2


async def test_undefined_result_becomes_null() -> None:
    assert (await run("async () => {}")).result_json == "null"


async def test_args_and_secrets_arrive_as_data_not_code() -> None:
    tricky = {
        "quote": '"); globalThis.injected = 1; ("',
        "separators": "\u2028\u2029</script>\\",
        "__proto__": {"polluted": True},
        "mixed": [1, 2.5, None, True, {"nested": "é😀"}],
    }
    secrets = {"API_KEY": "`${globalThis.injected = 2}`'\"\\"}
    got = await value(
        "(args, ctx) => [args, ctx.secrets, typeof injected, ({}).polluted === undefined]",
        tricky,
        secrets=secrets,
    )
    assert got == [tricky, secrets, "undefined", True]


async def test_handler_source_is_one_function_expression_and_nothing_more() -> None:
    assert await value("(args) => 1 // a trailing comment") == 1
    assert await value("/* leading */\nasync function handler(args, ctx) {\n  return 2\n}") == 2
    escape = "1), (globalThis.escaped = true), (() => 2"
    assert "single function expression" in await error(escape)
    assert "single function expression" in await error("42")
    assert "single function expression" in await error("class Handler {}")


async def test_ctx_holds_only_secrets_and_fetch_and_is_frozen() -> None:
    got = await value("(args, ctx) => [Object.keys(ctx), Object.isFrozen(ctx), typeof ctx.fetch]")
    assert got == [["secrets", "fetch", "basicAuth"], True, "function"]


async def test_long_result_is_cut_to_the_limit_and_says_so() -> None:
    result = await run("() => ({ text: 'é\"'.repeat(50000) })", max_result_bytes=1000)
    assert result.ok
    assert result.truncated
    assert result.result_json is not None
    assert len(result.result_json.encode()) <= 1000
    envelope = json.loads(result.result_json)
    assert envelope["truncated"] is True
    assert envelope["preview"].startswith('{"text":"é\\"é\\"')


async def test_result_at_the_limit_is_kept_whole() -> None:
    result = await run("() => 'x'.repeat(98)", max_result_bytes=100)
    assert (result.truncated, result.result_json) == (False, '"' + "x" * 98 + '"')


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("() => () => 1", "the handler returned a function, which is not JSON"),
        ("() => Symbol('s')", "the handler returned a symbol, which is not JSON"),
        ("() => 10n", "not JSON-serialisable: TypeError: Do not know how to serialize a BigInt"),
        ("() => { const a = {}; a.self = a; return a }", "TypeError: Converting circular"),
    ],
)
async def test_result_that_is_not_json_is_a_clear_error(source: str, expected: str) -> None:
    assert expected in await error(source)


async def test_tampered_json_stringify_does_not_break_the_result() -> None:
    assert await value("() => { JSON.stringify = () => 'garbage'; return { a: 1 } }") == {"a": 1}


# -- Errors the handler causes ----------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("(args) => args.missing()", "TypeError: args.missing is not a function"),
        ("async () => { throw new RangeError('too far') }", "RangeError: too far"),
        ("() => { throw 'boom' }", 'Uncaught "boom"'),
        ("() => { throw { code: 7 } }", "Uncaught { code: 7 }"),
        ("() => Promise.reject(42)", "Uncaught 42"),
        ("() => { function f() { return f() + 1 } return f() }", "RangeError: Maximum call stack"),
        ("x => {", "SyntaxError: Unexpected token ')'"),
    ],
)
async def test_handler_errors_are_short_and_readable(source: str, expected: str) -> None:
    assert (await error(source)).startswith(expected)


async def test_a_promise_that_can_never_settle_fails_fast() -> None:
    started = time.monotonic()
    message = await error("() => new Promise(() => {})")
    assert "never settled" in message
    assert time.monotonic() - started < 1


async def test_error_in_a_timer_callback_fails_the_call() -> None:
    source = "() => new Promise(() => setTimeout(() => { throw new Error('in timer') }, 1))"
    assert await error(source) == "Error: in timer"


# -- Globals ----------------------------------------------------------------------------


async def test_web_globals_are_available() -> None:
    names = [
        "JSON", "Math", "Date", "URL", "URLSearchParams", "TextEncoder", "TextDecoder",
        "atob", "btoa", "console", "setTimeout", "clearTimeout", "Headers", "DOMException",
    ]  # fmt: skip
    checks = ", ".join(f"typeof {name}" for name in names)
    got = await value(
        f"() => [{checks}, typeof crypto.getRandomValues, typeof crypto.randomUUID,"
        " typeof crypto.subtle.digest]"
    )
    assert "undefined" not in got


async def test_proxies_still_behave_like_proxies() -> None:
    source = """() => {
      const seen = [];
      const proxy = new Proxy({ a: 1 }, { get: (target, key) => (seen.push(key), target[key]) });
      const { proxy: revocable, revoke } = Proxy.revocable({}, {});
      revoke();
      let revoked;
      try { revocable.x } catch (e) { revoked = e.name }
      return [proxy.a, seen, typeof Proxy, 'prototype' in Proxy, revoked];
    }"""
    assert await value(source) == [1, ["a"], "function", False, "TypeError"]


async def test_nothing_of_the_host_is_reachable() -> None:
    host_names = [
        "require", "process", "module", "exports", "Deno", "Bun", "Buffer", "global",
        "fetch", "XMLHttpRequest", "WebAssembly", "setImmediate", "navigator",
    ]  # fmt: skip
    checks = ", ".join(f"typeof {name}" for name in host_names)
    got = await value(
        f"() => [{checks},"
        " Function('return this')() === globalThis,"
        " globalThis.constructor.constructor('return typeof process')()]"
    )
    assert got == ["undefined"] * len(host_names) + [True, "undefined"]


async def test_import_fails_cleanly() -> None:
    source = "async () => { try { await import('fs'); return 'yes' } catch (e) { return 'no' } }"
    assert await value(source) == "no"
    assert not (await run("async () => (await import('fs')).readFileSync")).ok


# -- Isolation and recovery ---------------------------------------------------------------


async def test_tampering_in_one_call_is_not_seen_by_the_next() -> None:
    await value(
        "() => { Array.prototype.map = null; Object.prototype.polluted = 1;"
        " JSON.stringify = () => 'x'; globalThis.leftover = 1; return 1 }"
    )
    got = await value(
        "() => [typeof [].map, ({}).polluted === undefined,"
        " JSON.stringify({ a: 1 }), typeof leftover]"
    )
    assert got == ["function", True, '{"a":1}', "undefined"]


ATTACKS = [
    "() => { while (true) {} }",
    "async () => { await null; while (true) {} }",
    "() => { const a = []; for (;;) a.push(new Array(1e5).fill(1.5)) }",
    "() => Array.prototype.indexOf.call({ length: 2 ** 40 }, 1)",
    "() => { throw new Error('nope') }",
    "() => {",
]


@pytest.mark.parametrize("attack", ATTACKS)
async def test_after_any_failure_the_next_call_works(attack: str) -> None:
    failed = await run(attack, wall_time_s=0.3, heap_bytes=32 * 1024 * 1024)
    assert not failed.ok
    assert await value("(args) => args.n * 2", {"n": 21}) == 42


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] in {"Z", "X"}
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("source", ["() => 1", "() => new Promise(() => {})", *ATTACKS[2:]])
async def test_a_worker_that_finished_a_call_lives_on(source: str) -> None:
    await run(source, wall_time_s=0.3, heap_bytes=32 * 1024 * 1024)
    before = await worker_pids()
    assert await value("() => 1") == 1
    assert await worker_pids() == before


async def test_cancelling_a_call_kills_its_worker() -> None:
    await value("() => 1")
    before = await worker_pids()
    call = asyncio.create_task(run("async () => { await null; while (true) {} }"))
    await asyncio.sleep(0.3)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await asyncio.sleep(0.2)
    killed = before - await worker_pids()
    assert killed and all(_gone(pid) for pid in killed)
    assert await value("() => 2") == 2


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_concurrent_fetches must be positive"):
        SandboxLimits(max_concurrent_fetches=0)


@pytest.mark.parametrize(
    "source",
    [
        "async () => { await null; while (true) {} }",
        # A builtin that never checks for termination: only a kill stops it.
        "() => [].concat({ length: 2 ** 32 - 2, [Symbol.isConcatSpreadable]: true }).length",
    ],
)
async def test_a_stopped_handler_stops_using_cpu(source: str) -> None:
    await value("() => 1")
    before = await worker_pids()
    result = await run(source, wall_time_s=0.5, cpu_time_s=30)
    assert result.timed_out
    await asyncio.sleep(0.2)
    killed = before - await worker_pids()
    assert killed and all(_gone(pid) for pid in killed)


async def test_calls_can_run_side_by_side() -> None:
    calls = [value("async (args) => args.n", {"n": n}) for n in range(5)]
    assert await asyncio.gather(*calls) == [0, 1, 2, 3, 4]


# -- Time limit -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "() => { while (true) {} }",
        "async (args, ctx) => { await ctx.fetch('https://api.test/'); while (true) {} }",
        "async () => { await new Promise((resolve) => setTimeout(resolve, 5)); for (;;) {} }",
        "() => new Promise(() => setTimeout(() => { while (true) {} }, 0))",
        "() => new Promise((resolve) => setTimeout(resolve, 60000))",
        "() => /(a+)+$/.test('a'.repeat(40) + 'b')",
    ],
)
async def test_wall_time_limit_stops_the_handler(source: str) -> None:
    started = time.monotonic()
    result = await run(source, wall_time_s=0.5)
    elapsed = time.monotonic() - started
    assert (result.ok, result.timed_out, result.error) == (False, True, "timed out after 0.5 s")
    assert 0.5 <= elapsed < 2


# -- Memory limit -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "() => { const a = []; for (;;) a.push(new Array(1e5).fill(1.5)) }",
        "() => { const a = []; for (let i = 0; ; i++) a.push(String(i % 10).repeat(1 << 20)) }",
        "() => { const m = new Map(); for (let i = 0; ; i++) m.set(i, { i }) }",
        "() => { const keep = []; for (;;) keep.push(new ArrayBuffer(4 << 20)) }",
        "() => new Uint8Array(1e9).length",
        "() => new Float64Array({ length: 2 ** 30 }).length",
        "() => 'x'.repeat(2 ** 29 - 24).length",
        "() => JSON.parse('[' + '0,'.repeat(2 ** 24) + '0]').length",
    ],
)
async def test_memory_bombs_end_with_memory_limit_exceeded(source: str) -> None:
    result = await run(source, heap_bytes=32 * 1024 * 1024)
    assert (result.ok, result.error, result.timed_out) == (False, "memory limit exceeded", False)


@pytest.mark.parametrize(
    "source",
    [
        # Each of these runs (or crashes the process) inside one V8 builtin that never
        # checks for termination, so a wall-time limit alone could not stop it.
        "() => Array.prototype.indexOf.call({ length: 2 ** 40 }, 1)",
        "() => new Array(2 ** 32 - 1).indexOf(1)",
        "() => new Array(2 ** 32 - 1).reverse().length",
        "() => [new Array(2 ** 32 - 1)].flat().length",
        "() => new Array(2 ** 27).fill(1.5).length",
        "() => Array.from({ length: 2 ** 28 }).length",
        "() => String.raw({ raw: { length: 2 ** 40 } })",
        "() => new Proxy([], { get: (t, k) => (k === 'length' ? 2 ** 40 : t[k]) }).indexOf(1)",
    ],
)
async def test_builtins_refuse_lengths_no_real_array_could_have(source: str) -> None:
    started = time.monotonic()
    assert await error(source) == "memory limit exceeded"
    assert time.monotonic() - started < 1


async def test_a_length_getter_cannot_change_its_answer_between_check_and_use() -> None:
    source = (
        "() => { let reads = 0; const sneaky = { get length() { return reads++ ? 2 ** 40 : 0 } };"
        " return Array.prototype.indexOf.call(sneaky, 1) }"
    )
    assert await value(source) == -1


# -- console ----------------------------------------------------------------------------


async def test_console_output_is_captured_not_printed(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    result = await run(
        "(args, ctx) => { console.log('hello', 1, { b: [1, { c: 2 }] }, null, undefined);"
        " console.info('info'); console.warn('careful'); console.error(ctx.secrets.KEY);"
        " return 1 }",
        secrets={"KEY": "sk-live-123"},
    )
    assert result.console == (
        "hello 1 { b: [ 1, { c: 2 } ] } null undefined\ninfo\n[warn] careful\n[error] sk-live-123\n"
    )
    printed = capsys.readouterr()
    assert "hello" not in printed.out + printed.err
    assert "sk-live-123" not in caplog.text
    assert "hello" not in caplog.text


async def test_reading_a_secret_that_does_not_exist_is_said_in_the_console() -> None:
    source = (
        "async (args, ctx) => { const auth = `Bearer ${ctx.secrets.WEATHER_KEY}`;"
        " const again = ctx.secrets.WEATHER_KEY; const { KEY } = ctx.secrets;"
        " JSON.stringify(ctx.secrets); await Promise.resolve(ctx.secrets);"
        " return [auth, again, KEY, 'KEY' in ctx.secrets, Object.keys(ctx.secrets),"
        " Object.isFrozen(ctx.secrets)] }"
    )
    result = await run(source, secrets={"KEY": "k-1"})
    assert result.ok, result.error
    assert json.loads(result.result_json or "") == [
        "Bearer undefined",
        None,
        "k-1",
        True,
        ["KEY"],
        True,
    ]
    assert result.console == (
        "[warn] secret WEATHER_KEY does not exist in this workspace, so"
        " ctx.secrets.WEATHER_KEY is undefined: add it on the dashboard's Secrets page\n"
    )  # said once, and nothing for the secret that exists or for await/JSON


async def test_console_is_capped() -> None:
    source = "() => { for (let i = 0; i < 1000; i++) console.log('line', i, 'é'.repeat(40)) }"
    result = await run(source, max_console_bytes=2000)
    assert result.ok
    assert result.console.startswith("line 0 éé")
    assert result.console.endswith(CONSOLE_TRUNCATED)
    assert len(result.console.encode()) <= 2000 + len(CONSOLE_TRUNCATED)


# -- Timers -----------------------------------------------------------------------------


async def test_timers_fire_in_order_and_can_be_cleared() -> None:
    source = """async () => {
      const order = [];
      setTimeout(() => order.push('late'), 20);
      setTimeout(() => order.push('soon'), 5);
      clearTimeout(setTimeout(() => order.push('cleared'), 1));
      let ticks = 0;
      await new Promise((resolve) => {
        const timer = setInterval(() => {
          if (++ticks === 3) { clearInterval(timer); resolve() }
        }, 1);
      });
      await new Promise((resolve) => setTimeout(resolve, 30, 'value'));
      return [order, ticks];
    }"""
    assert await value(source) == [["soon", "late"], 3]


async def test_set_timeout_waits_at_least_the_delay() -> None:
    started = time.monotonic()
    await value("() => new Promise((resolve) => setTimeout(resolve, 50))")
    assert time.monotonic() - started >= 0.05


# -- ctx.fetch --------------------------------------------------------------------------


async def test_fetch_goes_through_the_fetcher_and_returns_a_response() -> None:
    fetcher = FakeFetcher()
    source = """async (args, ctx) => {
      const response = await ctx.fetch(new URL('/v1/items?q=a b', 'https://API.example.com:443/'), {
        method: 'post', headers: { 'X-Key': ctx.secrets.KEY }, body: JSON.stringify({ n: 1 }),
      });
      return {
        ok: response.ok, status: response.status, url: response.url,
        type: response.headers.get('CONTENT-TYPE'), missing: response.headers.get('nope'),
        text: (await response.text()).length > 0, json: await response.json(),
      };
    }"""
    got = await value(source, fetcher=fetcher, secrets={"KEY": "k-1"})
    request = {
        "url": "https://api.example.com/v1/items?q=a%20b",
        "method": "POST",
        "headers": [["x-key", "k-1"], ["content-type", "text/plain;charset=UTF-8"]],
        "body": '{"n":1}',
    }
    assert fetcher.requests == [request]
    assert got == {
        "ok": True,
        "status": 200,
        "url": request["url"],
        "type": "application/json",
        "missing": None,
        "text": True,
        "json": {"got": request},
    }


async def test_form_bodies_are_encoded_with_their_content_type() -> None:
    fetcher = FakeFetcher()
    source = """async (args, ctx) => {
      const body = new URLSearchParams({ q: 'a b', n: 'é' });
      await ctx.fetch('https://api.test/form', { method: 'POST', body });
    }"""
    await value(source, fetcher=fetcher)
    assert fetcher.requests[0]["body"] == "q=a+b&n=%C3%A9"
    assert fetcher.requests[0]["headers"] == [
        ["content-type", "application/x-www-form-urlencoded;charset=UTF-8"]
    ]


async def test_the_fetch_after_the_limit_is_refused() -> None:
    fetcher = FakeFetcher()
    source = """async (args, ctx) => {
      const outcomes = [];
      for (let i = 0; i < 51; i++) {
        try { await ctx.fetch('https://api.test/' + i); outcomes.push('ok') }
        catch (e) { outcomes.push(e.message) }
      }
      return outcomes.slice(-2);
    }"""
    result = await run(source, fetcher=fetcher)
    assert json.loads(result.result_json or "") == ["ok", "too many fetches (limit 50)"]
    assert result.fetch_count == len(fetcher.requests) == 50


async def test_uncaught_refused_fetch_fails_the_call() -> None:
    source = "async (args, ctx) => { for (;;) await ctx.fetch('https://a.test/') }"
    result = await run(source, max_fetches=1)
    assert result.error == "TypeError: too many fetches (limit 1)"
    assert result.fetch_count == 1


async def test_fetches_beyond_the_concurrency_limit_wait_their_turn() -> None:
    fetcher = FakeFetcher(delay=0.02)
    source = """async (args, ctx) => {
      const responses = await Promise.all(
        Array.from({ length: 12 }, (_, i) => ctx.fetch('https://api.test/' + i)));
      return responses.map((response) => response.status);
    }"""
    result = await run(source, fetcher=fetcher, max_concurrent_fetches=3)
    assert json.loads(result.result_json or "") == [200] * 12
    assert fetcher.most_in_flight == 3


async def test_fetcher_error_rejects_with_its_message() -> None:
    fetcher = FakeFetcher(error=FetchDenied("destination address is not public"))
    source = """async (args, ctx) => {
      try { await ctx.fetch('https://10.0.0.1/') } catch (e) { return [e.name, e.message] }
    }"""
    got = await value(source, fetcher=fetcher)
    assert got == ["TypeError", "destination address is not public"]
    uncaught = await run("(args, ctx) => ctx.fetch('https://10.0.0.1/')", fetcher=fetcher)
    assert uncaught.error == "TypeError: destination address is not public"


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ("ctx.fetch('file:///etc/passwd')", "fetch: only http and https URLs are allowed"),
        ("ctx.fetch('not a url')", "fetch: invalid URL"),
        ("ctx.fetch('https://a.test/', { method: 'POST', body: { a: 1 } })", "use JSON.stringify"),
        ("ctx.fetch('https://a.test/', { body: 'x' })", "a GET request cannot have a body"),
        ("ctx.fetch('https://a.test/', { headers: { 'bad name': 'x' } })", "Invalid header name"),
        ("ctx.fetch('https://a.test/', { method: 'CONNECT' })", "CONNECT method is not allowed"),
    ],
)
async def test_malformed_fetches_are_refused_before_the_fetcher(call: str, expected: str) -> None:
    fetcher = FakeFetcher()
    message = await value(
        f"async (args, ctx) => {{ try {{ await {call} }} catch (e) {{ return e.message }} }}",
        fetcher=fetcher,
    )
    assert expected in message
    assert fetcher.requests == []


async def test_a_bad_answer_from_the_fetcher_becomes_a_rejection() -> None:
    async def broken(request: dict[str, Any]) -> dict[str, Any]:
        return {"status": "200", "headers": [], "body": "", "url": request["url"]}

    result = await run("(args, ctx) => ctx.fetch('https://a.test/')", fetcher=broken)
    assert result.error == "TypeError: invalid response from the fetch proxy"


async def test_fetches_still_running_when_the_handler_settles_are_cancelled() -> None:
    fetcher = FakeFetcher(delay=5)
    source = """(args, ctx) => {
      ctx.fetch('https://a.test/slow');
      return new Promise((resolve) => setTimeout(resolve, 20, 'done'));
    }"""
    started = time.monotonic()
    result = await run(source, fetcher=fetcher)
    assert result.result_json == '"done"'
    assert time.monotonic() - started < 1
    await asyncio.sleep(0.01)
    assert (len(fetcher.requests), fetcher.cancelled) == (1, 1)


# -- crypto -----------------------------------------------------------------------------

HEX = (
    "(bytes) => Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, '0')).join('')"
)


@pytest.mark.parametrize(
    ("algorithm", "text", "expected"),
    [
        ("SHA-256", "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("SHA-256", "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("sha-1", "abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        (
            "SHA-512",
            "abc",
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
            "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
        ),
    ],
)
async def test_subtle_digest_matches_known_vectors(
    algorithm: str, text: str, expected: str
) -> None:
    source = (
        f"async (args) => ({HEX})(await crypto.subtle.digest({{ name: args.algorithm }},"
        " new TextEncoder().encode(args.text)))"
    )
    result = await run(source, {"algorithm": algorithm, "text": text})
    assert result.result_json == json.dumps(expected)
    assert result.fetch_count == 0


async def test_unknown_digest_is_not_supported() -> None:
    source = """async () => {
      try { await crypto.subtle.digest('MD5', new Uint8Array(1)) } catch (e) { return e.name }
    }"""
    assert await value(source) == "NotSupportedError"


async def test_random_values_differ_between_calls() -> None:
    source = f"() => ({HEX})(crypto.getRandomValues(new Uint32Array(8)).buffer)"
    first, second = await value(source), await value(source)
    assert len(first) == 64
    assert first != second


async def test_random_uuid_is_a_version_4_uuid() -> None:
    uuids = await value("() => [crypto.randomUUID(), crypto.randomUUID()]")
    pattern = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
    assert all(pattern.match(uuid) for uuid in uuids)
    assert uuids[0] != uuids[1]


async def test_get_random_values_checks_its_argument() -> None:
    source = """() => [new Uint8Array(65537), new Float32Array(2)].map((array) => {
      try { crypto.getRandomValues(array) } catch (e) { return e.name } })"""
    assert await value(source) == ["QuotaExceededError", "TypeMismatchError"]


# -- URL, URLSearchParams, Headers --------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (
            "new URL('HTTPS://Example.COM:443/a/./b/../c d?x=1#f g').href",
            "https://example.com/a/c%20d?x=1#f%20g",
        ),
        ("new URL('https://u:p w@h.test:8080/').origin", "https://h.test:8080"),
        ("new URL('https://u:p w@h.test:8080/').password", "p%20w"),
        ("new URL('../x', 'http://a/b/c/d').href", "http://a/b/x"),
        ("new URL('//h/p', 'https://a/b').href", "https://h/p"),
        ("new URL('?q', 'http://a/b?c#d').href", "http://a/b?q"),
        ("new URL('#f', 'http://a/b?c').href", "http://a/b?c#f"),
        ("new URL('http://0x7f.1/').hostname", "127.0.0.1"),
        ("new URL('http://[::FFFF:127.0.0.1]:80/').host", "[::ffff:7f00:1]"),
        ("new URL('https://münchen.de/').hostname", "xn--mnchen-3ya.de"),
        ("new URL('mailto:a@b.test').pathname", "a@b.test"),
        ("new URL('https://a.test/?y=é').searchParams.get('y')", "é"),
        ("URL.canParse('https://a.test:99999/')", False),
        ("URL.parse('nope')", None),
    ],
)
async def test_url_follows_the_url_standard(expression: str, expected: Any) -> None:
    assert await value(f"() => {expression}") == expected


async def test_url_search_params_stay_in_sync_with_the_url() -> None:
    source = """() => {
      const url = new URL('https://a.test/p?b=2&a=1');
      url.searchParams.set('q', 'a&b c');
      url.searchParams.append('a', '3');
      url.searchParams.sort();
      url.hash = 'top';
      const params = new URLSearchParams([['x', '1'], ['x', '2']]);
      return [url.href, url.search, params.getAll('x'), String(new URLSearchParams({ s: '~*' }))];
    }"""
    assert await value(source) == [
        "https://a.test/p?a=1&a=3&b=2&q=a%26b+c#top",
        "?a=1&a=3&b=2&q=a%26b+c",
        ["1", "2"],
        "s=%7E*",
    ]


async def test_invalid_url_throws_a_type_error() -> None:
    source = "() => { try { new URL('no scheme') } catch (e) { return [e.name, e.message] } }"
    assert await value(source) == ["TypeError", "Invalid URL"]


async def test_headers_are_case_insensitive_and_combine_values() -> None:
    source = """() => {
      const headers = new Headers({ 'Content-Type': 'text/plain' });
      headers.append('X-A', '1'); headers.append('x-a', '2');
      const names = [...headers.keys()];
      return [headers.get('content-type'), headers.get('X-A'), headers.has('x-b'), names];
    }"""
    assert await value(source) == ["text/plain", "1, 2", False, ["content-type", "x-a"]]


# -- Text and base64 ----------------------------------------------------------------------


async def test_text_encoder_and_decoder_round_trip_utf8() -> None:
    source = """() => {
      const bytes = new TextEncoder().encode('é€😀');
      return [Array.from(bytes), new TextDecoder().decode(bytes),
              new TextDecoder().decode(new Uint8Array([0xef, 0xbb, 0xbf, 0x61]))];
    }"""
    assert await value(source) == [[195, 169, 226, 130, 172, 240, 159, 152, 128], "é€😀", "a"]


async def test_text_decoder_replaces_or_rejects_invalid_bytes() -> None:
    source = """() => {
      const bad = new Uint8Array([0xff, 0x61, 0xe2, 0x82]);
      let fatal;
      try { new TextDecoder('utf-8', { fatal: true }).decode(bad) } catch (e) { fatal = e.name }
      return [new TextDecoder().decode(bad), fatal];
    }"""
    assert await value(source) == ["\ufffda\ufffd", "TypeError"]


async def test_atob_and_btoa() -> None:
    source = """() => {
      const errors = [() => btoa('€'), () => atob('a')].map((f) => {
        try { f() } catch (e) { return e.name } });
      return [btoa('hello'), atob('aGVsbG8='), atob(' aGVs bG8 '), btoa('é'), errors];
    }"""
    got = await value(source)
    assert got == ["aGVsbG8=", "hello", "hello", "6Q==", ["InvalidCharacterError"] * 2]


# -- checking a handler: parsed in a worker, never run -----------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "async (args, ctx) => ({ ok: true })",
        "(args) => args",
        "// fetch the weather\nasync function weather(args, ctx) {\n  return 1\n}\n",
        "async x => x",
        "/* a */ (a, { b }) => b ?? a?.c",
    ],
)
def test_check_accepts_function_expressions(source: str) -> None:
    assert handler_check(source) is None


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("async (args) => {\n  return args +\n}", "SyntaxError: Unexpected token '}' (line 3)"),
        ("async (args) => {\n  return 1\n", "SyntaxError: Unexpected end of input"),
        ("'use strict'", "single function expression"),
        ("class Tool {}", "single function expression"),
        ("42", "single function expression"),
        ("1), (globalThis.x = 1), (() => 2", "single function expression"),
        ("() => 1; globalThis.y = 2", "SyntaxError: Unexpected token ';' (line 1)"),
        ("(() => { while (true) {} })(), () => 1", "single function expression"),
        ("(async () => ({ ok: true }))()", "single function expression"),
        ("(function () { return 1 })()", "single function expression"),
        ("function* steps() { yield 1 }", "single function expression"),
        ("() => {}\n}); (function () {", "SyntaxError: Unexpected token '}' (line 2)"),
    ],
)
def test_check_says_what_is_wrong(source: str, expected: str) -> None:
    assert expected in (handler_check(source) or "")


def test_check_never_runs_the_source() -> None:
    # Evaluating this would never end; parsing it takes no time.
    started = time.monotonic()
    verdict = handler_check("(() => { while (true) {} })() || (() => 1)")
    assert "single function expression" in (verdict or "")
    assert time.monotonic() - started < 3


async def test_check_works_from_async_code() -> None:
    from tools_app.services import handler_check_async

    assert await handler_check_async("x => {") is not None
    assert await handler_check_async("x => x") is None


def test_checks_side_by_side_from_threads() -> None:
    """The crash this replaces: V8 contexts made on several threads of one process."""
    from concurrent.futures import ThreadPoolExecutor

    sources = [f"async (args) => args.n + {n}" for n in range(24)] + ["x => {"] * 8
    with ThreadPoolExecutor(max_workers=8) as threads:
        verdicts = list(threads.map(handler_check, sources))
    assert verdicts[:24] == [None] * 24
    assert all("SyntaxError" in (verdict or "") for verdict in verdicts[24:])


async def test_a_request_body_past_the_limit_is_refused_before_it_leaves() -> None:
    fetcher = FakeFetcher()
    source = """async (args, ctx) => {
      try { await ctx.fetch('https://api.test/', { method: 'POST', body: 'é'.repeat(600) }) }
      catch (e) { return e.message }
    }"""
    assert await value(source, fetcher=fetcher, max_request_bytes=1024) == (
        "fetch: the body is larger than 1 KB"
    )
    assert fetcher.requests == []
