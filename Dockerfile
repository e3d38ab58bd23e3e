# OOM Doctor: gunicorn serving the web page, the REST API, Slack, the MCP tools (streamable HTTP at
# /api/mcp, behind OOMDOCTOR_API_TOKEN like the REST API) and the Feishu/Lark bot, SQLite in /data.
#   docker build -t oomdoctor .
#   docker run -p 8000:8000 -v oomdoctor-data:/data -e OOMDOCTOR_API_TOKEN=... \
#     -e OOMDOCTOR_SLACK_SIGNING_SECRET=... -e OOMDOCTOR_LARK_APP_ID=... -e OOMDOCTOR_LARK_APP_SECRET=... \
#     -e OOMDOCTOR_LARK_ENCRYPT_KEY=... -e OOMDOCTOR_LARK_VERIFICATION_TOKEN=... oomdoctor
# The MCP tools over stdio, for an assistant on the same machine: docker run -i --rm oomdoctor python -m oomdoctor mcp
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    OOMDOCTOR_DATABASE=/data/oomdoctor.sqlite3 \
    OOMDOCTOR_BIND=0.0.0.0:8000

RUN groupadd --system --gid 10001 oomdoctor \
 && useradd --system --uid 10001 --gid oomdoctor --home-dir /app --shell /usr/sbin/nologin oomdoctor \
 && mkdir -p /data \
 && chown oomdoctor:oomdoctor /data

WORKDIR /app

# Dependencies first: this layer is rebuilt only when requirements.txt changes.
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

COPY oomdoctor/ oomdoctor/
COPY knowledge/ knowledge/
COPY rules/ rules/
COPY app.py gunicorn.conf.py ./

USER oomdoctor
VOLUME /data
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('OOMDOCTOR_BIND', '0.0.0.0:8000').rsplit(':', 1)[1]; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:' + port + '/healthz', timeout=4).status == 200 else 1)"]

CMD ["gunicorn", "-c", "gunicorn.conf.py", "app:app"]
