import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM


@pytest.fixture(autouse=True)
def _one_thread():
    # tiny ops: one thread is faster than two on a shared 2-core machine
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def tiny_llama(*, kv_heads: int = 2, layers: int = 2, seed: int = 0, vocab: int = 40):
    """A random LlamaForCausalLM (GQA when kv_heads < 4), eager attention for exact capture."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
        num_key_value_heads=kv_heads, intermediate_size=64, max_position_embeddings=128,
        pad_token_id=0, eos_token_id=None, bos_token_id=None,
    )  # fmt: skip
    return LlamaForCausalLM(cfg).eval()


@pytest.fixture
def make_llama():
    return tiny_llama
