"""Files and secrets: linked result files, an endpoint that echoes the API key, a key in a URL,
malformed keys."""

from __future__ import annotations

import threading
from http import HTTPStatus
from pathlib import Path

from .harness import (
    KEY,
    CaseFn,
    Verdict,
    case,
    kvarena,
    one_line_error,
)

EVAL_TINY = ["eval", "-p", "lru", "-s", "easy", "-n", "2", "--steps", "3", "-j", "1"]


@case("files and secrets", "a dangling results.jsonl symlink")
def _link_results(tmp: Path) -> tuple[str, str]:
    out = tmp / "run"
    out.mkdir()
    (out / "results.jsonl").symlink_to(tmp / "outside.jsonl")
    done = kvarena(*EVAL_TINY, "-o", str(out))
    if (tmp / "outside.jsonl").exists():
        return "leak", "wrote outside --out"
    return one_line_error(done, "is a symbolic link")


@case("files and secrets", "a linked run.json.tmp")
def _link_tmp(tmp: Path) -> tuple[str, str]:
    out = tmp / "run"
    out.mkdir()
    target = tmp / "precious"
    target.write_text("keep\n")
    (out / "run.json.tmp").symlink_to(target)
    done = kvarena(*EVAL_TINY, "-o", str(out))
    if target.read_text() != "keep\n":
        return "leak", "overwrote the link's target"
    return ("clean", "the link was never written") if done.rc == 0 else ("crash", done.err[-120:])


@case("files and secrets", "--resume onto a linked results.jsonl")
def _link_resume(tmp: Path) -> tuple[str, str]:
    out = tmp / "run"
    if kvarena(*EVAL_TINY, "-o", str(out)).rc != 0:
        return "crash", "the first run failed"
    target = tmp / "precious"
    target.write_text("keep\n")
    (out / "results.jsonl").unlink()
    (out / "results.jsonl").symlink_to(target)
    done = kvarena(*EVAL_TINY, "-o", str(out), "--resume")
    if target.read_text() != "keep\n":
        return "leak", "overwrote the link's target"
    return one_line_error(done, "is a symbolic link")


def _leaks(root: Path, *texts: str) -> list[str]:
    """Files under `root` and texts holding any 8 consecutive characters of KEY, in any case."""
    pieces = {KEY[i : i + 8].lower() for i in range(len(KEY) - 7)}
    found = [str(p) for p in root.rglob("*") if p.is_file() and any(
        piece in p.read_text(errors="replace").lower() for piece in pieces)]  # fmt: skip
    found += [
        f"output {i}" for i, t in enumerate(texts) if any(piece in t.lower() for piece in pieces)
    ]
    return found


class _EchoServer:
    """A chat endpoint that echoes the Authorization header: in a completion (first calls) and
    in a 401 (later ones)."""

    def __init__(self, upper: bool = False) -> None:
        from evals.servers.http_guard import GuardedHandler, GuardedHTTPServer

        served = {"n": 0}

        class Echo(GuardedHandler):
            def do_POST(self) -> None:
                if self.read_json() is None:
                    return
                served["n"] += 1
                auth = self.headers.get("Authorization", "")
                auth = auth.upper() if upper else auth
                if served["n"] <= 2:
                    message = {"role": "assistant", "content": f"I saw {auth}"}
                    self.send_json(HTTPStatus.OK, {"choices": [{"index": 0, "message": message}]})
                else:
                    self.send_json(
                        HTTPStatus.UNAUTHORIZED,
                        {"error": {"message": f"Incorrect API key provided: {auth}"}},
                    )

        self.httpd = GuardedHTTPServer(("127.0.0.1", 0), Echo)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def secret_case(tmp: Path, base: str, upper: bool = False) -> tuple[str, str]:
    server = _EchoServer(upper)
    try:
        out = tmp / "run"
        url = base.format(port=server.port)
        done = kvarena(
            "eval", "-m", "echo", "--base-url", url, "-s", "easy", "-n", "2", "--steps", "2",
            "-c", "1", "-o", str(out), env={"OPENAI_API_KEY": KEY},
        )  # fmt: skip
        report = kvarena("report", str(out), "-o", str(tmp / "rep"))
    finally:
        server.close()
    if done.rc not in (0, 3) or report.rc != 0:
        return "crash", f"exit {done.rc} / report {report.rc}: {done.err.strip()[-120:]}"
    leaked = _leaks(tmp, done.out, done.err, report.out, report.err)
    if leaked:
        return "leak", f"key found in {', '.join(leaked)[:120]}"
    files = sum(1 for p in tmp.rglob("*") if p.is_file())
    return "clean", f"key in none of {files} written files nor the output"


@case("files and secrets", "an endpoint echoing the key")
def _secret_echo(tmp: Path) -> tuple[str, str]:
    return secret_case(tmp, "http://127.0.0.1:{port}/v1")


@case("files and secrets", "a key inside --base-url")
def _secret_url(tmp: Path) -> tuple[str, str]:
    return secret_case(tmp, "http://user:" + KEY + "@127.0.0.1:{port}/v1?api_key=" + KEY)


def _key_case(family: str, key: str, expected: str) -> CaseFn:
    def run(tmp: Path) -> Verdict:
        where = ["-s", "easy"] if family == "eval" else ["-l", "easy"]
        done = kvarena(
            family, "-m", "x", "--base-url", "http://192.0.2.1:9/v1", *where, "-n", "1",
            "-o", str(tmp / "o"), env={"OPENAI_API_KEY": key}, timeout=60,
        )  # fmt: skip
        verdict, detail = one_line_error(done, expected)
        if key[:8] in done.err or key[:8] in done.out:
            return "leak", "the refusal shows the key"
        return verdict, detail

    return run


for _family in ("eval", "context-eval"):
    case("API keys", f"{_family}: a key with non-ASCII characters", fast=True)(
        _key_case(_family, "sk-abcdéfghijklmnop", "OPENAI_API_KEY: the API key holds character")
    )
    case("API keys", f"{_family}: a key with CRLF", fast=True)(
        _key_case(_family, "sk-abcdefgh\r\nX-Evil: 1", "the API key holds a line break")
    )


@case("API keys", "an endpoint echoing the key upper-cased")
def _secret_upper(tmp: Path) -> Verdict:
    return secret_case(tmp, "http://127.0.0.1:{port}/v1", upper=True)
