"""gunicorn settings; every value can be overridden from the environment."""
import gc
import multiprocessing
import os
import re
import threading
import time

from gunicorn.glogging import Logger

bind = os.environ.get("OOMDOCTOR_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("OOMDOCTOR_WORKERS", min(4, multiprocessing.cpu_count() * 2)))
threads = int(os.environ.get("OOMDOCTOR_THREADS", 2))
worker_class = "gthread"
# A request that runs longer than this is ended with its worker, which gunicorn restarts
# (the watchdog below: a gthread worker's own heartbeat goes on while a request thread is
# stuck, so gunicorn's timeout alone never ends one). The app answers 422 well before, at
# OOMDOCTOR_WORK_SECONDS; docs/hardening.md has the measured cost of a turn per MiB of log.
timeout = int(os.environ.get("OOMDOCTOR_TIMEOUT", 60))
graceful_timeout = 20
keepalive = 5
# Workers are replaced now and then, so that no slow leak can grow without bound.
max_requests = int(os.environ.get("OOMDOCTOR_MAX_REQUESTS", 2000))
max_requests_jitter = max_requests // 10
# Heartbeat files in memory, not on a disk that may stall under load.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
# Header limits; the body limit is the app's MAX_CONTENT_LENGTH (OOMDOCTOR_MAX_MESSAGE_BYTES + 64 KiB).
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
accesslog = os.environ.get("OOMDOCTOR_ACCESS_LOG", "-")
# The path without its query string and no Referer: neither can carry a token into the log.
# %(L)s is the request's time in seconds.
access_log_format = '%(h)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(B)s %(L)s "%(a)s"'

# A consultation's id is all it takes to read it on the page (and on the API without a token):
# the access log writes "/c/<id>" instead, whatever the path held there.
_CONSULTATION_ID = re.compile(r"(/c/|/consultations/)[^/?#\s]*")
_QUERY = re.compile(r"\?\S*")


class AccessLogWithoutIds(Logger):
    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        for key in ("U", "r"):
            if isinstance(atoms.get(key), str):
                atoms[key] = _CONSULTATION_ID.sub(r"\1<id>", _QUERY.sub("", atoms[key]))
        return atoms


logger_class = AccessLogWithoutIds
errorlog = "-"
loglevel = os.environ.get("OOMDOCTOR_LOG_LEVEL", "info")
# One format for gunicorn's own lines, its access lines and the app's (`oomdoctor.*`): time, level, logger.
# Without it the app's INFO lines (a refused Slack request) are dropped and its warnings print bare.
_LINE = {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s", "datefmt": "%Y-%m-%dT%H:%M:%S%z"}
logconfig_dict = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"line": _LINE},
    "handlers": {
        "stderr": {"class": "logging.StreamHandler", "formatter": "line", "stream": "ext://sys.stderr"},
        "access": ({"class": "logging.StreamHandler", "formatter": "line", "stream": "ext://sys.stdout"}
                   if accesslog in ("-", "") else
                   {"class": "logging.FileHandler", "formatter": "line", "filename": accesslog}),
    },
    "loggers": {
        "gunicorn.error": {"level": loglevel.upper(), "handlers": ["stderr"], "propagate": False},
        "gunicorn.access": {"level": "INFO", "handlers": ["access"] if accesslog else [], "propagate": False},
        "oomdoctor": {"level": loglevel.upper(), "handlers": ["stderr"], "propagate": False},
    },
    "root": {"level": "WARNING", "handlers": ["stderr"]},
}
# gunicorn 24+ opens a control socket at one path per user ($HOME/.gunicorn/gunicorn.ctl): two instances on
# one host (the scaled shape, and the tests' servers) would take it from each other, and a master stopping
# waits up to 4 s for it. Nothing here uses it; older gunicorn ignores the name.
control_socket_disable = True
# Load the knowledge base once in the master; workers fork with it. A database that cannot be
# used stops the master here, before any worker starts, with the reason in one line.
preload_app = True


def pre_fork(server, worker):
    # The preloaded app is shared with the workers until a page is written to. The collector writes to
    # every object it visits, so without this each worker copies the whole heap, on its first full
    # collection and again at exit (seconds of CPU per worker); frozen objects are never visited.
    gc.freeze()


def on_exit(server):
    # The master's heap is freed with the process: a last collection over it only delays the exit.
    gc.freeze()


# ---------------------------------------------------------------- the watchdog of each worker
# Requests in flight in this worker process: thread id -> (start, method). Not the path: it
# may hold a consultation's id (see AccessLogWithoutIds); gunicorn's own pre_request logged it.
_in_flight: dict[int, tuple[float, str]] = {}


def pre_request(worker, req):
    _in_flight[threading.get_ident()] = (time.monotonic(), req.method)


def post_request(worker, req, environ, resp):
    _in_flight.pop(threading.get_ident(), None)


def post_worker_init(worker):
    limit = worker.cfg.timeout

    def watch():
        while True:
            time.sleep(min(1.0, limit / 4))
            now = time.monotonic()
            late = [(now - start, method) for start, method in list(_in_flight.values()) if now - start > limit]
            if late:
                took, method = max(late)
                worker.log.critical("a %s request ran for %.1f s, past the %d s timeout: ending worker %d "
                                    "(gunicorn starts another)", method, took, limit, os.getpid())
                # A thread cannot be stopped from outside, and exit() would wait for it: end the process.
                os._exit(1)

    threading.Thread(target=watch, name="request-watchdog", daemon=True).start()
