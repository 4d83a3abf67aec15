"""A real llama.cpp ``llama-server`` for the tests: built once from PyPI's llama-cpp-python sdist, a
tiny deterministic model written with its gguf-py, and a server started on a loopback port.

The source distribution of ``llama-cpp-python`` vendors the whole llama.cpp tree (the server in
``tools/server``, ``gguf-py`` and vocab-only model files). ``build()`` downloads it with pip
(checking the pinned SHA-256), builds only the ``llama-server`` target with cmake (CPU only, no
native tuning, no curl, static libraries) and keeps the binary, ``gguf-py`` and the vocab it
needs in ``CACHE_DIR`` outside the checkout. It rebuilds only when ``VERSION`` changes: about
ten minutes on two cores. ``python tests/llamacpp.py build`` is what ``make llama-server`` (and
so ``make test`` and CI) runs.

``tiny_model()`` writes a llama model of two layers with random weights (seeded: the same bytes
every time), Llama 3's tokenizer from the vendored vocab file and a tool-capable chat template.
It generates gibberish, but every byte of the HTTP/SSE wire, usage, timings, ``/props``,
``/slots``, context limits and cancellation is real. The output rows of every control token
(end-of-text, end-of-turn, the reserved specials) are zero while the other rows have logits of a
few tens, so end-of-text never wins: a reply is always exactly ``max_tokens`` long, and no
special token shows up in the text.

``LlamaServer`` runs ``llama-server`` on a free loopback port and is ended by its pid.
No Odysseus imports here: this module is also a script run before the test suite.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from typing import Dict, Iterator, List, Optional

#: the pinned llama-cpp-python release whose vendored llama.cpp is built, and its sdist's SHA-256
VERSION = "0.3.36"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
CACHE_DIR = os.path.join(
    os.environ.get("LLAMA_SERVER_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "odysseus-test"),
    f"llama-server-{VERSION}",
)
BINARY = os.path.join(CACHE_DIR, "bin", "llama-server")
GGUF_PY = os.path.join(CACHE_DIR, "gguf-py")
VOCAB = os.path.join(CACHE_DIR, "models", "ggml-vocab-llama-bpe.gguf")
BUILT_MARK = os.path.join(CACHE_DIR, "BUILT")
#: set by .ci/run: a missing build fails the real-server tests instead of skipping them
REQUIRE_ENV = "REQUIRE_LLAMA_SERVER"

CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
]

#: bumped whenever tiny_model() would write different bytes (the file name carries it)
MODEL_REVISION = 2
MODEL_SEED = 20261207
#: what tiny_model() writes, byte for byte, on every machine (numpy and gguf-py are pinned); checked
#: by tests/test_llama_server.py. A change to the generator bumps MODEL_REVISION and these.
MODEL_SHA256 = {
    "plain": "197db40ff692b588a9811e79881dffe63888f72ed40936f10703e303132a2562",
    "think": "ac173a8f6062df6f6026081ceb3d86bce3850367c0a70a51f92cee3740014874",
}
N_EMBD, N_LAYER, N_HEAD, N_HEAD_KV, N_FF, N_CTX_TRAIN = 32, 2, 4, 2, 64, 4096

#: a Llama-3-style template that takes tools (rendered by llama-server's Jinja engine with --jinja)
CHAT_TEMPLATE = (
    "{{- bos_token }}"
    "{%- if tools %}<|start_header_id|>system<|end_header_id|>\n\n"
    'You may call these tools. Answer a call as a JSON object {"name": ..., "parameters": ...}.\n'
    "{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}<|eot_id|>{%- endif %}"
    "{%- for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{%- if message['content'] is string %}{{ message['content'] | trim }}"
    "{%- elif message['content'] %}{%- for part in message['content'] %}"
    "{%- if part['type'] == 'text' %}{{ part['text'] | trim }}{%- endif %}{%- endfor %}{%- endif %}"
    "{%- if message['tool_calls'] %}{%- for call in message['tool_calls'] %}"
    "{{ {'name': call['function']['name'], 'parameters': call['function']['arguments']} | tojson }}"
    "{%- endfor %}{%- endif %}<|eot_id|>"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{%- endif %}"
)
#: the same as a reasoning model's: an assistant turn's ``reasoning_content`` goes in <think>...</think>
#: (how llama-server's template analysis finds the reasoning markers), and a reply starts inside
#: <think>, so llama-server streams what the model writes as ``reasoning_content`` until a
#: ``</think>`` that never comes
THINK_TEMPLATE = CHAT_TEMPLATE.replace(
    "{%- if message['content'] is string %}",
    "{%- if message['role'] == 'assistant' and message['reasoning_content'] %}"
    "<think>\n{{ message['reasoning_content'] }}\n</think>\n\n{% endif %}"
    "{%- if message['content'] is string %}",
).replace(
    "<|start_header_id|>assistant<|end_header_id|>\n\n{%- endif %}",
    "<|start_header_id|>assistant<|end_header_id|>\n\n<think>\n{% endif %}",
)


def available() -> bool:
    """True when the cached build is complete (``build()`` ran for ``VERSION``)."""
    try:
        with open(BUILT_MARK) as fh:
            return fh.read().strip() == VERSION and os.access(BINARY, os.X_OK)
    except OSError:
        return False


def required() -> bool:
    """True in CI (``REQUIRE_LLAMA_SERVER=1``): a missing build is a failure, not a skip."""
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


def build(jobs: Optional[int] = None) -> str:
    """Build ``llama-server`` into ``CACHE_DIR`` unless it is there already; the binary's path.

    Holds a file lock while it works, so two callers never build at once; the ``BUILT`` mark is
    written last, so an interrupted build is started again rather than used.
    """
    os.makedirs(os.path.dirname(CACHE_DIR), exist_ok=True)
    with open(CACHE_DIR + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if available():
            return BINARY
        with tempfile.TemporaryDirectory(prefix="llama-build-") as work:
            tree = _unpack_sdist(work)
            build_dir = os.path.join(work, "build")
            _run(["cmake", "-S", tree, "-B", build_dir, *CMAKE_FLAGS])
            jobs = jobs or os.cpu_count() or 2
            _run(["cmake", "--build", build_dir, "--target", "llama-server", "-j", str(jobs)])
            shutil.rmtree(CACHE_DIR, ignore_errors=True)
            os.makedirs(os.path.join(CACHE_DIR, "bin"))
            os.makedirs(os.path.dirname(VOCAB))
            shutil.copy2(os.path.join(build_dir, "bin", "llama-server"), BINARY)
            shutil.copytree(os.path.join(tree, "gguf-py"), GGUF_PY)
            shutil.copy2(os.path.join(tree, "models", os.path.basename(VOCAB)), VOCAB)
            shutil.copy2(os.path.join(tree, "LICENSE"), os.path.join(CACHE_DIR, "LICENSE"))
        with open(BUILT_MARK, "w") as fh:
            fh.write(VERSION + "\n")
    return BINARY


def _unpack_sdist(work: str) -> str:
    """Download the pinned sdist with pip, check its hash, extract vendor/llama.cpp; that tree's path."""
    download = os.path.join(work, "sdist")
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
    _run(pip + [f"llama-cpp-python=={VERSION}", "-d", download])
    (name,) = os.listdir(download)
    archive = os.path.join(download, name)
    digest = hashlib.sha256()
    with open(archive, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != SDIST_SHA256:
        raise RuntimeError(f"{name}: sha256 {digest.hexdigest()} is not the pinned {SDIST_SHA256}")
    prefix = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        tar.extractall(work, members=members, filter="data")
    return os.path.join(work, prefix)


def _run(command: List[str]) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def tiny_model(think: bool = False) -> str:
    """The path of the tiny model (written once into ``CACHE_DIR``; the same bytes on every machine).

    ``think``: the same weights with ``THINK_TEMPLATE`` as the model's chat template.
    """
    name = f"tiny-llama-r{MODEL_REVISION}{'-think' if think else ''}.gguf"
    path = os.path.join(CACHE_DIR, "models", name)
    if os.path.exists(path):
        return path
    with open(CACHE_DIR + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(path):
            partial = path + f".{os.getpid()}.part"
            _write_tiny_model(partial, THINK_TEMPLATE if think else CHAT_TEMPLATE)
            os.replace(partial, path)
    return path


def _write_tiny_model(path: str, template: str) -> None:
    sys.path.insert(0, GGUF_PY)
    try:
        import gguf  # type: ignore[import-not-found]
        import numpy as np
    finally:
        sys.path.remove(GGUF_PY)
    vocab = gguf.GGUFReader(VOCAB)
    tokens = vocab.fields["tokenizer.ggml.tokens"].contents()
    token_types = vocab.fields["tokenizer.ggml.token_type"].contents()
    merges = vocab.fields["tokenizer.ggml.merges"].contents()
    n_vocab = len(tokens)

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("odysseus-tiny-llama")
    writer.add_context_length(N_CTX_TRAIN)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_rope_freq_base(500000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("llama-bpe")
    writer.add_token_list(tokens)
    writer.add_token_types(token_types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokens.index("<|begin_of_text|>"))
    writer.add_eos_token_id(tokens.index("<|eot_id|>"))
    writer.add_add_bos_token(False)  # the template writes bos_token itself
    writer.add_chat_template(template)

    rng = np.random.default_rng(MODEL_SEED)

    def weights(*shape: int, scale: float) -> "np.ndarray":
        return (rng.standard_normal(shape) * scale).astype(np.float16)

    head_dim = N_EMBD // N_HEAD
    output = weights(n_vocab, N_EMBD, scale=4.0)
    control = np.array([t == gguf.TokenType.CONTROL for t in token_types])
    output[control] = 0  # logit 0 against a best logit of tens: never sampled
    writer.add_tensor("token_embd.weight", weights(n_vocab, N_EMBD, scale=1.0))
    writer.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    writer.add_tensor("output.weight", output)
    for layer in range(N_LAYER):
        blk = f"blk.{layer}."
        writer.add_tensor(blk + "attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(blk + "attn_q.weight", weights(N_EMBD, N_EMBD, scale=0.2))
        writer.add_tensor(blk + "attn_k.weight", weights(N_HEAD_KV * head_dim, N_EMBD, scale=0.2))
        writer.add_tensor(blk + "attn_v.weight", weights(N_HEAD_KV * head_dim, N_EMBD, scale=0.2))
        writer.add_tensor(blk + "attn_output.weight", weights(N_EMBD, N_EMBD, scale=0.2))
        writer.add_tensor(blk + "ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(blk + "ffn_gate.weight", weights(N_FF, N_EMBD, scale=0.2))
        writer.add_tensor(blk + "ffn_up.weight", weights(N_FF, N_EMBD, scale=0.2))
        writer.add_tensor(blk + "ffn_down.weight", weights(N_EMBD, N_FF, scale=0.2))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LlamaServer:
    """``llama-server`` with the tiny model on 127.0.0.1:<free port>, stopped (or killed) by its pid.

    ``ctx_size`` is the whole context, shared by ``parallel`` slots (llama-server gives each slot
    ``ctx_size / parallel``); ``jinja`` renders the template with tools; ``extra`` adds arguments.
    """

    def __init__(
        self,
        directory: str,
        *,
        ctx_size: int = 2048,
        parallel: int = 1,
        jinja: bool = True,
        think: bool = False,
        extra: Optional[List[str]] = None,
    ):
        self.directory = directory
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.model = tiny_model(think=think)
        self.args = ["--ctx-size", str(ctx_size), "--parallel", str(parallel), "--slots", "--seed", "1"]
        self.args += ["--threads", "1", "--no-warmup", "--metrics"]
        if jinja:
            self.args.append("--jinja")
        self.args += list(extra or [])
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = os.path.join(directory, f"llama-server-{self.port}.log")

    def start(self, timeout: float = 60.0) -> "LlamaServer":
        """Start and wait until ``/health`` answers 200 (the model is loaded)."""
        os.makedirs(self.directory, exist_ok=True)
        log = open(self.log_path, "ab")
        command = [BINARY, "-m", self.model, "--host", "127.0.0.1", "--port", str(self.port), *self.args]
        self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited early: {self.logs()}")
            if self._healthy():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"llama-server did not start: {self.logs()}")

    def _healthy(self) -> bool:
        try:
            return self.get_json("/health").get("status") == "ok"
        except (OSError, ValueError):
            return False

    def get_json(self, path: str) -> Dict:
        """GET ``path`` on the server, parsed (urllib: no session pool to leak between tests)."""
        import urllib.request

        with urllib.request.urlopen(self.url + path, timeout=5) as answer:
            return json.loads(answer.read())

    def slots(self) -> List[Dict]:
        """``/slots``: one entry per slot with ``is_processing``."""
        answer = self.get_json("/slots")
        return answer if isinstance(answer, list) else []

    def busy_slots(self) -> int:
        """How many slots are generating now."""
        return sum(1 for slot in self.slots() if slot.get("is_processing"))

    def logs(self) -> str:
        """The last 4000 characters the server printed."""
        with contextlib.suppress(OSError), open(self.log_path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")[-4000:]
        return ""

    def kill(self) -> None:
        """kill -9, as a crash would."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM and wait (kill -9 after 10 s)."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> "LlamaServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def running(directory: str, **options: object) -> Iterator[LlamaServer]:
    """A started ``LlamaServer`` for the block (``options`` as its constructor takes them)."""
    server = LlamaServer(directory, **options)  # type: ignore[arg-type]
    server.start()
    try:
        yield server
    finally:
        server.stop()


def main() -> None:
    """``python tests/llamacpp.py build``: build (once) and write the models; see the module docstring.

    Where the build is impossible (no cmake, no compiler, no network for the sdist) it says why
    and exits 0, so the tests skip with that reason, unless ``REQUIRE_ENV`` is set (CI): then it fails.
    """
    if sys.argv[1:] != ["build"]:
        sys.exit("usage: python tests/llamacpp.py build")
    try:
        print(build())
        print(tiny_model())
        print(tiny_model(think=True))
    except (OSError, subprocess.CalledProcessError, RuntimeError) as exc:
        if required():
            raise
        print(f"llama-server could not be built ({exc}); tests/test_llama_server.py will be skipped", file=sys.stderr)


if __name__ == "__main__":
    main()
