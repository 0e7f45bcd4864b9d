"""The semantic extra's model (storage/common/semantic.py): pinned files checked before loading, one-line refusals.

The tests that run the model skip when the extra is not installed (requirements-dev.txt installs it, so CI runs
them); the refusals are checked either way.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from storage.common import semantic

needs_extra = pytest.mark.skipif(not semantic.installed(), reason="the semantic extra is not installed")


def test_the_vendored_tokenizer_is_the_pinned_file() -> None:
    assert semantic.file_sha256(semantic.TOKENIZER_FILE) == semantic.TOKENIZER_SHA256


def test_a_model_file_that_differs_is_refused_in_one_line(tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the model")
    with pytest.raises(semantic.SemanticUnavailable) as err:
        semantic.load(fake)
    msg = str(err.value)
    assert "\n" not in msg
    if semantic.installed():
        assert msg.startswith("semantic search: the model file is not the pinned file")
        assert semantic.MODEL_SHA256 in msg


def test_a_missing_model_file_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(semantic.SemanticUnavailable) as err:
        semantic.load(tmp_path / "absent.onnx")
    assert "\n" not in str(err.value) and str(err.value).startswith("semantic search:")


def test_without_the_extra_loading_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(semantic, "installed", lambda: False)
    with pytest.raises(semantic.SemanticUnavailable, match=r"pip install -r requirements-semantic.txt"):
        semantic.load()


@needs_extra
def test_the_installed_model_is_the_pinned_file() -> None:
    assert semantic.file_sha256(semantic.installed_model_path()) == semantic.MODEL_SHA256


@needs_extra
class TestEmbedding:
    @pytest.fixture(scope="class")
    def model(self) -> semantic.Embedder:
        return semantic.load(threads=1)

    def test_vectors_are_unit_length_and_384_wide(self, model: semantic.Embedder) -> None:
        v = model.embed(["hello there", "a much longer sentence about a dog in the park"])
        assert v.shape == (2, 384)
        assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)

    def test_a_paraphrase_is_nearer_than_an_unrelated_sentence(self, model: semantic.Embedder) -> None:
        a, b, c = model.embed(["I adopted a puppy last week", "we got a young dog a few days ago", "the tax form is due"])
        assert float(a @ b) > float(a @ c) + 0.2

    def test_the_batch_order_does_not_change_a_vector(self, model: semantic.Embedder) -> None:
        texts = ["short", "a somewhat longer text than that", "mid length one"]
        one = model.embed(texts)
        alone = model.embed(texts[1:2])
        assert np.allclose(one[1], alone[0], atol=1e-4)

    def test_it_names_the_method_the_model_and_its_sha256(self, model: semantic.Embedder) -> None:
        assert model.describe() == {
            "method": "linear-fusion-v2",
            "model": "all-MiniLM-L6-v2-onnx-int8",
            "model_sha256": semantic.MODEL_SHA256,
        }
