"""The agent editor: the agent's fields, one formset block per tool, and the two together.

The forms check what only they know (parameters typed as JSON text, where a tool runs);
the rules of an agent's tools are the service's (``sessions_app.agent_tools``: schema,
handler syntax), and each of its ``ToolError``s lands on the tool field it names.
"""

from __future__ import annotations

import json
from typing import Any, cast

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.utils.text import slugify

from core import parsers
from engine import protocol
from engine.providers import languages, registry
from engine.providers.spec import ProviderSpec
from engine.session import DEFAULT_EMPTY_REPLY
from engine.session.config import DEFAULT_TOOL_FILLER
from frontend.dashboard.agent_templates import AgentTemplate
from secrets_app.provider_credentials import ProviderNames
from secrets_app.validators import AGENT_SLUG
from sessions_app.agent_tools import AgentToolsInvalid, ToolError
from sessions_app.models import Agent
from sessions_app.services import AGENT_FIELDS

# The editor's own pages live at agents/new/ and agents/templates/.
RESERVED_SLUGS = frozenset({"new", "templates"})
SERVER, BROWSER = "server", "browser"
# How the service names a tool's fields in its messages (the wire's names).
_SERVICE_FIELDS = {
    "name": "name",
    "description": "description",
    "parameters": "parameters",
    "handler": "handler",
    "client": "runs_on",
    "timeoutMs": "timeout_ms",
}

CODE_ATTRS = {
    "class": "code",
    "spellcheck": "false",
    "autocomplete": "off",
    "autocapitalize": "off",
    "wrap": "off",
}


def _unix_newlines(text: str) -> str:
    # Browsers send CRLF from textareas; a handler's pin must not depend on that.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _sentence(message: str) -> str:
    return message[:1].upper() + message[1:]


def slug_from_name(name: str) -> str:
    # slugify keeps underscores, which agent slugs do not allow.
    return slugify(name.replace("_", " "))[:64].strip("-")


def _provider_choices(
    kind: registry.Kind, current: str, own_keys: frozenset[str]
) -> list[tuple[str, str]]:
    # A name no longer offered (a scripted fake) stays listed while chosen; saving it is
    # refused on the field (the service says why).
    specs = registry.specs(kind, choosable=True)
    if current and current not in {spec.name for spec in specs} and current in registry.names(kind):
        specs.append(registry.provider(kind, current))

    def label(spec: ProviderSpec) -> str:
        return f"{spec.label} (this workspace's key)" if spec.name in own_keys else spec.label

    platform = {"stt": settings.STT_PROVIDER, "tts": settings.TTS_PROVIDER}[kind]
    default = registry.provider(kind, platform).label
    return [("", f"Platform default ({default})"), *((spec.name, label(spec)) for spec in specs)]


def _voice_help() -> str:
    """Every text-to-speech provider's voices, as each provider's module declares them."""
    said = []
    for spec in registry.specs("tts", choosable=True):
        voices = spec.capabilities.voices
        if voices:
            rest = "".join(f", {name}" for name in voices[1:])
            said.append(f"{spec.label}: {voices[0]}{' (default)' if rest else ''}{rest}.")
        elif spec.voice_help:
            said.append(f"{spec.label}: {spec.voice_help}.")
    return " ".join(["A voice of the text-to-speech provider.", *said, "Blank: its default."])


