"""The offline engines for real: Piper speaks, faster-whisper listens, and a voice turn
goes through the consumer with both."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Awaitable

import numpy as np
import pytest
from asgiref.sync import sync_to_async

from engine.providers.audio import float_to_pcm16, pcm16_to_float, resample
from engine.providers.base import (
    FinalTranscript,
    LikelyEndOfTurn,
    PartialTranscript,
    ProviderError,
    SpeechStarted,
    STTEvent,
)
from engine.providers.stt.local import adapter as stt_local
from engine.providers.stt.local import turn as stt_local_turn
from engine.providers.stt.local.adapter import (
    Check,
    Decoded,
    Endpointing,
    LocalSTT,
    LocalSTTStream,
    ends_sentence,
    reading,
)
from engine.providers.tts.local.adapter import LocalTTS
from sessions_app.models import TurnRecord
from tests.engine.providers.llm.openai.fake_server import FakeOpenAIServer, text_reply
from tests.factories import make_tenant
from tests.sessions_app.wsclient import Client
from tests.speech import SPOKEN, SPOKEN_WORDS, loud_span, trimmed, words

FRAME = 640  # 20 ms at 16 kHz


def silence(ms: int) -> bytes:
    return b"\0" * (ms * 32)


@pytest.fixture(scope="module")
def phrase_16k() -> bytes:
    """The phrase spoken by the offline voice, as a browser would send it (16 kHz)."""

    async def speak() -> bytes:
        return b"".join([chunk async for chunk in LocalTTS().synthesize(SPOKEN)])

    pcm_24k = asyncio.run(speak())
    return float_to_pcm16(resample(pcm16_to_float(pcm_24k), 24_000, 16_000))


async def max_stall(work: Awaitable[object]) -> float:
    """Run ``work`` while a ticker measures the longest the event loop went unanswered."""
    gaps: list[float] = []

    async def tick() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    try:
        await work
    finally:
        ticker.cancel()
    return max(gaps, default=0.0)


# ---------------------------------------------------------------- Piper


async def test_piper_speaks_24khz_pcm_without_stalling_the_loop() -> None:
    tts = LocalTTS()
    chunks: list[bytes] = []

    async def collect() -> None:
        chunks.extend([chunk async for chunk in tts.synthesize(SPOKEN)])

    stall = await max_stall(collect())
    audio = b"".join(chunks)
    seconds = len(audio) / 48_000
    assert 1.0 < seconds < 3.5
    assert all(len(chunk) % 2 == 0 for chunk in chunks)
    assert np.abs(pcm16_to_float(audio)).max() > 0.3  # speech, not silence
    assert stall < 0.1


async def test_piper_says_nothing_for_blank_text() -> None:
    assert [chunk async for chunk in LocalTTS().synthesize("  \n")] == []


# ---------------------------------------------------------------- Whisper + VAD


async def listen(audio: bytes, *, until_finals: int = 1, within: float = 20.0) -> list[STTEvent]:
    # A fixed silence ends the turn here: these tests are about the words, not the end.
    stream = await LocalSTT(end_silence_ms=500, turn_model=False).open(sample_rate=16_000)
    events: list[STTEvent] = []

    async def feed() -> None:
        for start in range(0, len(audio), FRAME):
            await stream.push_audio(audio[start : start + FRAME])
            await asyncio.sleep(0.002)

    async def collect() -> None:
        async for event in stream.events():
            events.append(event)
            if sum(isinstance(e, FinalTranscript) for e in events) >= until_finals:
                return

    feeding = asyncio.create_task(feed())
    try:
        await asyncio.wait_for(collect(), within)
    finally:
        feeding.cancel()
        await stream.aclose()
    return events


async def test_whisper_transcribes_the_offline_voice(phrase_16k: bytes) -> None:
    events = await listen(silence(400) + phrase_16k + silence(900))
    assert isinstance(events[0], SpeechStarted)
    (final,) = [e for e in events if isinstance(e, FinalTranscript)]
    assert words(final.text) == SPOKEN_WORDS
    assert final.speech_end_at is not None and final.endpoint_at is not None
    assert final.endpoint_at > final.speech_end_at
    partials = [e for e in events if isinstance(e, PartialTranscript)]
    assert all(set(words(p.text)) <= set(words(final.text)) | {"what's"} for p in partials)


async def test_two_utterances_are_two_turns(phrase_16k: bytes) -> None:
    audio = silence(300) + phrase_16k + silence(900) + phrase_16k + silence(900)
    events = await listen(audio, until_finals=2)
    finals = [e for e in events if isinstance(e, FinalTranscript)]
    assert [words(f.text)[-1] for f in finals] == ["paris", "paris"]
    assert sum(isinstance(e, SpeechStarted) for e in events) == 2


async def test_silence_and_quiet_noise_are_not_speech() -> None:
    noise = np.random.default_rng(7).normal(0, 0.002, 16_000 * 3).astype(np.float32)
    stream = await LocalSTT().open(sample_rate=16_000)
    pcm = silence(1000) + float_to_pcm16(noise)
    for start in range(0, len(pcm), FRAME):
        await stream.push_audio(pcm[start : start + FRAME])
    await stream.aclose()
    assert [event async for event in stream.events()] == []


async def test_decoding_never_stalls_the_event_loop(phrase_16k: bytes) -> None:
    # A decode on the loop would stall it for the whole decode (most of a second). A busy
    # machine stalls an idle loop too: the bound is 100 ms, or ten times the longest stall
    # of the same loop doing nothing, measured just before.
    idle = await max_stall(asyncio.sleep(1.0))
    stall = await max_stall(listen(silence(300) + phrase_16k + silence(900)))
    assert stall < max(0.1, 10 * idle), f"stalled {stall:.3f}s, {idle:.3f}s when idle"


# ---------------------------------------------------------------- the end of a turn


@pytest.fixture
def verdict(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The smart-turn model replaced by a fixed answer (tests set ``verdict[0]``)."""
    answer = [0.5]

    async def predict(samples: np.ndarray) -> float:
        return answer[0]

    monkeypatch.setattr(stt_local_turn, "predict", predict)
    return answer


