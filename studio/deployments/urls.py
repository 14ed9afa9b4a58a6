"""The deployment pages, mounted under /p/<slug>/deployments/ by one line in studio/urls.py."""

from django.urls import path

from studio.deployments import run_page, views

urlpatterns = [
    path("", views.deployment_list, name="deployments-list"),
    path("<slug:name>", views.deployment_detail, name="deployments-detail"),
    path("<slug:name>/runs/<str:run_id>", run_page.served_run_page, name="deployments-run"),
]