class LLMFallbacksField(forms.CharField):
    """LLM fallbacks typed one per line: ``connection``, ``model`` (on the default
    connection) or ``connection model``; a first word that names no connection is a model."""

    widget = forms.Textarea(attrs={"rows": 2, **CODE_ATTRS, "wrap": "soft"})
    connections: frozenset[str] = frozenset()

    def prepare_value(self, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        return "\n".join(
            " ".join(part for part in (f.get("connection"), f.get("model")) if part)
            for f in value
            if isinstance(f, dict)
        )

    # Fallback entries where CharField gives a string (its stubs say str | None).
    def to_python(self, value: Any) -> list[dict[str, str]]:  # type: ignore[override]
        fallbacks = []
        for line in (super().to_python(value) or "").splitlines():
            words = line.split(None, 1)
            if not words:
                continue
            if words[0] in self.connections:
                fallbacks.append({"connection": words[0], "model": "".join(words[1:]).strip()})
            else:
                fallbacks.append({"connection": "", "model": line.strip()})
        return fallbacks


class AnalysisField(forms.CharField):
    """The post-call analysis settings as JSON (checked by the service when saved)."""

    widget = forms.Textarea(attrs={"rows": 6, **CODE_ATTRS})

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, dict):
            return json.dumps(value, indent=2, ensure_ascii=False) if value else ""
        return value

    def to_python(self, value: Any) -> Any:
        text = (super().to_python(value) or "").strip()
        if not text:
            return {}
        try:
            return parsers.loads(text)
        except ValueError as error:
            raise ValidationError(f"Not JSON: {error}") from None


class NameListField(forms.CharField):
    """Names separated by commas, in order."""

    def prepare_value(self, value: Any) -> Any:
        return ", ".join(value) if isinstance(value, list | tuple) else value

    # A list of names where CharField gives a string (its stubs say str | None).
    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        names = (super().to_python(value) or "").split(",")
        return [name.strip() for name in names if name.strip()]


class VocabularyField(forms.CharField):
    """A list of terms, typed one per line."""

    widget = forms.Textarea(attrs={"rows": 4, **CODE_ATTRS, "wrap": "soft"})

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(value) if isinstance(value, list | tuple) else value

    # A list of terms where CharField gives a string (its stubs say str | None).
    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        text = super().to_python(value) or ""
        return [line.strip() for line in text.splitlines() if line.strip()]


