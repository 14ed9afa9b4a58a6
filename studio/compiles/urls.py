"""The compile pages, mounted under /p/<slug>/compiles/ by one line in studio/urls.py."""

from django.urls import path

from studio.compiles import views

urlpatterns = [
    path("", views.compiles_list, name="compiles-list"),
    path("<int:compile_id>/", views.compile_detail, name="compiles-detail"),
    path("<int:compile_id>/cancel", views.compile_cancel, name="compiles-cancel"),
    path("<int:compile_id>/adopt", views.compile_adopt, name="compiles-adopt-judged"),
    path("<int:compile_id>/attempts/<int:number>/", views.attempt_detail, name="compiles-attempt"),
    path("<int:compile_id>/attempts/<int:number>/adopt", views.attempt_adopt, name="compiles-adopt"),
]
