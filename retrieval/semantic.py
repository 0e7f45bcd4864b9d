"""The semantic signal's math, pure: vectors as bytes, cosine, and linear fusion with the lexical score.

The model that makes the vectors is loaded in storage/common/semantic.py (files are I/O); what is here only
computes. Vectors are unit length, so a cosine is a dot product. They are stored as float16 (768 bytes for
all-MiniLM-L6-v2's 384 dimensions; the goal is at most 1 KB an event).

Fusion (issue 35, measured there on LoCoMo): the pool is the lexical ranking's top LEXICAL_POOL plus the
session's DENSE_POOL events nearest the query; each gets

    fused = lexical score / best lexical score in the pool + WEIGHT x cosine

(0 for the lexical part when the event did not match lexically) and the pool is ranked by its tier (echoes last,
as lexically), then `fused`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

# numpy is imported inside the functions: a lexical search (every CLI search, hybrid off) never loads it (~0.1-0.2 s)
if TYPE_CHECKING:
    import numpy as np

DIM = 384
METHOD = "linear-fusion-v1"  # score / best score + WEIGHT x cosine over the lexical top-N and the dense top-M
LEXICAL_POOL = 200
DENSE_POOL = 25
WEIGHT = 1.0
BLOB_BYTES = DIM * 2  # float16, little-endian

LEXICAL = "lexical"
HYBRID = "hybrid"


class TextEmbedder(Protocol):
    """A loaded model (storage.common.semantic.Embedder): unit vectors for texts, and what it is."""

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...
    def describe(self) -> dict[str, str]: ...


class VectorError(ValueError):
    """Bytes that are not one stored vector."""


def normalized(rows: np.ndarray) -> np.ndarray:
    """Each row scaled to unit length (a zero row stays zero)."""
    import numpy as np

    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    return np.asarray(rows / np.maximum(norms, 1e-12), dtype=np.float32)


def to_blob(vector: np.ndarray) -> bytes:
    """One vector as stored: DIM float16 values, little-endian."""
    import numpy as np

    v = np.asarray(vector, dtype="<f2")
    if v.shape != (DIM,):
        raise VectorError(f"vector: shape {v.shape}, expected ({DIM},)")
    return v.tobytes()


def from_blobs(blobs: Sequence[bytes]) -> np.ndarray:
    """Stored vectors as one float32 matrix, one row each."""
    import numpy as np

    for i, b in enumerate(blobs):
        if len(b) != BLOB_BYTES:
            raise VectorError(f"vector {i}: {len(b)} bytes, expected {BLOB_BYTES}")
    if not blobs:
        return np.zeros((0, DIM), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype="<f2").reshape(len(blobs), DIM).astype(np.float32)


def cosines(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The cosine of each (unit) row with the (unit) query."""
    import numpy as np

    return np.asarray(matrix @ np.asarray(query, dtype=np.float32), dtype=np.float32)


def nearest(cos: np.ndarray, m: int) -> list[int]:
    """The indices of the m highest cosines, best first (ties: the lower index)."""
    import numpy as np

    if m <= 0 or cos.size == 0:
        return []
    m = min(m, cos.size)
    part = np.argpartition(-cos, m - 1)[:m]
    return sorted((int(i) for i in part), key=lambda i: (-float(cos[i]), i))


@dataclass(frozen=True, slots=True)
class Fused:
    """One event's fused score and its parts."""

    seq: int
    lexical: float  # its lexical score as a share of the pool's best (0 when it did not match lexically)
    cosine: float | None  # None: the event has no vector yet (it ranks on its lexical share alone)
    score: float


def fuse(lexical: Sequence[tuple[int, float]], cosine: Mapping[int, float], weight: float = WEIGHT) -> dict[int, Fused]:
    """Every seq of the pool (the lexical (seq, score) list and the seqs of `cosine`) with its fused score."""
    best = max((s for _, s in lexical), default=0.0)
    out: dict[int, Fused] = {}
    for seq, score in lexical:
        share = score / best if best > 0 else 0.0
        cos = cosine.get(seq)
        out[seq] = Fused(seq, share, cos, share + weight * (cos if cos is not None else 0.0))
    for seq, cos in cosine.items():
        if seq not in out:
            out[seq] = Fused(seq, 0.0, cos, weight * cos)
    return out