class AgentForm(forms.Form):
    name = forms.CharField(max_length=100)
    slug = forms.CharField(
        max_length=64,
        required=False,
        help_text="How pages and API keys name this agent (<code>agent=order-status</code>).",
    )
    instructions = forms.CharField(
        required=False,
        strip=False,
        max_length=protocol.INSTRUCTIONS_MAX,
        widget=forms.Textarea(attrs={"rows": 16, "class": "instructions"}),
        help_text=(
            "Use {{variable}} to insert values the page sends in configure/context, "
            "e.g. {{customer_name}}."
        ),
    )
    greeting = forms.CharField(
        max_length=protocol.GREETING_MAX,
        required=False,
        help_text="Said first, when a session starts. Blank: the agent waits for the user.",
    )
    voice = forms.CharField(
        max_length=64,
        required=False,
        help_text="A voice of the text-to-speech provider. Blank: its default.",
    )
    empty_reply = forms.CharField(
        max_length=protocol.EMPTY_REPLY_MAX,
        required=False,
        label="When the model has no answer",
        help_text=f"Said when the LLM's reply is empty. Blank: “{DEFAULT_EMPTY_REPLY}”",
    )
    vocabulary = VocabularyField(
        required=False,
        label="Words to recognise",
        help_text=(
            "One per line: product names, people, code identifiers (like index.js). Speech "
            f"recognition favours them. At most {protocol.VOCABULARY_MAX}, "
            f"{protocol.VOCABULARY_TERM_MAX} characters each."
        ),
    )
    language = forms.ChoiceField(
        choices=[
            ("", "English"),
            (languages.DETECT, "The caller's (detected)"),
            *((code, name) for code, name in languages.NAMES.items() if code != "en"),
        ],
        required=False,
        help_text="Heard and spoken by the speech providers (they must support it: see the "
        "docs' Languages page); the model is told to answer in it.",
    )
    mode = forms.ChoiceField(
        choices=Agent.Mode.choices,
        initial=Agent.Mode.VOICE,
        help_text="Voice: speech in and out. Text: typed chat, no audio.",
    )
    llm_provider = forms.ChoiceField(
        required=False,
        label="LLM connection",
        help_text="One of this workspace's LLM connections (Providers page).",
    )
    llm_model = forms.CharField(
        max_length=100,
        required=False,
        label="LLM model",
        help_text="Blank: the connection's model (or the platform default model).",
    )
    stt_provider = forms.ChoiceField(required=False, label="Speech-to-text")
    tts_provider = forms.ChoiceField(required=False, label="Text-to-speech")
    llm_fallbacks = LLMFallbacksField(
        required=False,
        label="LLM fallbacks",
        help_text="Tried in order when the LLM fails before answering, one per line: a "
        "connection, a model (on the default connection), or “connection model”.",
    )
    tts_fallbacks = NameListField(
        required=False,
        label="Text-to-speech fallbacks",
        help_text="Tried in order when text-to-speech fails, separated by commas: "
        + ", ".join(registry.platform_names("tts"))
        + ".",
    )
    zero_retention = forms.BooleanField(
        required=False,
        label="Zero retention",
        help_text="Keep nothing said in this agent's sessions (no transcript, tool arguments "
        "or results, no analysis): only metadata and usage.",
    )
    record_audio = forms.BooleanField(
        required=False,
        label="Record audio",
        help_text="Keep both sides of each session's audio, encrypted, playable on its page "
        "(never under zero retention). Part of the published version.",
    )
    preemptive_generation = forms.BooleanField(
        required=False,
        initial=True,
        label="Preemptive generation",
        help_text="Start the reply, held back, as soon as the caller has probably finished, "
        "and send it at once if they have: answers sooner, at the price of LLM tokens spent "
        "on pauses that were not the end (counted in usage). Part of the published version.",
    )
    analysis = AnalysisField(
        required=False,
        label="Post-call analysis",
        help_text='JSON: {"summary": true, "criteria": [{"name", "description"}], "fields": '
        '[{"name", "type", "description"}]}; types string, number, integer, boolean. '
        "Blank: none.",
    )
    idle_timeout_s = forms.IntegerField(
        required=False,
        min_value=5,
        max_value=24 * 3600,
        label="Idle timeout (seconds)",
        help_text="The session ends after this long without speech, text or a tool result. "
        "Blank: the platform default.",
    )
    max_session_s = forms.IntegerField(
        required=False,
        min_value=10,
        max_value=24 * 3600,
        label="Longest session (seconds)",
        help_text="The session ends when it has lasted this long. Blank: the platform default.",
    )
    tool_filler = forms.CharField(
        max_length=200,
        required=False,
        label="While a tool works",
        help_text=f"Said once when tools are slow to answer. Blank: “{DEFAULT_TOOL_FILLER}”",
    )
    tool_filler_after_ms = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=60_000,
        label="Say it after (ms)",
        help_text="Blank: 1500. 0: never.",
    )
    knowledge_timeout_ms = forms.IntegerField(
        required=False,
        min_value=100,
        max_value=60_000,
        label="Knowledge search timeout (ms)",
        help_text="Blank: 10000. Server and browser tools take theirs in each tool below.",
    )

    def __init__(
        self, *args: Any, creating: bool, providers: ProviderNames | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.creating = creating
        configured = providers or ProviderNames()
        names = list(configured.llms)
        current = str(self.initial.get("llm_provider") or "")
        if current and current not in names:  # deleted since: shown, so it can be changed
            names.append(current)
        default = f"Workspace default ({names[0]})" if names else "Platform default"
        select = self.fields["llm_provider"]
        assert isinstance(select, forms.ChoiceField)
        select.choices = [("", default), *((name, name) for name in names)]
        fallbacks = self.fields["llm_fallbacks"]
        assert isinstance(fallbacks, LLMFallbacksField)
        fallbacks.connections = frozenset(configured.llms)
        speech_fields: tuple[tuple[str, registry.Kind], ...] = (
            ("stt_provider", "stt"),
            ("tts_provider", "tts"),
        )
        for field, kind in speech_fields:
            select = self.fields[field]
            assert isinstance(select, forms.ChoiceField)
            current = str(self.initial.get(field) or "")
            select.choices = _provider_choices(kind, current, configured.speech)
        self.fields["voice"].help_text = _voice_help()
        if creating:
            self.fields["slug"].help_text += " Blank: made from the name."
        else:
            self.fields["slug"].required = True

    def clean_slug(self) -> str:
        slug: str = self.cleaned_data["slug"].strip()
        if not slug and self.creating:
            name = self.cleaned_data.get("name") or ""
            slug = slug_from_name(name)
            if not slug and name:
                raise ValidationError("Enter a slug: the name has no letters or digits to use.")
        if slug and not AGENT_SLUG.match(slug):
            raise ValidationError("Use lowercase letters, digits and “-” (like order-status).")
        if slug in RESERVED_SLUGS:
            raise ValidationError(f"“{slug}” is taken by the dashboard's own pages.")
        return slug

    def agent_fields(self) -> dict[str, Any]:
        fields = {name: self.cleaned_data[name] for name in AGENT_FIELDS}
        fields["name"] = fields["name"].strip()
        fields["instructions"] = _unix_newlines(fields["instructions"])
        return fields


class ToolForm(forms.Form):
    name = forms.CharField(
        max_length=64,
        validators=[
            RegexValidator(
                protocol.NAME_PATTERN,
                "Use letters, digits and _, not starting with a digit (like track_order).",
            )
        ],
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    runs_on = forms.ChoiceField(
        label="Where it runs",
        choices=(
            (SERVER, "Server: a JavaScript handler on the platform"),
            (BROWSER, "Browser: your page runs it (client tool)"),
        ),
        initial=SERVER,
    )
    description = forms.CharField(
        required=False,
        max_length=protocol.TOOL_DESCRIPTION_MAX,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="What the tool does and when to use it; the LLM reads this.",
    )
    handler = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 14, **CODE_ATTRS}),
        help_text=(
            "One function, <code>async (args, ctx) =&gt; { … }</code>, run in a sandbox. "
            "<code>ctx.fetch(url, init)</code> calls other services; "
            "<code>ctx.secrets.NAME</code> reads a secret of this workspace. Return what the "
            "LLM should know. Tab indents; Esc then Tab leaves the field."
        ),
    )
    parameters = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, **CODE_ATTRS}),
        help_text=(
            'JSON: argument names and types, e.g. <code>{"city": "string", "days": '
            '"number?"}</code> (<code>?</code> = optional) or <code>{"unit": {"type": '
            '"string", "enum": ["celsius", "fahrenheit"], "optional": true}}</code>; or a '
            "JSON Schema with a root <code>type</code>. Blank: no arguments."
        ),
    )
    timeout_ms = forms.IntegerField(
        required=False,
        min_value=protocol.TOOL_TIMEOUT_MS_MIN,
        max_value=protocol.TOOL_TIMEOUT_MS_MAX,
        label="Timeout (ms)",
        help_text="Optional; blank: the platform default.",
    )

    def clean_handler(self) -> str:
        return _unix_newlines(self.cleaned_data["handler"])

    def clean_parameters(self) -> Any:
        text = self.cleaned_data["parameters"].strip()
        if not text:
            return None
        try:
            return parsers.loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
            ) from None
        except parsers.Refused as refused:
            raise ValidationError(f"Not usable JSON: {refused}.") from None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("DELETE"):  # a removed tool is not saved, so not checked either
            return cleaned
        handler = cleaned.get("handler", "")
        if cleaned.get("runs_on") == BROWSER:
            if handler.strip():
                self.add_error("handler", "A browser tool has no handler here: clear it.")
        elif not handler.strip():
            self.add_error("handler", "Write the handler, or choose Browser if your page runs it.")
        return cleaned

    def tool(self) -> dict[str, Any]:
        """The tool as the service takes it (the wire's names)."""
        data = self.cleaned_data
        tool: dict[str, Any] = {"name": data["name"], "description": data["description"]}
        if data["parameters"] is not None:
            tool["parameters"] = data["parameters"]
        if data["runs_on"] == BROWSER:
            tool["client"] = True
        else:
            tool["handler"] = data["handler"]
        if data["timeout_ms"] is not None:
            tool["timeoutMs"] = data["timeout_ms"]
        return tool


