"""The try-it pages, mounted under /p/<slug>/runs/ by one line in studio/urls.py. `moved_patterns`
holds the redirects from the URLs before /p/<slug>/ (docs/studio.md)."""

from django.urls import path

from studio.runs import views

urlpatterns = [
    path("new", views.try_new, name="runs-new"),
    path("<int:run_id>", views.run_detail, name="runs-detail"),
]

moved_patterns = [
    path("new", views.try_new_moved),
    path("<int:run_id>", views.run_moved),
]
