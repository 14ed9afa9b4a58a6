"""The proposal pages, mounted under /p/<slug>/proposals/ by one line in studio/urls.py."""

from django.urls import path

from studio.proposals import views

urlpatterns = [
    path("", views.proposal_list, name="proposals-list"),
    path("<str:number>", views.proposal_detail, name="proposals-detail"),
]
