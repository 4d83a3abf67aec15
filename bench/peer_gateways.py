"""The peer gateways for ``bench.peers``: install each into its own virtualenv, start it on loopback, stop it by pid.

Each peer lives in ``.bench-peers/<name>/`` (git-ignored), installed with its pinned
requirement by the ordinary ``pip`` of that virtualenv; a stamp file remembers the
requirement so later runs skip the install. ``start`` yields a :class:`Path` the bench
client can send an OpenAI-style streaming request to.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional

import requests

from .common import HOST, ROOT, free_port, process_tree, stop_process

PEERS_DIR = os.path.join(ROOT, ".bench-peers")
INSTALL_TIMEOUT = 900  # seconds per peer; Open WebUI brings torch and friends
START_TIMEOUT = 300


def openai_body(prompt: str) -> dict:
    """An OpenAI chat-completions streaming request for the bench model."""
    return {"model": "bench", "stream": True, "messages": [{"role": "user", "content": prompt}]}


@dataclass
class Path:
    """Where the bench client sends one reply's request, and which processes' CPU counts for it."""

    name: str
    port: int
    url: str
    headers: Dict[str, str]
    pids: List[int]
    body: Callable[[str], dict] = field(default=openai_body)


@dataclass
class Peer:
    """One gateway: its pinned requirement and how to start it."""

    name: str
    spec: str
    starter: Callable[["Peer", int, str, str], Iterator[Path]]

    @property
    def venv(self) -> str:
        return os.path.join(PEERS_DIR, self.name.lower().replace(" ", "-"))

    def bin(self, tool: str) -> str:
        return os.path.join(self.venv, "bin", tool)

    def start(self, model_port: int, tmp: str, secret: str):
        """A context manager yielding the running gateway's :class:`Path`."""
        return contextmanager(self.starter)(self, model_port, tmp, secret)


def install(peer: Peer) -> Optional[str]:
    """Install ``peer`` into its virtualenv unless already there; None when usable, else the reason."""
    stamp = os.path.join(peer.venv, ".installed")
    try:
        with open(stamp, encoding="utf-8") as fh:
            if fh.read().strip() == peer.spec:
                return None
    except OSError:
        pass
    log = os.path.join(PEERS_DIR, f"{os.path.basename(peer.venv)}-install.log")
    os.makedirs(PEERS_DIR, exist_ok=True)
    started = time.monotonic()
    with open(log, "ab") as out:
        try:
            if not os.path.exists(peer.bin("pip")):
                subprocess.run(
                    [sys.executable, "-m", "venv", peer.venv], check=True, stdout=out, stderr=out, timeout=120
                )
            subprocess.run(
                [peer.bin("pip"), "install", "--quiet", peer.spec],
                check=True,
                stdout=out,
                stderr=out,
                timeout=INSTALL_TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            return f"`pip install {peer.spec}` did not finish within {INSTALL_TIMEOUT} s"
        except subprocess.CalledProcessError:
            return f"`pip install {peer.spec}` failed: {_last_error(log)}"
    with open(stamp, "w", encoding="utf-8") as fh:
        fh.write(peer.spec)
    print(f"   installed {peer.spec} in {time.monotonic() - started:.0f} s", flush=True)
    return None


def _last_error(log: str) -> str:
    try:
        with open(log, encoding="utf-8", errors="replace") as fh:
            lines = [ln.strip() for ln in fh if ln.startswith("ERROR")]
        return lines[-1][:200] if lines else "see the install log"
    except OSError:
        return "see the install log"


def _wait_http(proc: subprocess.Popen, url: str, log: str, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}: {_tail(log)}")
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"no answer on {url} within {timeout:.0f} s: {_tail(log)}")


def _tail(log: str) -> str:
    try:
        with open(log, encoding="utf-8", errors="replace") as fh:
            return " ".join(fh.read()[-300:].split())
    except OSError:
        return ""


def _env(extra: Dict[str, str]) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ODYSSEUS_", "VIRTUAL_ENV"))}
    env.update(extra)
    return env


