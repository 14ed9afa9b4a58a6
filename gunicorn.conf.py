# Gunicorn reads this file when it is started from the repository's root (scripts/start,
# the Dockerfile and docker/compose.yaml all do): the access log is written without query
# strings, so a token sent as ?token= never lands in a log (studio/access_log.py).
logger_class = "studio.access_log.AccessLogger"
