import os

from django.core.wsgi import get_wsgi_application

from studio.bodylimit import BodyLimit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
# A body over REQUEST_MAX_BYTES is refused before Django reads it (studio/bodylimit.py).
application = BodyLimit(get_wsgi_application())
