# flashviz dashboard for classrooms and servers: CPU-only PyTorch, Streamlit on port 8501, non-root.
#
#   docker build -t flashviz .
#   docker run --rm -p 8501:8501 flashviz          # then open http://localhost:8501
#
# Torch comes from PyTorch's CPU wheel index (~200 MB) instead of PyPI's default CUDA build (several GB); its
# version must equal the pin in requirements.txt (tests/test_docker.py checks both), so pip sees torch already
# satisfied when it installs the rest of requirements.txt, the same file CI installs through requirements-dev.txt.
FROM python:3.11.14-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/app

WORKDIR /app

# Dependencies first, in their own layers: editing the code does not reinstall torch.
COPY requirements.txt ./
RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
    && pip install --no-cache-dir -r requirements.txt

# A fixed unprivileged user (-l: no lastlog entry, which would bloat the image for a high UID).
RUN useradd -l --create-home --uid 10001 --user-group flashviz

# Only what the dashboard runs: the entry point, the package and the Streamlit config (XSRF on, no telemetry).
# Owned by root and only readable by the app user, so a compromised server process cannot rewrite the code.
COPY app.py ./
COPY flashviz/ ./flashviz/
COPY .streamlit/ ./.streamlit/

# Numeric, so that orchestrators (Kubernetes runAsNonRoot) can verify that it is not root.
USER 10001:10001

EXPOSE 8501

# Streamlit answers "ok" on /_stcore/health once the server is up; urllib needs no curl in the image.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://localhost:8501/_stcore/health', timeout=4)"]

ENTRYPOINT ["streamlit", "run", "app.py", "--server.headless=true", "--server.address=0.0.0.0", "--server.port=8501", "--browser.gatherUsageStats=false"]
