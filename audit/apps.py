from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit and review"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core.signals import request_finished, request_started

        from audit import recording
        from chat.pipeline.announcements import answered, feedback_given, health_requested, search_opened

        answered.connect(recording.on_answered, dispatch_uid="audit.answered")
        feedback_given.connect(recording.on_feedback, dispatch_uid="audit.feedback")
        search_opened.connect(recording.on_search_opened, dispatch_uid="audit.search_opened")
        request_started.connect(recording.on_request_started, dispatch_uid="audit.request_started")
        request_finished.connect(recording.on_request_finished, dispatch_uid="audit.request_finished")
        health_requested.connect(recording.on_health_requested, dispatch_uid="audit.health")
