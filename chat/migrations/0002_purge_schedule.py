"""Schedule the purge of expired conversations with django-q2 (every 10 minutes)."""

from django.db import migrations

NAME = "bookchat: purge expired conversations"


def create(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=NAME, defaults={"func": "chat.tasks.purge_expired_sessions", "schedule_type": "I", "minutes": 10,
                             "repeats": -1},
    )


def remove(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [("chat", "0001_conversations_and_calibration"), ("django_q", "0016_schedule_intended_date_kwarg")]

    operations = [migrations.RunPython(create, remove)]