@contextmanager
def _process(args: List[str], env: Dict[str, str], cwd: str, log: str) -> Iterator[subprocess.Popen]:
    with open(log, "ab") as out:
        proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield proc
        finally:
            descendants = process_tree(proc.pid)[1:]  # workers it may have forked, ended by pid after it
            stop_process(proc)
            for pid in descendants:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _litellm(peer: Peer, model_port: int, tmp: str, secret: str) -> Iterator[Path]:
    """LiteLLM proxy with one model ``bench`` pointing at the model server; one uvicorn worker (its default)."""
    config = os.path.join(tmp, "litellm.yaml")
    with open(config, "w", encoding="utf-8") as fh:  # YAML is a superset of JSON
        json.dump(
            {
                "model_list": [
                    {
                        "model_name": "bench",
                        "litellm_params": {
                            "model": "openai/bench",
                            "api_base": f"http://{HOST}:{model_port}/v1",
                            "api_key": "x",
                        },
                    }
                ],
                "litellm_settings": {"telemetry": False},
            },
            fh,
        )
    port, key = free_port(), f"sk-bench-{secret}"
    log = os.path.join(tmp, "litellm.log")
    env = _env({"LITELLM_MASTER_KEY": key, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False"})
    with _process(
        [peer.bin("litellm"), "--config", config, "--host", HOST, "--port", str(port), "--num_workers", "1"],
        env,
        tmp,
        log,
    ) as proc:
        _wait_http(proc, f"http://{HOST}:{port}/health/liveliness", log)
        yield Path(peer.name, port, "/v1/chat/completions", {"Authorization": f"Bearer {key}"}, [proc.pid])


def _open_webui(peer: Peer, model_port: int, tmp: str, secret: str) -> Iterator[Path]:
    """Open WebUI with the model server as its OpenAI connection; the first (admin) account's token."""
    port = free_port()
    data = os.path.join(tmp, "open-webui")
    os.makedirs(data, exist_ok=True)
    log = os.path.join(tmp, "open-webui.log")
    env = _env(
        {
            "DATA_DIR": data,
            "OPENAI_API_BASE_URL": f"http://{HOST}:{model_port}/v1",
            "OPENAI_API_KEY": "x",
            "ENABLE_OLLAMA_API": "False",
            "WEBUI_SECRET_KEY": secret,
            "OFFLINE_MODE": "True",
            "HF_HUB_OFFLINE": "1",
            "ENABLE_VERSION_UPDATE_CHECK": "False",
            "SCARF_NO_ANALYTICS": "true",
            "DO_NOT_TRACK": "true",
            "ANONYMIZED_TELEMETRY": "false",
            "BYPASS_EMBEDDING_AND_RETRIEVAL": "True",
        }
    )
    with _process([peer.bin("open-webui"), "serve", "--host", HOST, "--port", str(port)], env, tmp, log) as proc:
        base = f"http://{HOST}:{port}"
        _wait_http(proc, base + "/health", log)
        signup = requests.post(
            base + "/api/v1/auths/signup",
            timeout=30,
            json={"name": "bench", "email": "bench@example.invalid", "password": secret},
        )
        if signup.status_code != 200:
            raise RuntimeError(f"sign-up answered {signup.status_code}: {signup.text[:200]}")
        token = signup.json()["token"]
        headers = {"Authorization": f"Bearer {token}"}
        models = requests.get(base + "/api/models", headers=headers, timeout=30)
        if "bench" not in models.text:
            raise RuntimeError(f"model bench not listed: {models.status_code} {models.text[:200]}")
        yield Path(peer.name, port, "/api/chat/completions", headers, [proc.pid])


LITELLM = Peer("LiteLLM", "litellm[proxy]==1.106.12", _litellm)  # newer releases' proxy extras are not on PyPI
OPEN_WEBUI = Peer("Open WebUI", "open-webui==0.12.4", _open_webui)
