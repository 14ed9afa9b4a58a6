"""The deployment pages, mounted under /p/<slug>/deployments/ by one line in studio/urls.py."""

from django.urls import path

from studio.deployments import views

urlpatterns = [
    path("", views.deployment_list, name="deployments-list"),
    path("<slug:name>", views.deployment_detail, name="deployments-detail"),
]
