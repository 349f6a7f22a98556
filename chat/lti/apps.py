"""The LTI app: its own label and migrations, inside chat (it launches chat's page)."""

from django.apps import AppConfig


class LtiConfig(AppConfig):
    name = "chat.lti"
    label = "bookchat_lti"
    verbose_name = "LMS launches (LTI 1.3)"
    default_auto_field = "django.db.models.BigAutoField"
