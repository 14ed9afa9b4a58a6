"""The users page (staff), a project's members page, and the set-password page an
invite link opens. Who may do what: studio/accounts/members.py."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse_lazy
from django.views.decorators.http import require_POST

from studio.accounts import members
from studio.accounts.models import Role
from studio.http import StudioRequest
from studio.projects.views.common import page


def users_list(request: StudioRequest) -> HttpResponse:
    members.require_staff(request.user)
    invited: dict[str, Any] | None = None
    if request.method == "POST":
        try:
            user = members.invite(
                request.POST.get("username", ""), request.POST.get("email", ""), staff=bool(request.POST.get("staff"))
            )
        except (ValidationError, members.MemberConflict) as exc:
            text = "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
            messages.error(request, text)
            return redirect("accounts-users")
        invited = {"user": user, "link": request.build_absolute_uri(members.set_password_path(user))}
    users = User.objects.order_by("username")
    return render(request, "accounts/users.html", {"users": users, "invited": invited})


@require_POST
def user_link(request: StudioRequest, user_id: int) -> HttpResponse:
    members.require_staff(request.user)
    user = get_object_or_404(User, pk=user_id)
    invited = {"user": user, "link": request.build_absolute_uri(members.set_password_path(user))}
    return render(request, "accounts/users.html", {"users": User.objects.order_by("username"), "invited": invited})


def members_page(request: StudioRequest, slug: str) -> HttpResponse:
    project, can_manage = members.members_of(request.user, slug)
    role = project.role_of(request.user)
    context: dict[str, object] = {
        "project": project,
        "role": role,
        "can_edit": bool(role and role.can_edit),
        "active": "members",
        "can_manage": can_manage,
        "members": members.memberships(project),
        "roles": list(Role),
    }
    return page(request, "accounts/members.html", context)


@require_POST
def member_set(request: StudioRequest, slug: str) -> HttpResponse:
    """Give a user a role, or change it (the add form and each row's role select)."""
    project, _ = members.members_of(request.user, slug, manage=True)
    username = request.POST.get("username", "").strip()
    try:
        role = members.parse_role(request.POST.get("role", ""))
        user = members.addable_user(request.user, username)
        members.grant(project, user, role)
    except Http404:
        messages.error(request, members.not_addable(username))
    except (ValidationError, members.MemberConflict) as exc:
        messages.error(request, "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc))
    else:
        messages.success(request, f"{user.username} is now {role.label.lower()} of {project.slug}.")
    return redirect("accounts-members", slug=project.slug)


@require_POST
def member_remove(request: StudioRequest, slug: str) -> HttpResponse:
    project, _ = members.members_of(request.user, slug, manage=True)
    user = members.member_named(project, request.POST.get("username", "").strip())
    try:
        members.revoke(project, user)
    except members.MemberConflict as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{user.username} is no longer a member of {project.slug}.")
    return redirect("accounts-members", slug=project.slug)


class SetPasswordView(auth_views.PasswordResetConfirmView):
    """An invite (or a new link staff made): Django's reset-confirm view. The token is
    spent once the password is set (it hashes the password), so the link works once."""

    template_name = "accounts/set_password.html"
    success_url = reverse_lazy("login")

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        messages.success(self.request, "Your password is set; log in with it.")
        return response
