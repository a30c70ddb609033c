# flashviz dashboard for classrooms and servers: CPU-only PyTorch, Streamlit on port 8501, non-root.
#
#   docker build -t flashviz .
#   docker run --rm -p 8501:8501 flashviz                      # then open http://localhost:8501
#   docker run --rm -p 8501:8501 --read-only --tmpfs /tmp flashviz   # read-only root file system
#   docker build --build-arg WITH_TRITON=1 -t flashviz:triton .      # with the Triton kernel's view (+1 GB)
#
# Torch comes from PyTorch's CPU wheel index instead of PyPI's default CUDA build (several GB); its version must equal
# the pin in requirements.txt (tests/lint/test_docker.py checks both), so pip sees torch already satisfied when it installs
# the rest of requirements.txt, the same file CI installs through requirements-dev.txt.
FROM python:3.11.14-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/app

WORKDIR /app

# Dependencies first, in their own layer: editing the code does not reinstall torch. The same RUN deletes what the
# dashboard never runs, since files deleted in a later layer would still be shipped: torch's C++ test binaries
# (torch/test, torch/bin except torch_shm_manager), its C++ headers (torch/include: only for compiling extensions,
# and the image has no compiler) and the packages' own test suites (*/tests). The .pyc files stay: with a read-only
# root no bytecode can be written at run time, and compiling torch at every start would cost seconds. The last
# command imports everything the dashboard uses, so a deletion that broke an import fails the build.
#
# WITH_TRITON=1 also installs requirements-triton.txt (triton==3.9.0: a 286 MB wheel, 999 MB installed), which the
# Triton kernel view runs under Triton's interpreter; off by default, since it would nearly double the image for one
# view, which says how to install it when triton is absent (docs/deployment.md has the sizes).
ARG WITH_TRITON=0
COPY requirements.txt requirements-triton.txt ./
RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
    && pip install --no-cache-dir -r requirements.txt \
    && if [ "$WITH_TRITON" = 1 ]; then pip install --no-cache-dir -r requirements-triton.txt; fi \
    && SITE="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
    && rm -rf "$SITE/torch/test" "$SITE/torch/include" \
    && find "$SITE/torch/bin" -type f ! -name torch_shm_manager -delete \
    && find "$SITE" -depth -type d -name tests -exec rm -rf {} + \
    && python -c "import torch, torch.profiler, streamlit, plotly.graph_objects, pandas, pyarrow, altair"

# A fixed unprivileged user (-l: no lastlog entry, which would bloat the image for a high UID).
RUN useradd -l --create-home --uid 10001 --user-group flashviz

# Only what the dashboard runs: the page (app.py), the launcher, the package and the Streamlit config (XSRF on, no
# telemetry, no external-IP lookup). Owned by root and only readable by the app user, so a compromised server process
# cannot rewrite the code. Its bytecode is compiled here, for the reason torch's .pyc files stay: the app user cannot
# write __pycache__ (nor can anyone under --read-only), so without it every start would compile each module again.
# app.py and the launcher are small and read as source.
COPY app.py ./
COPY scripts/serve.py ./scripts/
COPY flashviz/ ./flashviz/
COPY .streamlit/ ./.streamlit/
RUN python -m compileall -q flashviz

# torch's profiler (every benchmark) needs a writable temporary directory. As a volume, /tmp stays writable when the
# container runs with --read-only; --tmpfs /tmp (recommended: nothing is left on disk) replaces it.
VOLUME ["/tmp"]

# Numeric, so that orchestrators (Kubernetes runAsNonRoot) can verify that it is not root.
USER 10001:10001

EXPOSE 8501

# Streamlit answers "ok" on /_stcore/health once the server is up; urllib needs no curl in the image. Docker runs the
# first check one interval after the start (--start-interval needs Docker 25 and is rejected by older builders), so
# a short interval is what makes the container healthy within seconds of the server answering. One check is a bare
# Python start (-I -S: no site-packages scan) plus urllib, about 0.1 s of CPU: some 3% of one core at this interval.
HEALTHCHECK --interval=3s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-I", "-S", "-c", "import urllib.request; urllib.request.urlopen('http://localhost:8501/_stcore/health', timeout=2)"]

# scripts/serve.py is `streamlit run app.py` with a clear error at start when no temporary directory is writable.
ENTRYPOINT ["python", "scripts/serve.py", "--server.headless=true", "--server.address=0.0.0.0", "--server.port=8501", "--browser.gatherUsageStats=false"]
