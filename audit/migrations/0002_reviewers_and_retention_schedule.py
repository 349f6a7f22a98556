"""The "Reviewers" group with only what reviewing needs, and the daily retention task (django-q2)."""

from django.db import migrations

GROUP = "Reviewers"
REVIEWER_PERMISSIONS = [
    ("audit", "auditlog", "view_auditlog"),
    ("audit", "auditlog", "change_auditlog"),  # the admin lets them change only the review fields
    ("audit", "auditlog", "view_dashboard"),
    ("audit", "reviewqueueitem", "view_reviewqueueitem"),
    ("audit", "reviewqueueitem", "change_reviewqueueitem"),
    ("chat", "feedback", "view_feedback"),
    ("ingestion", "book", "view_book"),
    ("ingestion", "document", "view_document"),
    ("ingestion", "chunk", "view_chunk"),
    ("ingestion", "indexrun", "view_indexrun"),
]
SCHEDULE = "bookchat: archive and purge old audit records"


def create_reviewers(apps, schema_editor):
    # Permissions are normally created after all migrations ran; create them now so the group can hold them.
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name=GROUP)
    for app_label, model, codename in REVIEWER_PERMISSIONS:
        permission = Permission.objects.get(content_type__app_label=app_label, content_type__model=model,
                                            codename=codename)
        group.permissions.add(permission)


def remove_reviewers(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name=GROUP).delete()


def schedule_retention(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=SCHEDULE, defaults={"func": "audit.tasks.purge_old_audit_records", "schedule_type": "D",
                                 "repeats": -1})


def unschedule_retention(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=SCHEDULE).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0001_auditlog"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("chat", "0003_api_keys_feedback_turn_responses"),
        ("ingestion", "0002_search_indexes"),
        ("django_q", "0016_schedule_intended_date_kwarg"),
    ]
    operations = [
        migrations.RunPython(create_reviewers, remove_reviewers),
        migrations.RunPython(schedule_retention, unschedule_retention),
    ]
