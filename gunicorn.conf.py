# Gunicorn reads this file when it is started from the repository's root (scripts/start,
# the Dockerfile and docker/compose.yaml all do): the access log is written without query
# strings, so a token sent as ?token= never lands in a log (studio/access_log.py).
import os

logger_class = "studio.access_log.AccessLogger"

# Threads, not sync workers: a sync worker is killed when one request outlasts `timeout`
# (30 s), and a `?wait=` request (up to PACKFORGE_SERVE_MAX_WAIT_S, 60 s) or an event
# stream (PACKFORGE_SSE_MAX_S, 300 s) does; and two sync workers would be two requests
# at a time in all. Each thread keeps its own database connection (studio/env.py).
worker_class = "gthread"
threads = int(os.environ.get("WEB_THREADS", "8"))
