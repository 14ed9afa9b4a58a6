"""The review queue's pages, mounted under /review/ by one line in studio/urls.py."""

from django.urls import path

from studio.review import views

urlpatterns = [
    path("", views.queue, name="review-queue"),
    path("<int:pk>", views.item_page, name="review-item"),
    path("<int:pk>/claim", views.claim, name="review-claim"),
    path("<int:pk>/release", views.release, name="review-release"),
    path("<int:pk>/decide", views.decide_view, name="review-decide"),
    path("<int:pk>/gold", views.add_gold, name="review-gold"),
]
