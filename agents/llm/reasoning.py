"""Thinking apart from the answer: a reasoning model's draft is kept, never parsed as its move.

Where thinking arrives: a separate field (`message.reasoning_content` from DeepSeek, vLLM and
llama.cpp; `message.reasoning` from OpenRouter and newer vLLM; Ollama's `message.thinking`), or
inline in the content as `<think>…</think>` (closed, or left open when the model was cut off, or
only closed when the server's chat template opened it). `split_thinking` returns the answer with
every such block removed and the thinking joined in order.

Limits: only `<think>` and `<thinking>` tags are recognised; a content with no tags and no
reasoning field is all answer.
"""

from __future__ import annotations

import re

_CLOSED = re.compile(r"<(think|thinking)>(.*?)</\1>", re.S | re.I)
_OPEN = re.compile(r"<(?:think|thinking)>", re.I)
_CLOSE = re.compile(r"</(?:think|thinking)>", re.I)


def split_thinking(content: str, reasoning: str | None = None) -> tuple[str, str]:
    """(answer, thinking) of one reply. The answer is unchanged when there is no inline thinking."""
    parts: list[str] = [reasoning.strip()] if reasoning and reasoning.strip() else []
    if "<" not in content:
        return content, "\n\n".join(parts)
    text = content
    found = False
    for m in _CLOSED.finditer(text):
        parts.append(m.group(2).strip())
        found = True
    text = _CLOSED.sub("", text)
    # A closing tag without its opener: the chat template opened the block, so all before it is thinking.
    closes = list(_CLOSE.finditer(text))
    if closes:
        parts.append(text[: closes[-1].start()].strip())
        text = text[closes[-1].end() :]
        found = True
    # An opener never closed: the model was cut off (or never stopped) while thinking.
    opened = _OPEN.search(text)
    if opened:
        parts.append(text[opened.end() :].strip())
        text = text[: opened.start()]
        found = True
    if not found:
        return content, "\n\n".join(parts)
    return text.strip(), "\n\n".join(p for p in parts if p)
