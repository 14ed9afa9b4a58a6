from django.urls import path

from studio.endpoints import views

urlpatterns = [
    path("", views.endpoints_list, name="endpoints-list"),
]
