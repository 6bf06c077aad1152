"""A tiny character-level language model in numpy: trained at start-up on ``corpus.txt``, sampled on CPU.

The model reads the last ``context`` characters, embeds each one, passes the concatenation through one
``tanh`` hidden layer and a softmax over the corpus' characters. Training is minibatch
Adam for a fixed number of steps (about a second on one core); generation samples one character at a
time and yields it: a token is one character, of the prompt (``tokenize``) as of the output. A sampled
``STOP`` (the end of a sentence) ends the output, as an end-of-sequence token would. No download, no GPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CORPUS = Path(__file__).with_name("corpus.txt")
STOP = "."
"""The character that ends a generation (the model's end-of-sequence token: finish reason ``stop``)."""


@dataclass(frozen=True)
class ModelSize:
    """Context length in characters, embedding width, hidden units and training steps."""

    context: int = 4
    embed: int = 12
    hidden: int = 64
    steps: int = 600


SMALL = ModelSize()
LARGE = ModelSize(context=8, embed=16, hidden=192, steps=400)


class CharModel:
    """Train with ``CharModel(size)``; sample with ``generate(prompt, max_tokens)``."""

    def __init__(self, size: ModelSize = SMALL, text: str | None = None, seed: int = 0) -> None:
        text = " ".join((text if text is not None else CORPUS.read_text()).split())
        self.size = size
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}
        self.rng = np.random.default_rng(seed)
        ids = np.array([self.index[c] for c in text], dtype=np.int64)
        c, v = size.context, len(self.chars)
        windows = np.lib.stride_tricks.sliding_window_view(ids, c + 1)
        self._x, self._y = windows[:, :c], windows[:, c]
        r = self.rng
        self.emb = r.normal(0, 0.1, (v, size.embed))
        self.w1 = r.normal(0, (c * size.embed) ** -0.5, (c * size.embed, size.hidden))
        self.b1 = np.zeros(size.hidden)
        self.w2 = r.normal(0, size.hidden**-0.5, (size.hidden, v))
        self.b2 = np.zeros(v)
        self.loss = self._train(size.steps)

    def _params(self) -> list[np.ndarray]:
        return [self.emb, self.w1, self.b1, self.w2, self.b2]

    def _train(self, steps: int, batch: int = 256, lr: float = 0.01) -> float:
        params = self._params()
        m = [np.zeros_like(p) for p in params]
        s = [np.zeros_like(p) for p in params]
        loss = float("nan")
        for t in range(1, steps + 1):
            pick = self.rng.integers(0, len(self._y), batch)
            x, y = self._x[pick], self._y[pick]
            e = self.emb[x].reshape(batch, -1)
            h = np.tanh(e @ self.w1 + self.b1)
            logits = h @ self.w2 + self.b2
            logits -= logits.max(axis=1, keepdims=True)
            p = np.exp(logits)
            p /= p.sum(axis=1, keepdims=True)
            loss = float(-np.log(p[np.arange(batch), y] + 1e-12).mean())
            d = p
            d[np.arange(batch), y] -= 1
            d /= batch
            dh = (d @ self.w2.T) * (1 - h * h)
            de = (dh @ self.w1.T).reshape(batch, self.size.context, self.size.embed)
            demb = np.zeros_like(self.emb)
            np.add.at(demb, x, de)
            grads = [demb, e.T @ dh, dh.sum(0), h.T @ d, d.sum(0)]
            for i, (param, g) in enumerate(zip(params, grads, strict=True)):
                m[i] = 0.9 * m[i] + 0.1 * g
                s[i] = 0.999 * s[i] + 0.001 * g * g
                param -= lr * (m[i] / (1 - 0.9**t)) / (np.sqrt(s[i] / (1 - 0.999**t)) + 1e-8)
        return loss

    def _next(self, context: list[int], temperature: float, rng: np.random.Generator) -> int:
        e = self.emb[context].reshape(-1)
        logits = (np.tanh(e @ self.w1 + self.b1) @ self.w2 + self.b2) / max(temperature, 1e-3)
        p = np.exp(logits - logits.max())
        return int(rng.choice(len(p), p=p / p.sum()))

    def tokenize(self, prompt: str) -> str:
        """The prompt as the model reads it (whitespace runs collapsed to one space): a token a character."""
        return " ".join(prompt.split())

    def generate(self, prompt: str, max_tokens: int, temperature: float = 0.8) -> Iterator[str]:
        """Yield up to ``max_tokens`` tokens (characters) continuing ``prompt``; the last one is ``STOP``
        when the model ended the sequence (finish reason ``stop``), else there were ``max_tokens``
        (``length``)."""
        rng = np.random.default_rng()  # per request: a Generator is not thread-safe
        space = self.index.get(" ", 0)
        ids = [self.index.get(c, space) for c in self.tokenize(prompt)]
        context = ([space] * self.size.context + ids)[-self.size.context :]
        for _ in range(max_tokens):
            nxt = self._next(context, temperature, rng)
            context = context[1:] + [nxt]
            yield self.chars[nxt]
            if self.chars[nxt] == STOP:
                return
