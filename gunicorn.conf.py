"""gunicorn settings; every value can be overridden from the environment."""
import multiprocessing
import os

bind = os.environ.get("OOMDOCTOR_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("OOMDOCTOR_WORKERS", min(4, multiprocessing.cpu_count() * 2)))
threads = int(os.environ.get("OOMDOCTOR_THREADS", 2))
# A 16 MiB log is parsed in well under this; a hung request is killed and restarted.
timeout = int(os.environ.get("OOMDOCTOR_TIMEOUT", 60))
graceful_timeout = 20
keepalive = 5
# Header limits; the body limit is the app's MAX_CONTENT_LENGTH (OOMDOCTOR_MAX_MESSAGE_BYTES).
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
accesslog = os.environ.get("OOMDOCTOR_ACCESS_LOG", "-")
errorlog = "-"
loglevel = os.environ.get("OOMDOCTOR_LOG_LEVEL", "info")
# Load the knowledge base once in the master; workers fork with it.
preload_app = True
