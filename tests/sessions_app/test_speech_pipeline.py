"""Speech in the session: per-turn metrics, audio framing, backchannels, the greeting."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from engine import protocol
from engine.providers.base import FinalTranscript, PartialTranscript, SpeechStarted
from engine.session import INTERRUPTED_MARK, ToolDefinition
from tests.engine.providers.fake import Delay, FakeLLM, FakeSTT, FakeToolRunner, FakeTTS, tool_call
from tests.sessions_app.harness import Harness, started, until

WEATHER = ToolDefinition(name="get_weather", handler="async () => ({temp: 21})")
BYTES_PER_MS = 48  # 24 kHz PCM16


async def test_a_spoken_turn_reports_every_stage_in_a_metrics_event(
    make: Callable[..., Harness],
) -> None:
    llm = FakeLLM(
        script=[
            [Delay(0.05), tool_call("get_weather", {})],
            [Delay(0.04), "It is sunny. ", "Warm too."],
        ]
    )
    runner = FakeToolRunner(handlers={"get_weather": lambda args: {"temp": 21}}, delay=0.03)
    tts = FakeTTS(first_byte_delay=0.02)
    harness = await started(make, mode="voice", llm=llm, runner=runner, tts=tts, tools=[WEATHER])
    now = time.monotonic()
    # The user's last word ended 300 ms ago; the recogniser called the turn 100 ms ago.
    harness.stt.streams[0].inject(
        FinalTranscript("weather please", speech_end_at=now - 0.3, endpoint_at=now - 0.1)
    )
    await harness.wait_for("metrics")
    (event,) = harness.of_type("metrics")
    assert harness.events.index(event) == len(harness.events) - 1  # after tts_done
    assert event["turnId"] == 1 and event["source"] == "speech"
    assert event["outcome"] == "completed" and event["llmRounds"] == 2
    assert 190 <= event["endOfUtteranceMs"] <= 230
    assert 90 <= event["sttFinalMs"] <= 150
    assert 35 <= event["llmFirstTokenMs"] <= 150  # the round that spoke, not the tool round
    assert 15 <= event["ttsFirstByteMs"] <= 120
    # user stopped speaking → first audio: recogniser + LLM rounds + tool + TTS, all of it
    assert event["firstAudioMs"] >= 300 + 50 + 30 + 40 + 20
    (tool,) = event["tools"]
    assert tool["name"] == "get_weather" and tool["status"] == "completed"
    assert 25 <= tool["ms"] <= 150
    # Every figure counts from the user's last word: the whole turn is never shorter than
    # its first audio, and it is the timeline's "turn" bar.
    assert event["turnMs"] >= event["firstAudioMs"]
    # The same stages placed on the turn's clock (0 = the user's last word), by start.
    timeline = {entry["stage"]: entry for entry in event["timeline"]}
    assert list(timeline) == [
        "end_of_utterance", "stt_final", "tool:get_weather", "llm_first_token",
        "tts_first_byte", "first_audio", "turn",
    ]  # fmt: skip
    durations = {stage: e["endMs"] - e["startMs"] for stage, e in timeline.items()}
    assert timeline["end_of_utterance"]["startMs"] == 0
    assert abs(durations["end_of_utterance"] - event["endOfUtteranceMs"]) <= 0.2
    assert abs(timeline["turn"]["endMs"] - event["turnMs"]) <= 0.2
    assert timeline["stt_final"]["startMs"] == timeline["end_of_utterance"]["endMs"]
    assert abs(durations["llm_first_token"] - event["llmFirstTokenMs"]) <= 0.2
    assert abs(durations["tool:get_weather"] - tool["ms"]) <= 0.2
    # the tool ran between the endpoint and the round that spoke
    assert timeline["stt_final"]["endMs"] <= timeline["tool:get_weather"]["startMs"]
    assert timeline["tool:get_weather"]["endMs"] <= timeline["llm_first_token"]["startMs"]
    assert abs(durations["tts_first_byte"] - event["ttsFirstByteMs"]) <= 0.2
    first_audio = timeline["first_audio"]
    assert first_audio["startMs"] == first_audio["endMs"] == event["firstAudioMs"]
    assert timeline["turn"]["startMs"] == 0
    assert timeline["turn"]["endMs"] >= first_audio["endMs"]


async def test_a_typed_turn_measures_from_the_text(make: Callable[..., Harness]) -> None:
    harness = await started(make, mode="voice", llm=FakeLLM(script=[["Hi there."]]))
    await harness.say("hello")
    await harness.wait_for("metrics")
    (event,) = harness.of_type("metrics")
    assert event["source"] == "text"
    assert event["endOfUtteranceMs"] is None and event["sttFinalMs"] is None
    assert event["firstAudioMs"] is not None and event["firstAudioMs"] >= 0
    # only what happened, measured from the text's arrival
    stages = [entry["stage"] for entry in event["timeline"]]
    assert stages == ["llm_first_token", "tts_first_byte", "first_audio", "turn"]
    assert event["timeline"][0]["startMs"] >= 0


async def test_a_cancelled_turn_still_reports_its_metrics(make: Callable[..., Harness]) -> None:
    harness = await started(make, llm=FakeLLM(script=[["Long ", Delay(5), "story."]]))
    await harness.say("tell me")
    await harness.wait_for("chat_delta")
    await harness.session.cancel()
    await harness.wait_for("metrics")
    assert harness.of_type("metrics")[0]["outcome"] == "cancelled"
    assert harness.events[-1]["type"] == "metrics"
    assert harness.events[-2]["type"] == "cancelled"


async def test_audio_goes_out_in_frames_of_at_most_100_ms(make: Callable[..., Harness]) -> None:
    tts = FakeTTS(ms_per_char=40, chunks=1)  # one 1.4 s chunk from the engine
    harness = await started(
        make, mode="voice", tts=tts, llm=FakeLLM(script=[["Long sentence here."]])
    )
    await harness.say("go")
    await harness.wait_for("tts_done")
    sizes = [len(frame) for frame in harness.audio]
    assert len(sizes) >= 7 and max(sizes) == 100 * BYTES_PER_MS
    assert all(size % 2 == 0 for size in sizes)
    assert b"".join(harness.audio) == tts.audio_for("Long sentence here.")


# ---------------------------------------------------------------- barge-in by speech


async def speaking(make: Callable[..., Harness], **config: object) -> Harness:
    """A session whose agent is in the middle of a long spoken reply."""
    tts = FakeTTS(ms_per_char=50, chunks=20, chunk_delay=0.02)
    llm = FakeLLM(script=[["First sentence here. Second one is longer. ", Delay(5), "Third."]])
    harness = await started(make, mode="voice", tts=tts, llm=llm, **config)
    await harness.say("talk to me")
    await until(lambda: "audio" in harness.timeline)
    return harness


async def test_backchannels_while_the_agent_speaks_do_not_interrupt(
    make: Callable[..., Harness],
) -> None:
    harness = await speaking(make)
    stream = harness.stt.streams[0]
    stream.inject(SpeechStarted())
    stream.inject(PartialTranscript("mm-hmm"))
    stream.inject(FinalTranscript("Mm-hmm, okay."))
    await asyncio.sleep(0.1)
    assert "cancelled" not in harness.types
    assert harness.types.count("turn") == 1  # the backchannel is not a turn
    frames = len(harness.audio)
    await asyncio.sleep(0.1)
    assert len(harness.audio) > frames  # still talking


async def test_a_real_word_while_the_agent_speaks_interrupts_at_once(
    make: Callable[..., Harness],
) -> None:
    harness = await speaking(make)
    harness.stt.streams[0].inject(PartialTranscript("stop"))
    await harness.wait_for("cancelled", within=0.05)
    assert harness.of_type("cancelled")[0]["reason"] == "barge_in"
    frames = len(harness.audio)
    await asyncio.sleep(0.1)
    assert len(harness.audio) == frames
    assert harness.session.history[-1]["content"].endswith(INTERRUPTED_MARK)


async def test_words_in_any_script_interrupt_and_make_a_turn(
    make: Callable[..., Harness],
) -> None:
    """Words were ASCII letters and digits only: a caller speaking Russian (or Japanese)
    said no words, so never interrupted the agent, and what they said while it spoke was
    dropped as a backchannel."""
    harness = await speaking(make)
    harness.stt.streams[0].inject(PartialTranscript("Стоп"))
    await harness.wait_for("cancelled", within=0.05)
    harness.stt.streams[0].inject(FinalTranscript("Стоп, подождите"))
    await until(lambda: harness.types.count("turn") == 2)
    assert harness.of_type("turn")[1]["text"] == "Стоп, подождите"


async def test_min_words_setting_needs_that_many_words(make: Callable[..., Harness]) -> None:
    harness = await speaking(make, barge_in_min_words=3)
    stream = harness.stt.streams[0]
    stream.inject(PartialTranscript("wait no"))
    await asyncio.sleep(0.05)
    assert "cancelled" not in harness.types
    stream.inject(PartialTranscript("wait no stop"))
    await harness.wait_for("cancelled", within=0.1)


async def test_min_words_zero_interrupts_on_speech_start(make: Callable[..., Harness]) -> None:
    harness = await speaking(make, barge_in_min_words=0)
    harness.stt.streams[0].inject(SpeechStarted())
    await harness.wait_for("cancelled", within=0.05)


async def test_a_final_transcript_over_the_agent_is_a_new_turn(
    make: Callable[..., Harness],
) -> None:
    harness = await speaking(make)
    harness.stt.streams[0].inject(FinalTranscript("what about tomorrow"))
    await harness.wait_for("turn", 2)
    assert harness.of_type("cancelled")[0]["reason"] == "barge_in"
    assert harness.of_type("turn")[1]["text"] == "what about tomorrow"


# ---------------------------------------------------------------- the greeting


async def test_the_greeting_waits_for_audio_ready(make: Callable[..., Harness]) -> None:
    harness = await started(make, mode="voice", greeting="Hello there.", audio_ready=False)
    await asyncio.sleep(0.05)
    assert harness.types == ["ready", "greeting"] and harness.audio == []
    await harness.session.handle(protocol.AudioReadyMessage())
    await harness.wait_for("tts_done")
    assert harness.tts.requests == [("Hello there.", None)] and harness.audio


async def test_the_greetings_audio_is_ready_when_ready_is_sent(
    make: Callable[..., Harness],
) -> None:
    tts = FakeTTS(first_byte_delay=0.05)
    harness = make(mode="voice", greeting="Hello there. How can I help?", tts=tts)
    synthesized_before_ready: list[tuple[str, str | None]] = []
    emit = harness.session._emit_event

    async def watch(event: protocol.Stamped) -> None:
        if isinstance(event.event, protocol.ReadyEvent):
            synthesized_before_ready.extend(tts.requests)
        await emit(event)

    harness.session._emit_event = watch
    await harness.session.start()
    await harness.wait_for("tts_done")
    assert synthesized_before_ready == [("Hello there.", None)]
    assert tts.requests == [("Hello there.", None), ("How can I help?", None)]  # once each
    assert harness.types[:2] == ["ready", "greeting"]


async def test_a_greeting_never_heard_is_dropped_by_the_first_turn(
    make: Callable[..., Harness],
) -> None:
    llm = FakeLLM(script=[["Sure."]])
    harness = await started(make, mode="voice", greeting="Hello there.", audio_ready=False, llm=llm)
    await harness.say("hi")
    await harness.wait_for("tts_done")
    await harness.session.handle(protocol.AudioReadyMessage())
    await asyncio.sleep(0.05)
    assert "cancelled" not in harness.types
    assert harness.tts.requests == [("Sure.", None)]  # the greeting is never spoken late
    assert harness.session.history[0] == {"role": "assistant", "content": "Hello there."}


async def test_audio_sent_while_the_recogniser_connects_is_not_lost(
    make: Callable[..., Harness],
) -> None:
    harness = make(mode="voice", stt=FakeSTT(silence_ms=100, open_delay=0.2))
    starting = asyncio.create_task(harness.session.start())
    await harness.wait_for("ready")
    await harness.speak(speech_ms=200, silence_ms=200)  # before the recogniser is open
    await starting
    await harness.wait_for("turn")
    assert harness.of_type("turn")[0]["text"] == "hello"
