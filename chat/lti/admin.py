"""The admin's side of LTI: bookchat's settings of each registered platform, beside django-lti's registrations,
deployments and keys (which django-lti's own admin shows)."""

from django.contrib import admin

from chat.lti.models import DeploymentBook, LtiPlatform


@admin.register(LtiPlatform)
class LtiPlatformAdmin(admin.ModelAdmin):
    list_display = ["registration", "book", "trusted", "keep_identity"]
    list_select_related = ["registration", "book"]
    fields = ["registration", "book", "trusted", "keep_identity", "frame_origins"]


@admin.register(DeploymentBook)
class DeploymentBookAdmin(admin.ModelAdmin):
    """A deployment's own book (a course's, where each course is a deployment of its own)."""

    list_display = ["deployment", "book"]
    list_select_related = ["deployment", "book"]
