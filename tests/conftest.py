import http.server
import json
import sys
import threading

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _stop_browsergym_playwright():
    """BrowserGym keeps one sync Playwright per process; stop it after each module that started
    one, so later browser tests (run reports) can start their own."""
    yield
    core = sys.modules.get("browsergym.core")
    if core is not None and getattr(core, "_PLAYWRIGHT", None) is not None:
        from esopt.envs.browser.browser import close_shared_browsers

        close_shared_browsers(stop_playwright=True)


def tiny_llama(seed: int = 0, vocab: int = 256, hidden: int = 64, layers: int = 2):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=True,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(cfg)
    model.eval().requires_grad_(False)
    return model


@pytest.fixture
def tiny_model():
    return tiny_llama()


@pytest.fixture(scope="session")
def esopt_cache(tmp_path_factory):
    """A private model cache: tiny aliases are built into it once per session."""
    import os

    path = tmp_path_factory.mktemp("esopt-cache")
    old = os.environ.get("ESOPT_CACHE")
    os.environ["ESOPT_CACHE"] = str(path)
    yield path
    if old is None:
        os.environ.pop("ESOPT_CACHE", None)
    else:
        os.environ["ESOPT_CACHE"] = old


TINY_OVERRIDES = [
    "model=tiny-llama", "es.generations=3", "es.population=4", "es.episodes_per_member=3", "tasks.heldout=3",
    "agent.max_new_tokens=4", "agent.examples=[]", "eval.at_start=true", "runtime.threads=1",
    "tasks.validation=0", "eval.every=0",  # configs/demo.yaml's validation curve, off in quick tests
]


@pytest.fixture
def tiny_cfg(esopt_cache, tmp_path):
    from esopt.config import load_config

    def make(*extra):
        return load_config(None, TINY_OVERRIDES + [f"run.out_dir={tmp_path}"] + list(extra))

    return make


@pytest.fixture(scope="module")
def ray_local(esopt_cache):
    """One local Ray instance (2 CPUs) per test module (tests/train/ray); its rollout helpers travel
    to the workers by value (the workers cannot import test modules)."""
    ray = pytest.importorskip("ray")
    import dist_helpers

    ray.cloudpickle.register_pickle_by_value(dist_helpers)
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 << 20, logging_level="WARNING")
    yield ray
    ray.shutdown()
    ray.cloudpickle.unregister_pickle_by_value(dist_helpers)


class FakeChat(http.server.BaseHTTPRequestHandler):
    requests: list = []
    replies: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeChat.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        status, content, finish = FakeChat.replies.pop(0)
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content},
                                        "finish_reason": finish}],
                           "usage": {"completion_tokens": len(content.split())}}
                          if status == 200 else {"error": "no"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_chat():
    """A local OpenAI-compatible chat endpoint: set fake_chat.replies to [(status, content, finish_reason)],
    read fake_chat.requests; fake_chat.url is its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeChat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    FakeChat.requests, FakeChat.replies = [], []
    FakeChat.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield FakeChat
    server.shutdown()
    server.server_close()
