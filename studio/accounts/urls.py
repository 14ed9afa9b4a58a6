from django.contrib.auth.decorators import login_not_required
from django.urls import path

from studio.accounts import members_views, views

urlpatterns = [
    path("tokens/", views.tokens_list, name="tokens-list"),
    path("tokens/<int:token_id>/revoke", views.token_revoke, name="tokens-revoke"),
    path("users/", members_views.users_list, name="accounts-users"),
    path("users/<int:user_id>/link", members_views.user_link, name="accounts-user-link"),
    path("p/<slug:slug>/members/", members_views.members_page, name="accounts-members"),
    path("p/<slug:slug>/members/set", members_views.member_set, name="accounts-member-set"),
    path("p/<slug:slug>/members/remove", members_views.member_remove, name="accounts-member-remove"),
    path(
        "invite/<uidb64>/<token>/",
        login_not_required(members_views.SetPasswordView.as_view()),
        name="accounts-set-password",
    ),
]