def tool_initial(tool: dict[str, Any]) -> dict[str, Any]:
    """A stored (or template) tool as the editor's initial values; keeps the pin for show."""
    parameters = tool.get("parameters")
    return {
        "name": tool.get("name", ""),
        "description": tool.get("description", ""),
        "runs_on": BROWSER if tool.get("client") else SERVER,
        "handler": tool.get("handler", ""),
        "parameters": "" if parameters is None else json.dumps(parameters, indent=2),
        "timeout_ms": tool.get("timeoutMs"),
        "handler_sha256": tool.get("handler_sha256", ""),
    }


class BaseToolFormSet(forms.BaseFormSet):  # type: ignore[type-arg]
    default_error_messages = {
        "too_many_forms": f"An agent has at most {protocol.TOOLS_MAX} tools.",
    }

    def add_fields(self, form: forms.Form, index: int | None) -> None:
        super().add_fields(form, index)
        form.fields["DELETE"].label = "Remove this tool"

    def kept_forms(self) -> list[ToolForm]:
        """The blocks that become tools, in order: not removed and not left blank."""
        return [
            form
            for form in self.forms
            if getattr(form, "cleaned_data", None) and not form.cleaned_data.get("DELETE")
        ]

    def clean(self) -> None:
        seen: set[str] = set()
        for form in self.kept_forms():
            name = form.cleaned_data.get("name")
            if name in seen:
                form.add_error("name", "Another tool has this name; names must be unique.")
            elif name:
                seen.add(name)


