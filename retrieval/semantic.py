"""The semantic signal's math, pure: vectors as bytes, cosine, and linear fusion with the lexical score.

The model that makes the vectors is loaded in storage/common/semantic.py (files are I/O); what is here only
computes. Vectors are unit length, so a cosine is a dot product. They are stored as float16 (768 bytes for
all-MiniLM-L6-v2's 384 dimensions; the goal is at most 1 KB an event).

Fusion (issue 35): the pool is the lexical ranking's top N plus the session's M events nearest the query; each gets

    fused = lexical part + weight x cosine part

(0 for the lexical part when the event did not match lexically) and the pool is ranked by its tier (echoes last,
as lexically), then `fused`. FUSIONS names each fusion (N, M, how each part is scaled, the weight and its gate);
FUSION is the one a hybrid search runs: linear-fusion-v2 (min-max scaled parts, weight 0.25, x4 when under half
the query's terms occur in the session), tuned on LoCoMo dev and our own pairs (bench/fusion_sweep.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

# numpy is imported inside the functions: a lexical search (every CLI search, hybrid off) never loads it (~0.1-0.2 s)
if TYPE_CHECKING:
    import numpy as np

DIM = 384
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
class Fusion:
    """One named fusion: its pools, how each part is scaled, the cosine's weight and its gate. A receipt names it by
    `method` (docs/FORMAT.md §25), so a change to any field is a new name."""

    method: str
    lexical_pool: int  # the lexical ranking's top N
    dense_pool: int  # the session's M events nearest the query, added to the pool
    weight: float  # x the cosine part
    lexical_norm: str = "max"  # "max": score / best; "minmax": (score - worst) / (best - worst), over the lexical pool
    cosine_norm: str = "raw"  # "raw": the cosine; "minmax": (cos - lowest) / (highest - lowest), over the pool
    gate: float = 0.0  # when the share of the query's terms found anywhere in the session is below this ...
    gate_weight: float = 1.0  # ... the weight is multiplied by this (lean on meaning when the words are not there)

    def weight_at(self, overlap: float) -> float:
        """The cosine's weight for a query `overlap` of whose terms occur in the session (0 to 1)."""
        return self.weight * (self.gate_weight if overlap < self.gate else 1.0)


FUSIONS = {
    # issue 35's first fusion: score / best + 1.0 x cosine (bench/HISTORY.md, "The semantic extra")
    "linear-fusion-v1": Fusion("linear-fusion-v1", 200, 25, 1.0),
    # tuned on LoCoMo dev and our own pairs (bench/fusion_sweep.py; bench/HISTORY.md, "Tuning the fusion"): both parts
    # min-max over the pool, the cosine at 0.25, and at 1.0 when under half the query's terms are in the session
    "linear-fusion-v2": Fusion("linear-fusion-v2", 200, 25, 0.25, "minmax", "minmax", 0.5, 4.0),
}
FUSION = FUSIONS["linear-fusion-v2"]  # what a hybrid search runs (and its receipt names)
METHOD = FUSION.method
LEXICAL_POOL = FUSION.lexical_pool
DENSE_POOL = FUSION.dense_pool


def gate_overlap(df: Mapping[str, int]) -> float:
    """The share of the query's terms (their document frequencies in the session) that some event holds; 1.0 for a
    query without terms (nothing to gate on)."""
    return sum(1 for n in df.values() if n > 0) / len(df) if df else 1.0


@dataclass(frozen=True, slots=True)
class Fused:
    """One event's fused score and its parts."""

    seq: int
    lexical: float  # its lexical part, scaled (0 when it did not match lexically)
    cosine: float | None  # None: the event has no vector yet (it ranks on its lexical part alone)
    score: float
    lexical_raw: float | None = None  # its lexical score as ranked (None: it did not match lexically)
    cosine_part: float = 0.0  # the cosine as scaled, before the weight (the cosine itself with "raw")


def _minmax(values: Sequence[float]) -> tuple[float, float]:
    lo, hi = min(values, default=0.0), max(values, default=0.0)
    return lo, hi - lo


def fuse(
    lexical: Sequence[tuple[int, float]],
    cosine: Mapping[int, float],
    weight: float = 1.0,
    *,
    lexical_norm: str = "max",
    cosine_norm: str = "raw",
) -> dict[int, Fused]:
    """Every seq of the pool (the lexical (seq, score) list and the seqs of `cosine`) with its fused score: the
    lexical part (the score scaled by `lexical_norm` over the lexical list; 0 for an event it does not hold) plus
    `weight` x the cosine part (the cosine scaled by `cosine_norm` over `cosine`'s values; 0 without a vector).
    The defaults are linear-fusion-v1's: score / best + weight x cosine."""
    scores = [s for _, s in lexical]
    if lexical_norm == "max":
        best = max(scores, default=0.0)
        lo, span = 0.0, best if best > 0 else 0.0
    elif lexical_norm == "minmax":
        lo, span = _minmax(scores)
    else:
        raise ValueError(f"lexical_norm {lexical_norm!r}: max or minmax")
    if cosine_norm == "raw":
        clo, cspan = 0.0, 1.0
    elif cosine_norm == "minmax":
        clo, cspan = _minmax(list(cosine.values()))
    else:
        raise ValueError(f"cosine_norm {cosine_norm!r}: raw or minmax")
    # "max" with no positive score gives every lexical event 0; a min-max over equal values gives each 1
    lex_flat = 0.0 if lexical_norm == "max" else 1.0

    def cos_part(cos: float) -> float:
        return (cos - clo) / cspan if cspan > 0 else 1.0

    out: dict[int, Fused] = {}
    for seq, score in lexical:
        part = (score - lo) / span if span > 0 else lex_flat
        cos = cosine.get(seq)
        c = cos_part(cos) if cos is not None else 0.0
        out[seq] = Fused(seq, part, cos, part + weight * c, score, c)
    for seq, cos in cosine.items():
        if seq not in out:
            c = cos_part(cos)
            out[seq] = Fused(seq, 0.0, cos, weight * c, None, c)
    return out
