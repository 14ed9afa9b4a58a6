from django.urls import path

from studio.accounts import views

urlpatterns = [
    path("tokens/", views.tokens_list, name="tokens-list"),
    path("tokens/<int:token_id>/revoke", views.token_revoke, name="tokens-revoke"),
]
