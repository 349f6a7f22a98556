"""``manage.py ensure_admin``: create the admin login when no superuser exists yet (password printed once)."""

from __future__ import annotations

import json
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from bookchat.base.conf import setting


class Command(BaseCommand):
    help = "Create an admin login if no superuser exists (BOOKCHAT_ADMIN_USER / BOOKCHAT_ADMIN_PASSWORD)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--json", action="store_true", help="Print the outcome as JSON.")

    def handle(self, *args, **options) -> None:
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            result = {"created": False}
            message = "An admin login already exists."
        else:
            username = setting("ADMIN_USER")
            given = setting("ADMIN_PASSWORD")
            password = given or secrets.token_urlsafe(12)
            User.objects.create_superuser(username=username, email="", password=password)
            result = {"created": True, "username": username, "password": None if given else password}
            message = (f"Created the admin login {username!r} with the password from BOOKCHAT_ADMIN_PASSWORD."
                       if given else
                       f"Created the admin login {username!r} with password {password} — shown once, note it now.")
        self.stdout.write(json.dumps(result) if options["json"] else message)
