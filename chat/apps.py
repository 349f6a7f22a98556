from django.apps import AppConfig


class ChatConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "chat"
    verbose_name = "Chat"

    def ready(self) -> None:
        from chat import receivers  # noqa: F401  (the signal receivers)
        from chat.channels import openapi  # noqa: F401  (the schema's auth extensions)
