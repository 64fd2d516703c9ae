"""The optional LLM: rerank search candidates and distil diaries, through langchain-openai.

Configured only by the environment (any OpenAI-compatible endpoint: OpenAI, Kimi/Moonshot,
a local server):

    AGENT_REGISTRY_LLM_BASE_URL   AGENT_REGISTRY_LLM_MODEL
    AGENT_REGISTRY_LLM_API_KEY    (falls back to KIMI_API_KEY, MOONSHOT_API_KEY, OPENAI_API_KEY)
    AGENT_REGISTRY_LLM_TIMEOUT    seconds per request (default 30)

The predecessor tool's variables work too: KIMI_API_KEY (or MOONSHOT_API_KEY),
KIMI_BASE_URL (default Moonshot's endpoint), KIMI_MODEL (default kimi-k2.5) and
KIMI_TEMPERATURE (default 1, the only value kimi-k2 models accept); ours win where both
are set.  When the LLM is off, :func:`resolve` says why in one line.

langchain_openai is imported only when an endpoint is configured (it costs about a second).
Every answer must be one strict JSON object, validated against the expected shape; a
reply that is not is sent back to the model with the error, up to ATTEMPTS times.  Any
failure raises LLMError, and the caller keeps its non-LLM answer.
"""
from __future__ import annotations

import json
import re

from ..errors import RegistryError
from .entry import LIST_FIELDS, NOT_DOCUMENTED, ROUTER_MAX, TEXT_FIELDS
from .llmconfig import MOONSHOT_URL, LLMConfig, resolve  # noqa: F401 (re-exported)

ATTEMPTS = 3
DIARY_LIMIT = 24_000  # characters of diary sent for distillation (the end matters most)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


class LLMError(RegistryError):
    """The LLM did not give a usable answer (unreachable, timeout, HTTP error, bad JSON)."""


def _client(cfg: LLMConfig):
    from langchain_openai import ChatOpenAI  # only now: the import alone costs ~1 s
    # our own retries are on bad answers; transport failures fail fast to the fallback
    return ChatOpenAI(model=cfg.model, base_url=cfg.base_url, api_key=cfg.api_key,
                      timeout=cfg.timeout, max_retries=0, temperature=cfg.temperature)


def ask_json(cfg: LLMConfig, system: str, user: str, validate) -> dict:
    """Ask for one JSON object; *validate(obj)* returns the cleaned object or raises
    ValueError, whose message is sent back to the model on the next attempt."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    client = _client(cfg)
    messages = [SystemMessage(system), HumanMessage(user)]
    problem = ""
    for _ in range(ATTEMPTS):
        try:
            reply = client.invoke(messages)
        except Exception as exc:  # openai/httpx raise many types: all mean "no answer"
            raise LLMError(f"LLM request failed: {type(exc).__name__}: "
                           f"{str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")) from None
        content = reply.content if isinstance(reply.content, str) else json.dumps(reply.content)
        try:
            data = json.loads(_FENCE.sub("", content.strip()))
            if not isinstance(data, dict):
                raise ValueError("the answer must be one JSON object")
            return validate(data)
        except ValueError as exc:
            problem = str(exc).splitlines()[0] if str(exc) else "invalid JSON"
            messages += [AIMessage(content), HumanMessage(
                f"That answer was rejected: {problem}. Reply again with only the JSON "
                "object, exactly in the requested shape, and nothing else.")]
    raise LLMError(f"LLM gave no valid JSON after {ATTEMPTS} attempts: {problem}")


# -- rerank ---------------------------------------------------------------------------

RERANK_SYSTEM = (
    "You route a developer's question to past coding-agent sessions. You get the question "
    "and candidate wiki entries. Keep only the entries that are relevant, most relevant "
    "first. Reply with one JSON object and nothing else: "
    '{"results": [{"id": "<candidate id>", "description": "<one line: what that session '
    'did>", "why": "<one line: why it answers the question>"}]}. Use only candidate ids; '
    'an empty list means none is relevant.')


def _one_line(value, label: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{label} must be a non-empty string")
    text = " ".join(value.split())
    if len(text) > limit:
        raise ValueError(f"{label} is longer than {limit} characters")
    return text


def rerank(cfg: LLMConfig, question: str, candidates: list[dict]) -> list[dict]:
    """[{id, description, why}] for the relevant candidates, most relevant first."""
    known = {c["id"] for c in candidates}
    lines = [f"Question: {question}", "", "Candidates:"]
    for c in candidates:
        lines.append(json.dumps({k: c.get(k, "") for k in ("id", "router", "what", "bugs", "excerpt")},
                                ensure_ascii=False))

    def validate(data: dict) -> dict:
        results = data.get("results")
        if not isinstance(results, list):
            raise ValueError('the object needs a "results" list')
        out, seen = [], set()
        for item in results:
            if not isinstance(item, dict):
                raise ValueError("each result must be an object")
            rid = item.get("id")
            if rid not in known:
                raise ValueError(f"unknown id {rid!r}: use only the candidate ids")
            if rid in seen:
                continue
            seen.add(rid)
            out.append({"id": rid, "description": _one_line(item.get("description"), "description", 300),
                        "why": _one_line(item.get("why"), "why", 300)})
        return {"results": out}

    return ask_json(cfg, RERANK_SYSTEM, "\n".join(lines), validate)["results"]


# -- distil ---------------------------------------------------------------------------

DISTIL_SYSTEM = (
    "You write the wiki entry of a finished coding-agent session from its diary, so that a "
    "later agent can tell whether the work was done before, how, and what broke. Fill in "
    "exactly the fields you are asked for, from the diary alone, plainly and briefly. "
    "Reply with one JSON object and nothing else.")

FIELD_HELP = {
    "router": f"one line of at most {ROUTER_MAX} characters naming the task and its outcome, "
              "with the words someone searching for it would use",
    "what": "what was done (a few sentences)",
    "how": "how it was done: approach, steps, commands",
    "solved": "the problem that was solved",
    "bugs": "list of strings: bugs found or hit (empty list if none)",
    "tools": "list of strings: skills, tools, MCP servers used (empty list if none)",
}


def distil(cfg: LLMConfig, entry: dict, wanted: list[str]) -> dict:
    """Values for the *wanted* narrative fields of *entry*, from its diary."""
    known = {k: entry[k] for k in (*TEXT_FIELDS, *LIST_FIELDS, "files_touched")
             if k not in wanted and entry.get(k) and entry.get(k) != NOT_DOCUMENTED}
    diary = entry.get("body", "")
    if len(diary) > DIARY_LIMIT:
        diary = "[…earlier lines omitted…]\n" + diary[-DIARY_LIMIT:]
    shape = {name: FIELD_HELP[name] for name in wanted}
    user = (f"Fields to fill, as a JSON object with exactly these keys:\n"
            f"{json.dumps(shape, indent=1)}\n\nWhat the agent already wrote (keep consistent):\n"
            f"{json.dumps(known, ensure_ascii=False, indent=1)}\n\nDiary:\n{diary}")

    def validate(data: dict) -> dict:
        out = {}
        for name in wanted:
            value = data.get(name)
            if name in LIST_FIELDS:
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ValueError(f'"{name}" must be a list of strings')
                out[name] = [" ".join(v.split()) for v in value if v.strip()]
            elif name == "router":
                out[name] = _one_line(value, "router", ROUTER_MAX)
            else:
                if not isinstance(value, str) or not value.strip():
                    raise ValueError(f'"{name}" must be a non-empty string')
                out[name] = value.strip()
        return out

    return ask_json(cfg, DISTIL_SYSTEM, user, validate)
