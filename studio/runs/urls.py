from django.urls import path

from studio.runs import views

urlpatterns = [
    path("new", views.try_new, name="runs-new"),
    path("<int:run_id>", views.run_detail, name="runs-detail"),
]
