"""Reviewers answer hand-offs and look after staff answers (view and change both; nobody adds or deletes them in the
admin), and the schedule that e-mails a book's reviewers its new hand-offs (audit.tasks.email_new_handoffs, every
minute; the task itself sends a book's e-mail at most once per BOOKCHAT_HANDOFF_EMAIL_MINUTES)."""

from django.db import migrations

GROUP = "Reviewers"
PERMISSIONS = [
    ("audit", "handoff", "view_handoff"),
    ("audit", "handoff", "change_handoff"),
    ("chat", "staffanswer", "view_staffanswer"),
    ("chat", "staffanswer", "change_staffanswer"),
]
SCHEDULE = "bookchat: e-mail reviewers their books' new hand-offs"


def grant(apps, schema_editor):
    # Permissions are normally created after all migrations ran; create them now so the group can hold them.
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name=GROUP)
    for app_label, model, codename in PERMISSIONS:
        group.permissions.add(Permission.objects.get(content_type__app_label=app_label, content_type__model=model,
                                                     codename=codename))


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    group = apps.get_model("auth", "Group").objects.filter(name=GROUP).first()
    if group is not None:
        group.permissions.remove(*Permission.objects.filter(codename__in=[c for _, _, c in PERMISSIONS]))


def schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=SCHEDULE, defaults={"func": "audit.tasks.email_new_handoffs", "schedule_type": "I", "minutes": 1,
                                 "repeats": -1})


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=SCHEDULE).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0009_handoffs"),
        ("chat", "0009_staff_answers"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("django_q", "0016_schedule_intended_date_kwarg"),
    ]
    operations = [
        migrations.RunPython(grant, revoke),
        migrations.RunPython(schedule, unschedule),
    ]
