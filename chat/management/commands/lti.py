"""``manage.py lti platform add|list|remove`` and ``manage.py lti tool-config``: LMS platforms registered from a
shell, and what an LMS administrator pastes (``chat.lti.registry``).

``platform add --issuer ISS --client-id ID --deployment-id DEP --auth-url URL --token-url URL --keyset-url URL
[--book SLUG] [--name NAME] [--trusted]`` registers a platform's deployment; ``platform list`` shows them; ``platform
remove --issuer ISS --client-id ID [--deployment-id DEP]`` removes a deployment or the whole registration.
``tool-config [--base-url URL]`` prints the login, launch, JWKS and deep-linking URLs (JSON keys ``login_url``,
``launch_url``, ``jwks_url``, ``deep_link_url``) and a Canvas developer key's JSON, under ``--base-url``, else
``BOOKCHAT_SERVER_URL``. Tool keys rotate with django-lti's own ``manage.py rotate_keys``. Human text, or one JSON
object with ``--json``. Exit status: 0 done, 2 refused (a bad URL, an empty value, an unknown book, platform or
deployment, one registered already, no base URL), 1 the database unavailable.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandParser
from django.db import InterfaceError, OperationalError

from bookchat.base.conf import setting
from bookchat.base.errors import BookchatError, RequestError, exit_command
from bookchat.base.models import StaffCommand
from chat.lti import registry
from chat.lti.launch import ensure_key
from chat.lti.views import tool_urls

ADD_FLAGS = (("issuer", "ISS", "The platform's issuer (iss), e.g. https://canvas.instructure.com."),
             ("client-id", "ID", "The client id the platform gave bookchat."),
             ("deployment-id", "DEP", "The deployment id (Canvas: the developer key's deployment)."),
             ("auth-url", "URL", "The platform's OIDC authorization (login) URL."),
             ("token-url", "URL", "The platform's access-token URL."),
             ("keyset-url", "URL", "The platform's JWKS URL."))


class Command(BaseCommand):
    help = "Register LMS platforms for LTI 1.3 launches, and print the tool's configuration."
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        parts = parser.add_subparsers(dest="part", required=True, metavar="{platform,tool-config}")
        platform = parts.add_parser("platform", help="Add, list or remove a platform's registration.")
        actions = platform.add_subparsers(dest="action", required=True, metavar="{add,list,remove}")
        add = actions.add_parser("add", help="Register a platform's deployment.")
        for flag, metavar, text in ADD_FLAGS:
            add.add_argument(f"--{flag}", required=True, metavar=metavar, help=text)
        add.add_argument("--book", metavar="SLUG", help="The book its launches open (else the deep link's pick).")
        add.add_argument("--name", default="", help="A name for the admin (default: the issuer).")
        add.add_argument("--trusted", action="store_true", help="Staff launches skip the admin's second factor.")
        listing = actions.add_parser("list", help="The registered platforms.")
        remove = actions.add_parser("remove", help="Remove a deployment, or the whole registration.")
        for flag, metavar, text in ADD_FLAGS[:2]:
            remove.add_argument(f"--{flag}", required=True, metavar=metavar, help=text)
        remove.add_argument("--deployment-id", metavar="DEP", help="Only this deployment.")
        config = parts.add_parser("tool-config", help="The URLs and Canvas JSON an LMS administrator pastes.")
        config.add_argument("--base-url", default="", help="bookchat's public URL (default: BOOKCHAT_SERVER_URL).")
        for sub in (add, listing, remove, config):
            sub.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args, **options) -> None:
        as_json = options["json"]
        try:
            if options["part"] == "tool-config":
                result, text = self._tool_config(options["base_url"])
            else:
                result, text = getattr(self, f"_{options['action']}")(options)
        except BookchatError as exc:
            exit_command(self, exc, as_json=as_json, status=2)
        except (OperationalError, InterfaceError) as exc:
            exit_command(self, exc, as_json=as_json, status=1)
        self.stdout.write(json.dumps(result, ensure_ascii=False, indent=2 if options["part"] == "tool-config"
                                     else None) if as_json else text)

    def _add(self, options: dict) -> tuple[dict, str]:
        found, created = registry.add(
            issuer=options["issuer"], client_id=options["client_id"], deployment_id=options["deployment_id"],
            auth_url=options["auth_url"], token_url=options["token_url"], keyset_url=options["keyset_url"],
            book=options["book"], name=options["name"], trusted=options["trusted"])
        StaffCommand.record(f"lti platform add --issuer {found['issuer']} --client-id {found['client_id']}",
                            "registered an LTI platform", f"deployment {options['deployment_id']}")
        what = "Registered the platform" if created else "Added a deployment to the platform"
        deployments = ", ".join(found["deployments"])
        return found, (f"{what} {found['issuer']} ({found['client_id']}): deployments {deployments}; book "
                       f"{found['book'] or '(picked by deep linking)'}.")

    def _list(self, options: dict) -> tuple[dict, str]:
        platforms = registry.listed()
        lines = [f"{p['issuer']}  client {p['client_id']}  deployments {', '.join(p['deployments']) or '-'}  "
                 f"book {p['book'] or '-'}{'  trusted' if p['trusted'] else ''}" for p in platforms]
        return {"platforms": platforms}, "\n".join(lines) or "No LTI platform is registered."

    def _remove(self, options: dict) -> tuple[dict, str]:
        said = registry.remove(issuer=options["issuer"], client_id=options["client_id"],
                               deployment_id=options["deployment_id"])
        StaffCommand.record(f"lti platform remove --issuer {options['issuer']} --client-id {options['client_id']}",
                            "removed an LTI platform", said)
        return {"removed": said}, said

    def _tool_config(self, base_url: str) -> tuple[dict, str]:
        base = (base_url or setting("SERVER_URL")).strip().rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise RequestError("give bookchat's public URL: --base-url https://chat.example.org, or set "
                               "BOOKCHAT_SERVER_URL", code="no_base_url", field="base_url")
        ensure_key()
        urls = tool_urls(base)
        result = {key: urls[key] for key in ("login_url", "launch_url", "jwks_url", "deep_link_url", "privacy_url")}
        result["canvas"] = registry.canvas_config(urls)
        lines = [f"{key.replace('_', ' '):<14} {value}" for key, value in result.items() if key != "canvas"]
        lines += ["", "Canvas developer key (Admin > Developer Keys > + LTI Key > Paste JSON):",
                  json.dumps(result["canvas"], indent=2)]
        return result, "\n".join(lines)
