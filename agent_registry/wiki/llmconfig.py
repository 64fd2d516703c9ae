"""Whether the optional LLM is configured, and how (wiki/llm.py uses it): read from the
environment alone, so that a ``wiki query`` learns the LLM is off without importing the
LLM module (wiki/fastpath.py's quick path).  The variables are in wiki/llm.py's docstring."""
from __future__ import annotations

import os
from collections import namedtuple

DEFAULT_TIMEOUT = 30.0

# a named tuple, not a dataclass: importing dataclasses (inspect, ...) would cost every
# `wiki query` several ms just to learn that no LLM is configured
LLMConfig = namedtuple("LLMConfig", "base_url model api_key timeout temperature")

MOONSHOT_URL = "https://api.moonshot.ai/v1"  # the predecessor's default endpoint
KIMI_DEFAULT_MODEL = "kimi-k2.5"
KIMI_KEYS = ("KIMI_API_KEY", "MOONSHOT_API_KEY")
OURS = ("AGENT_REGISTRY_LLM_BASE_URL", "AGENT_REGISTRY_LLM_MODEL", "AGENT_REGISTRY_LLM_API_KEY")


def _first(env, *names: str) -> str:
    return next((env[n].strip() for n in names if env.get(n, "").strip()), "")


def _number(text: str, default: float) -> float:
    try:
        return float(text) if text else default
    except ValueError:
        return default


def resolve(env: dict[str, str] | None = None) -> tuple[LLMConfig | None, str]:
    """(the configured endpoint, "") or (None, one line saying why the LLM is off)."""
    env = os.environ if env is None else env
    kimi = bool(_first(env, *KIMI_KEYS))  # the predecessor's setup: Moonshot by default
    key = _first(env, "AGENT_REGISTRY_LLM_API_KEY", *KIMI_KEYS, "OPENAI_API_KEY")
    base_url = _first(env, "AGENT_REGISTRY_LLM_BASE_URL", "KIMI_BASE_URL") or \
        (MOONSHOT_URL if kimi else "")
    model = _first(env, "AGENT_REGISTRY_LLM_MODEL", "KIMI_MODEL") or \
        (KIMI_DEFAULT_MODEL if kimi else "")
    if not (base_url or model or key):
        return None, ("no LLM configured (set AGENT_REGISTRY_LLM_BASE_URL, "
                      "AGENT_REGISTRY_LLM_MODEL and AGENT_REGISTRY_LLM_API_KEY, or KIMI_API_KEY)")
    unset = [name for name, value in zip(OURS, (base_url, model, key)) if not value]
    if unset:
        return None, f"the LLM is not fully configured: {', '.join(unset)} not set"
    import importlib.util
    if importlib.util.find_spec("langchain_openai") is None:
        from ..store.extras import install_command
        return None, f"langchain-openai is not installed ({install_command('llm')})"
    timeout = _number(env.get("AGENT_REGISTRY_LLM_TIMEOUT", ""), DEFAULT_TIMEOUT)
    temperature = _number(_first(env, "AGENT_REGISTRY_LLM_TEMPERATURE", "KIMI_TEMPERATURE"),
                          1.0 if model.startswith("kimi-k2") else 0.0)
    return LLMConfig(base_url, model, key, timeout if timeout > 0 else DEFAULT_TIMEOUT,
                     temperature), ""