# formset_factory makes a subclass of ``formset``; its stubs say only BaseFormSet.
ToolFormSet = cast(
    "type[BaseToolFormSet]",
    forms.formset_factory(
        ToolForm,
        formset=BaseToolFormSet,
        extra=1,
        can_delete=True,
        max_num=protocol.TOOLS_MAX,
        validate_max=True,
    ),
)


class AgentEditor:
    """The editor page: the agent form and the tools formset, valid or invalid together."""

    def __init__(
        self,
        data: Any,
        *,
        agent: Agent | None = None,
        template: AgentTemplate | None = None,
        providers: ProviderNames | None = None,
    ) -> None:
        if agent is not None:
            initial = {name: getattr(agent, name) for name in AGENT_FIELDS}
            tools = agent.tools
        else:
            initial = dict(template.agent) if template else {}
            tools = template.tools if template else []
        self.form = AgentForm(data, creating=agent is None, initial=initial, providers=providers)
        self.tools = ToolFormSet(data, prefix="tools", initial=[tool_initial(t) for t in tools])

    def is_valid(self) -> bool:
        return all([self.form.is_valid(), self.tools.is_valid()])

    def agent_fields(self) -> dict[str, Any]:
        return self.form.agent_fields()

    def tool_list(self) -> list[dict[str, Any]]:
        return [form.tool() for form in self.tools.kept_forms()]

    def add_service_error(self, error: ValidationError) -> None:
        """Put a service's refusal on the field it names (``slug``, a tool's ``handler``…)."""
        if isinstance(error, AgentToolsInvalid):
            for tool_error in error.tool_errors:
                self._add_tool_error(tool_error)
        elif hasattr(error, "error_dict"):
            for field, errors in error.error_dict.items():
                messages = [_sentence(message) for e in errors for message in e.messages]
                self.form.add_error(field if field in self.form.fields else None, messages)
        else:
            self.form.add_error(None, [_sentence(message) for message in error.messages])

    def _add_tool_error(self, error: ToolError) -> None:
        tool_forms = self.tools.kept_forms()
        if error.index is None or error.index >= len(tool_forms):
            self.form.add_error(None, _sentence(f"{error.path}: {error.message}"))
            return
        field = _SERVICE_FIELDS.get(error.field or "")
        shown = error.inside_field if field else f"{error.path}: {error.message}"
        tool_forms[error.index].add_error(field, _sentence(shown))