def collecting(stream: LocalSTTStream, events: list[STTEvent]) -> asyncio.Task[None]:
    """A task that appends ``stream``'s events to ``events``."""

    async def collect() -> None:
        async for event in stream.events():
            events.append(event)

    return asyncio.create_task(collect())


async def fed_until_final(stream: LocalSTTStream, audio: bytes, events: list[STTEvent]) -> None:
    """``audio`` fed a frame every 4 ms (the loop runs between frames, as with a live
    microphone), then up to 20 s for a final among ``events``."""
    for start in range(0, len(audio), FRAME):
        await stream.push_audio(audio[start : start + FRAME])
        await asyncio.sleep(0.004)
    for _ in range(400):
        if any(isinstance(event, FinalTranscript) for event in events):
            break
        await asyncio.sleep(0.05)


def whisper_writes(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """Whisper replaced by one fixed text (surely decoded), whatever the audio."""

    def transcribe(samples: np.ndarray, prompt: str | None = None, language: str = "en") -> Decoded:
        return Decoded(text, -0.1)

    monkeypatch.setattr(stt_local, "transcribe", transcribe)


async def heard(
    audio: bytes,
    *,
    live: bool = False,
    real_time: bool = False,
    rules: Endpointing | None = None,
) -> list[FinalTranscript]:
    """Finals of ``audio`` fed at once, then nothing more, once every decode and verdict it
    started is done: where the audio's silence stays short of the limits, only the model
    and the words can end the turn. ``live``: the loop runs between frames, as with a live
    microphone, so the partials decoded meanwhile are shown before the pause;
    ``real_time``: a frame every 20 ms, so a pause lasts as long as it would for a user."""
    stream = await LocalSTT(endpointing=rules).open(sample_rate=16_000)
    finals: list[FinalTranscript] = []

    async def collect() -> None:
        async for event in stream.events():
            if isinstance(event, FinalTranscript):
                finals.append(event)

    reader = asyncio.create_task(collect())
    began = time.monotonic()
    for index, start in enumerate(range(0, len(audio), FRAME)):
        await stream.push_audio(audio[start : start + FRAME])
        if real_time:
            await asyncio.sleep(max(0.0, began + (index + 1) * 0.02 - time.monotonic()))
        elif live:
            await asyncio.sleep(0.004)
    for _ in range(600):  # the work is bounded; 30 s is only a guard against a hang
        await asyncio.sleep(0.05)
        if not stream._decodes:
            break
    await stream.aclose()
    await reader
    return finals


async def test_a_sure_model_and_a_finished_sentence_end_the_turn_at_a_short_pause(
    phrase_16k: bytes, verdict: list[float]
) -> None:
    verdict[0] = 0.97
    (final,) = await heard(silence(300) + phrase_16k + silence(300))
    assert words(final.text) == SPOKEN_WORDS


async def test_an_unsure_model_waits_past_a_short_pause(said: bytes, verdict: list[float]) -> None:
    verdict[0] = 0.2  # "not finished": 300 ms of silence is not the end (the fallback is 1 s)
    assert await heard(silence(300) + said + silence(300)) == []


async def test_words_that_trail_off_are_not_the_end_even_if_the_model_is_sure(
    phrase_16k: bytes, verdict: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    verdict[0] = 0.99
    # What Whisper writes for a user who stops mid-sentence (it punctuates what it hears).
    whisper_writes(monkeypatch, "What is the...")
    assert await heard(silence(300) + phrase_16k + silence(300)) == []


async def test_speech_after_a_pause_makes_one_turn(phrase_16k: bytes, verdict: list[float]) -> None:
    verdict[0] = 0.01
    audio = silence(300) + phrase_16k + silence(250) + phrase_16k + silence(1200)
    (final,) = await heard(audio)
    assert words(final.text).count("paris") == 2


@pytest.fixture(scope="module")
def said(phrase_16k: bytes) -> bytes:
    """The phrase without the voice's own silence before and after: the silence after it
    is then exactly what a test puts there."""
    loud = loud_span(pcm16_to_float(phrase_16k))
    return phrase_16k[loud.start * 2 : loud.stop * 2]


async def test_words_without_a_mark_and_a_sure_model_end_the_turn_at_the_first_pause(
    said: bytes, verdict: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whisper often writes a name or a number without a full stop ("Call Margaret
    # Thompson"); the rule before waited 480 ms for a sentence's mark, then asked the
    # model again.
    verdict[0] = 0.99
    whisper_writes(monkeypatch, "Call Margaret Thompson")
    (final,) = await heard(silence(300) + said + silence(300))
    assert final.text == "Call Margaret Thompson"
    assert await heard(silence(300) + said + silence(300), rules=BEFORE) == []


async def test_a_finished_question_ends_the_turn_at_the_first_short_pause(
    said: bytes, verdict: list[float]
) -> None:
    # The model only fairly sure (it often doubts synthetic voices' finished questions),
    # the words end a sentence: 160 ms of silence is the end. The rule before waited for
    # 480 ms.
    verdict[0] = 0.7
    (final,) = await heard(silence(300) + said + silence(300))
    assert words(final.text) == SPOKEN_WORDS
    assert await heard(silence(300) + said + silence(300), rules=BEFORE) == []


async def test_words_without_a_mark_end_the_turn_within_640_ms_even_if_the_model_doubts_them(
    said: bytes, verdict: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rule before waited a whole second for these.
    verdict[0] = 0.05
    whisper_writes(monkeypatch, "Call Margaret Thompson")
    # In real time: the verdict comes before the fixed silence (600 ms) that ends a turn
    # whose verdict has not come.
    assert await heard(silence(300) + said + silence(400), real_time=True) == []
    (final,) = await heard(silence(300) + said + silence(720), real_time=True)
    assert final.text == "Call Margaret Thompson"
    assert await heard(silence(300) + said + silence(720), real_time=True, rules=BEFORE) == []


async def test_a_number_without_a_mark_ends_the_turn_at_480_ms_even_if_the_model_doubts_it(
    said: bytes, verdict: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whisper writes a PIN or a phone number without a full stop, and the model doubts
    # nearly all of them, finished or not; a name without a mark waits longer.
    verdict[0] = 0.05
    whisper_writes(monkeypatch, "My PIN is 4 7 1 9")
    (final,) = await heard(silence(300) + said + silence(560))
    assert final.text == "My PIN is 4 7 1 9"
    whisper_writes(monkeypatch, "Call Margaret Thompson")
    assert await heard(silence(300) + said + silence(560)) == []


@pytest.fixture(scope="module")
def paused_mid_sentence() -> bytes:
    """Piper says "Tell my boss that", pauses 400 ms, and goes on "the meeting moved to
    Friday." (16 kHz, as a browser sends it)."""

    async def speak(text: str) -> np.ndarray:
        pcm = b"".join([chunk async for chunk in LocalTTS().synthesize(text)])
        return trimmed(resample(pcm16_to_float(pcm), 24_000, 16_000))

    first, second = (asyncio.run(speak(text)) for text in PAUSED_PARTS)
    gap = np.zeros(16_000 * 400 // 1000, np.float32)
    return silence(300) + float_to_pcm16(np.concatenate([first, gap, second])) + silence(1200)


PAUSED_PARTS = ("Tell my boss that", "the meeting moved to Friday.")


@pytest.mark.parametrize("rules", ["graded", "before"])
async def test_a_400_ms_pause_after_a_word_that_leaves_the_sentence_open_is_not_the_end(
    paused_mid_sentence: bytes,
    verdict: list[float],
    monkeypatch: pytest.MonkeyPatch,
    rules: str,
) -> None:
    # What Whisper writes for the first part (it punctuates the pause), at once, and a
    # model sure the user is done: the last word still says more is coming. The rule
    # before (a sentence's mark and a sure model at the first pause) cut the user off.
    verdict[0] = 0.95
    whisper_writes(monkeypatch, "Tell my boss that.")
    finals = await heard(
        paused_mid_sentence, real_time=True, rules=None if rules == "graded" else BEFORE
    )
    assert len(finals) == (1 if rules == "graded" else 2)


# The end-of-turn rule before the graded one (bench/voice_to_voice.py's ``smart``).
BEFORE = Endpointing(
    checks=(
        Check(160, done=0.8),
        Check(480, done=0.0),
        Check(480, open=0.5, trailing=0.5, ask=True),
    ),
    open_words=frozenset(),
)


# ---------------------------------------------------------------- a speculative final


RIGHT, WRONG = "What is the capital of France?", "What is the capital I'm France?"


def decoder(partial: Decoded, final: Decoded, asked: list[str]) -> object:
    """Whisper replaced by fixed words and scores: what the partial thread and the final
    thread (the speculative decode) hear."""

    def transcribe(samples: np.ndarray, prompt: str | None = None, language: str = "en") -> Decoded:
        kind = "partial" if "partial" in threading.current_thread().name else "final"
        asked.append(kind)
        return {"partial": partial, "final": final}[kind]

    return transcribe


@pytest.mark.parametrize(
    ("partial", "final", "kept"),
    [
        # The partial heard every word and the decoder was surer of it: kept.
        (Decoded(RIGHT, -0.15), Decoded(WRONG, -0.62), RIGHT),
        # The speculative final was the surer one: kept.
        (Decoded(WRONG, -0.62), Decoded(RIGHT, -0.15), RIGHT),
        # The partial missed the last word: it cannot be the final, which heard them all.
        (Decoded("What is the capital", -0.1), Decoded(WRONG, -0.62), WRONG),
        (Decoded("What is the cap", -0.3), Decoded(RIGHT, -0.9), RIGHT),
        # They agree.
        (Decoded(RIGHT, -0.3), Decoded(RIGHT, -0.3), RIGHT),
    ],
)
async def test_a_speculative_final_is_never_less_sure_than_a_partial_that_heard_it_all(
    phrase_16k: bytes, verdict: list[float], monkeypatch: pytest.MonkeyPatch,
    partial: Decoded, final: Decoded, kept: str,
) -> None:  # fmt: skip
    verdict[0] = 0.97  # sure at the first pause: the speculative decode is the final
    asked: list[str] = []
    fixed = decoder(partial, final, asked)
    monkeypatch.setattr(stt_local, "transcribe", fixed)
    monkeypatch.setattr(stt_local, "transcribe_partial", fixed)
    (heard_final,) = await heard(silence(300) + phrase_16k + silence(300), live=True)
    assert "partial" in asked  # the user saw a partial before the pause
    assert heard_final.text == kept
    # Never decoded again to check it (with the full window that was 0.4-2.4 s of waiting).
    assert asked.count("final") == 1


async def test_a_partial_decoded_after_its_turn_ended_is_never_shown(
    phrase_16k: bytes, verdict: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The partial thread is still decoding the start of the utterance when the turn ends
    # and its final is out; that partial ("What is the") must not replace the final on the
    # user's screen.
    verdict[0] = 0.97
    whisper_writes(monkeypatch, RIGHT)
    decoding, release = threading.Event(), threading.Event()

    def slow_partial(
        samples: np.ndarray, prompt: str | None = None, language: str = "en"
    ) -> Decoded:
        decoding.set()
        release.wait(30)
        return Decoded("What is the", -0.1)

    monkeypatch.setattr(stt_local, "transcribe_partial", slow_partial)
    stream = await LocalSTT().open(sample_rate=16_000)
    events: list[STTEvent] = []
    reader = collecting(stream, events)
    try:
        await fed_until_final(stream, silence(300) + phrase_16k + silence(600), events)
        assert decoding.is_set()  # a partial was under way when the turn ended
    finally:
        release.set()
    for _ in range(400):  # the partial's decode comes back
        await asyncio.sleep(0.05)
        if not stream._decodes:
            break
    await stream.aclose()
    await reader
    # The pause's final was said ahead (``LikelyEndOfTurn``) with the final's own words.
    assert [type(event) for event in events] == [SpeechStarted, LikelyEndOfTurn, FinalTranscript]
    likely, final = events[1:]
    assert isinstance(final, FinalTranscript) and final.text == RIGHT
    assert isinstance(likely, LikelyEndOfTurn) and likely.text == RIGHT


def test_how_the_words_read_finished_open_or_trailing() -> None:
    assert reading("Which platform does it leave from?") == "done"
    assert reading("Call Margaret Thompson") == "open"
    assert reading("My PIN is 4 7 1 9") == "number"
    assert reading("The code is 904.") == "done"
    assert reading("Tell my boss that.") == "trailing"
    assert reading("Send an email to") == "trailing"
    assert reading("Can you check whether my...") == "trailing"
    assert reading("") == "trailing"


def test_words_in_any_script_read_as_words() -> None:
    """The multilingual Whisper writes Russian or Spanish: its words were no words (ASCII
    only), so every such sentence read as trailing off, and waited for the slowest checks."""
    assert reading("Какая сегодня погода?") == "done"
    assert reading("¿Dónde está la estación?") == "done"
    assert reading("Позвоните Маргарите") == "open"


def test_whisper_punctuation_says_whether_a_sentence_ended() -> None:
    assert ends_sentence("Which platform does it leave from?")
    assert ends_sentence("Turn it off.  ")
    assert not ends_sentence("Can you check whether my...")
    assert not ends_sentence("Please add milk")
    assert not ends_sentence("")


def test_the_end_of_turn_model_reads_8_seconds_of_16_khz_audio() -> None:
    assert stt_local_turn.available()  # installed by test.sh from the pipecat-ai wheel
    samples = pcm16_to_float(silence(2000))
    assert stt_local_turn.features(samples).shape == (1, 80, 800)
    assert 0.0 <= stt_local_turn.probability_complete(samples) <= 1.0


async def test_an_unusable_sample_rate_is_a_clear_error() -> None:
    with pytest.raises(ProviderError, match="11025") as caught:
        await LocalSTT().open(sample_rate=11_025)
    assert caught.value.code == "stt_failed"


# ---------------------------------------------------------------- a voice turn, end to end


@pytest.fixture
async def llm(settings) -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as server:
        settings.LLM_BASE_URL = server.base_url
        settings.LLM_API_KEY = "test-llm-key"
        yield server


@pytest.mark.django_db(transaction=True)
async def test_a_voice_turn_with_the_offline_engines(settings, llm, phrase_16k: bytes) -> None:
    settings.STT_PROVIDER = settings.TTS_PROVIDER = "local"
    llm.script(text_reply("It is sunny in Paris today. ", "Take sunglasses."))
    tenant = await sync_to_async(make_tenant)("offline@example.com")
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": "voice", "instructions": "Be brief."})
        ready = await client.until("ready")
        audio = silence(300) + phrase_16k + silence(1000)
        for start in range(0, len(audio), FRAME):  # in real time, as a microphone does
            await client.send_raw(data=audio[start : start + FRAME])
            await asyncio.sleep(0.02)
        turn = await client.until("turn", timeout=20)
        assert words(turn["text"]) == SPOKEN_WORDS
        chat = await client.until("chat", timeout=10)
        assert chat["text"] == "It is sunny in Paris today. Take sunglasses."
        await client.until("tts_done", timeout=10)
        metrics = await client.until("metrics")
    assert ready["ttsSampleRate"] == 24_000
    seconds = sum(len(frame) for frame in client.audio) / 48_000
    assert seconds >= 0.5
    assert max(len(frame) for frame in client.audio) <= 4_800  # 100 ms frames
    assert metrics["source"] == "speech" and metrics["firstAudioMs"] > 0
    assert metrics["endOfUtteranceMs"] >= 150  # at least the first pause was waited for
    assert llm.requests[0].json["messages"][-1]["content"] == turn["text"]
    record = await sync_to_async(TurnRecord.objects.get)(session__workspace=tenant.workspace)
    assert record.metrics["firstAudioMs"] == metrics["firstAudioMs"]


@pytest.mark.django_db(transaction=True)
async def test_barge_in_mid_speech_stops_at_once_and_history_keeps_what_was_heard(
    settings,
    llm,
    phrase_16k: bytes,  # the voice is loaded before the turn starts
) -> None:
    from tests.engine.providers.llm.openai.fake_server import Delay, Done, Finish, Text

    settings.TTS_PROVIDER = "local"
    llm.script(
        Text("The first sentence is short. "),
        Text("The second sentence comes right after it. "),
        Delay(5),
        Text("The third one is never heard."),
        Finish("stop"),
        Done(),
    )
    llm.script(text_reply("Sure."))
    tenant = await sync_to_async(make_tenant)("barge@example.com")
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": "voice"})
        await client.until("ready")
        await client.send({"type": "text", "text": "tell me three things"})
        await client.next_audio(timeout=10)  # the agent starts speaking
        sent_at = time.monotonic()
        await client.send({"type": "cancel", "playedMs": 300})
        await client.until("cancelled")
        elapsed = time.monotonic() - sent_at
        audio_at_cancel = len(client.audio)
        assert (await client.next())["type"] == "metrics"  # the cancelled turn's figures
        assert await client.ws.receive_nothing(timeout=0.3)  # and not one frame more
        assert len(client.audio) == audio_at_cancel
        await client.send({"type": "text", "text": "and?"})
        await client.until("chat")
    # At once: well under the 0.3 s Piper takes for the next sentence (which it must not wait
    # for), with room for a loaded machine's scheduling.
    assert elapsed < 0.15
    assert "chat" not in client.types()[: client.types().index("cancelled")]
    heard = llm.requests[1].json["messages"][-2]
    assert heard == {"role": "assistant", "content": "The first sentence is short. [interrupted]"}


# ---------------------------------------------------------------- loading a model once


def test_an_offline_model_loads_once_and_a_failure_says_what_to_install() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from engine.providers import audio
    from engine.providers.audio import OfflineModel

    calls: list[str] = []

    def broken() -> object:
        calls.append("load")
        raise ImportError("no module named piper")

    with ThreadPoolExecutor(max_workers=1) as executor:
        model = OfflineModel(
            broken, executor=executor, failure="install piper-tts", code="tts_failed"
        )
        model.preload()
        for _ in range(3):
            with pytest.raises(ProviderError, match="install piper-tts") as caught:
                model.get()
            assert caught.value.code == "tts_failed"
        loaded = OfflineModel(object, executor=executor, failure="-", code="stt_failed")
        assert loaded.get() is loaded.get()
    assert calls == ["load"]  # tried once, remembered (for a while: test_model_loading.py)
    audio._MODELS.remove(model)  # a failed model would fail /healthz in the next tests
    audio._MODELS.remove(loaded)


async def test_a_pause_says_its_final_ahead_and_speaking_again_withdraws_it(
    phrase_16k: bytes, verdict: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Words that trail off and a model that doubts them: a 400 ms pause does not end the
    # turn, but each pause says its final ahead (``LikelyEndOfTurn``, for preemptive
    # generation) as soon as it is decoded; the user speaking again withdraws it.
    verdict[0] = 0.0
    trailing = "What is the capital of..."
    monkeypatch.setattr(stt_local, "transcribe", lambda *args, **kwargs: Decoded(trailing, -0.1))
    monkeypatch.setattr(
        stt_local, "transcribe_partial", lambda *args, **kwargs: Decoded(trailing, -0.1)
    )
    stream = await LocalSTT().open(sample_rate=16_000)
    events: list[STTEvent] = []
    reader = collecting(stream, events)
    audio = silence(300) + phrase_16k + silence(400) + phrase_16k + silence(1200)
    await fed_until_final(stream, audio, events)
    await stream.aclose()
    await reader
    kinds = [type(e) for e in events if not isinstance(e, PartialTranscript)]
    assert kinds == [
        SpeechStarted, LikelyEndOfTurn, SpeechStarted, LikelyEndOfTurn, FinalTranscript
    ]  # fmt: skip
    assert {e.text for e in events if isinstance(e, LikelyEndOfTurn | FinalTranscript)} == {
        trailing
    }
