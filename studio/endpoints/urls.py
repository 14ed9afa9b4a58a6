from django.urls import path

from studio.endpoints import views

urlpatterns = [
    path("", views.endpoints_list, name="endpoints-list"),
    path("new", views.endpoint_create, name="endpoints-create"),
    path("tools", views.tools_list, name="endpoints-tools"),
    path("<int:endpoint_id>/edit", views.endpoint_edit, name="endpoints-edit"),
    path("<int:endpoint_id>/delete", views.endpoint_delete, name="endpoints-delete"),
    path("<int:endpoint_id>/check", views.endpoint_check, name="endpoints-check"),
]
