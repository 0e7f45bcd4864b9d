"""`python -m retrieval search --semantic` (and `mre search query --semantic`): the mode a search ran in, one-line refusals."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from cli import prog_retrieval
from ledger.messages import Message
from storage.common import semantic
from storage.stores import file_stores

needs_extra = pytest.mark.skipif(not semantic.installed(), reason="the semantic extra is not installed")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    (d / "sessions").mkdir(parents=True)
    st = file_stores(d)
    texts = ["I adopted a puppy last week", "the weather is nice", "my tax form is due friday"]
    st.ledger.append_many("s1", [Message("user", t, {}) for t in texts])
    st.index.index_session("s1")
    st.index.close()
    st.close()
    return d


def test_a_default_search_says_it_ran_lexically(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert prog_retrieval.main(["search", str(data_dir), "s1", "puppy", "--json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert out["mode"] == "lexical" and "semantic" not in out
    assert out["results"][0]["seq"] == 0


def test_the_default_table_does_not_change(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert prog_retrieval.main(["search", str(data_dir), "s1", "puppy"]) == 0
    assert "mode:" not in capsys.readouterr().out


def test_semantic_without_the_extra_is_one_line(
    data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(semantic, "installed", lambda: False)
    assert prog_retrieval.main(["search", str(data_dir), "s1", "puppy", "--semantic"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: semantic search: the optional extra is not installed")


@needs_extra
def test_a_semantic_search_says_its_mode_model_and_sha256(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert prog_retrieval.main(["search", str(data_dir), "s1", "young dog", "--semantic", "--json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert out["mode"] == "hybrid"
    assert out["semantic"] == {
        "method": "linear-fusion-v2",
        "model": "all-MiniLM-L6-v2-onnx-int8",
        "model_sha256": semantic.MODEL_SHA256,
    }
    assert out["results"][0]["seq"] == 0  # "young dog" shares no word with "puppy"


@needs_extra
def test_the_semantic_table_says_hybrid_and_explains_each_part(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert prog_retrieval.main(["search", str(data_dir), "s1", "young dog", "--semantic", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "mode: hybrid (lexical and dense, fused: linear-fusion-v2" in out
    assert "found by dense: lexical 0.000 (no lexical match) + " in out and "(cosine 0." in out and "linear-fusion-v2)" in out


def test_the_page_says_a_hybrid_search_and_nothing_new_for_a_lexical_one() -> None:
    from webui import render

    assert render.search_status(2, 8, None) == render.search_status(2, 8, None, "lexical")
    assert "hybrid" not in render.search_status(2, 8, None)
    assert render.search_status(2, 8, None, "hybrid").endswith("Searched by words and by meaning (hybrid).")


def test_the_app_takes_semantic_and_is_lexical_without_it() -> None:
    from webui.config import parse_args

    assert parse_args(["--data", "/tmp/x"], {}).semantic is False
    assert parse_args(["--data", "/tmp/x", "--semantic"], {}).semantic is True


def test_a_hybrid_explanation_reads_as_one_line() -> None:
    from retrieval.explain import explain_lines

    parts = {"mode": "hybrid", "found_by": "dense", "lexical_share": 0.0, "cosine": 0.41, "weight": 1.0, "fused": 0.41, "tier": "own"}
    assert explain_lines(parts) == ["found by dense: lexical share 0.000 + 1 x cosine 0.410 = 0.410 (own tier)"]


def test_a_gated_hybrid_explanation_names_each_part_and_the_gate() -> None:
    from retrieval.explain import explain_lines

    parts = {
        "mode": "hybrid", "method": "linear-fusion-v2", "found_by": "lexical and dense", "lexical_score": 4.2,
        "lexical_norm": "minmax", "lexical_share": 0.6, "cosine": 0.41, "cosine_norm": "minmax", "cosine_part": 0.8,
        "weight": 1.0, "base_weight": 0.25, "overlap": 0.25, "gate": 0.5, "gate_weight": 4.0, "fused": 1.4, "tier": "own",
    }
    assert explain_lines(parts) == [
        "found by lexical and dense: lexical 0.600 (score 4.200, minmax) + 1 x 0.800 (cosine 0.410, minmax) = 1.400 "
        "(own tier; 25% of the query's terms are in the session, under 50%: weight 0.25 x 4; linear-fusion-v2)"
    ]


@needs_extra
def test_rebuild_with_semantic_embeds_every_event(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert prog_retrieval.main(["rebuild", str(data_dir), "--semantic"]) == 0
    assert "embedded 3 events with all-MiniLM-L6-v2-onnx-int8" in capsys.readouterr().out
    st = file_stores(data_dir)
    try:
        assert st.index.vector_seqs("s1") == [0, 1, 2]
    finally:
        st.index.close()
        st.close()


def test_rebuild_with_semantic_without_the_extra_stops_before_any_work(
    data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(semantic, "installed", lambda: False)
    before = (data_dir / "index.sqlite").stat().st_mtime_ns
    assert prog_retrieval.main(["rebuild", str(data_dir), "--semantic"]) == 2
    assert capsys.readouterr().err.startswith("error: semantic search: the optional extra is not installed")
    assert (data_dir / "index.sqlite").stat().st_mtime_ns == before


def test_the_app_embeds_what_is_pending_in_the_background(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import app
    from chat.engine import Engine
    from chat.llm import LLM
    from webui.config import Config

    from ..storage.test_semantic_vectors import WordEmbedder
    from .test_app_load import free_port

    monkeypatch.delenv("GROQ_API_KEY", raising=False)  # the offline stand-in, never the network
    monkeypatch.setattr(app, "semantic_model", lambda **_kw: WordEmbedder())
    eng = Engine(tmp_path / "data", llm=LLM(api_key=""))
    eng.remember("alice", "I adopted a puppy last week")
    eng.remember("bob", "the tax form is due on Friday")
    eng.close()
    running = app.start(Config(tmp_path / "data", "127.0.0.1", free_port(), None, 4, False, semantic=True), quiet=True)
    try:
        index = running.service.engine.index
        assert index.embedding_idle(timeout=10)
        assert index.vector_seqs("alice") == [0] and index.vector_seqs("bob") == [0]
    finally:
        running.service.engine.index.stop_embedding()
        running.stop()


def _jsonl(tmp_path: Path, texts: list[str]) -> Path:
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps({"role": "user", "text": t}) + b"\n" for t in texts))
    return src


class _Bar:
    made: list[_Bar] = []

    def __init__(self, desc: str, unit: str, total: int | None = None) -> None:
        self.desc, self.total, self.n = desc, total, 0
        _Bar.made.append(self)

    def update(self, n: int) -> None:
        self.n += n

    def close(self) -> None:
        pass


def test_import_semantic_embeds_every_imported_event_with_a_progress_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import storage.api
    from cli import prog_ledger

    from ..storage.test_semantic_vectors import WordEmbedder

    monkeypatch.setattr(storage.api, "semantic_model", lambda **_kw: WordEmbedder())
    monkeypatch.setattr(prog_ledger, "_progress", _Bar)
    _Bar.made.clear()
    data = tmp_path / "data"
    texts = ["I adopted a puppy", "the weather is grey", "my sister plays the cello"]
    assert prog_ledger.main(["import", str(data), "s1", str(_jsonl(tmp_path, texts)), "--semantic", "--create"]) == 0
    assert "embedded 3 events with word-hash-test" in capsys.readouterr().err
    embedding = [b for b in _Bar.made if b.desc == "embedding"]
    assert len(embedding) == 1 and embedding[0].n == embedding[0].total == 3
    st = file_stores(data)
    try:
        assert st.index.vector_seqs("s1") == [0, 1, 2]
    finally:
        st.close()


def test_import_without_semantic_embeds_nothing(tmp_path: Path) -> None:
    from cli import prog_ledger

    data = tmp_path / "data"
    assert prog_ledger.main(["import", str(data), "s1", str(_jsonl(tmp_path, ["hello there"])), "--create"]) == 0
    st = file_stores(data)
    try:
        assert st.index.vector_seqs("s1") == []
    finally:
        st.close()


def test_import_semantic_without_the_extra_is_one_line_and_imports_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cli import prog_ledger

    monkeypatch.setattr(semantic, "installed", lambda: False)
    data = tmp_path / "data"
    code = prog_ledger.main(["import", str(data), "s1", str(_jsonl(tmp_path, ["hello there"])), "--semantic", "--create"])
    err = capsys.readouterr().err
    assert code != 0 and err.count("\n") == 1
    assert err.startswith("error: semantic search: the optional extra is not installed") and "nothing was imported" in err
    assert not (data / "sessions" / "s1").exists()


@needs_extra
def test_import_semantic_with_the_real_model_stores_one_vector_an_event(tmp_path: Path) -> None:
    from cli import prog_ledger

    data = tmp_path / "data"
    src = _jsonl(tmp_path, ["I adopted a puppy last week", "the tax form is due on Friday"])
    assert prog_ledger.main(["import", str(data), "s1", str(src), "--semantic", "--create"]) == 0
    st = file_stores(data)
    try:
        st.index.use_semantic(semantic.load())
        assert st.index.vector_seqs("s1") == [0, 1]
        assert st.index.search("s1", "young dog", k=1).results[0].seq == 0
    finally:
        st.close()
