"""Two task queues (``bookchat.base.queues``): each task worker's heartbeat names its queue, and every schedule runs
on the background queue's cluster (only its scheduler takes them)."""

from django.db import migrations, models

BACKGROUND_CLUSTER = "background"


def schedules_to_background(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(cluster__isnull=True).update(cluster=BACKGROUND_CLUSTER)


def schedules_to_default(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(cluster=BACKGROUND_CLUSTER).update(cluster=None)


class Migration(migrations.Migration):

    dependencies = [
        ('bookchat', '0002_task_workers'),
        # Every schedule made by a migration, made before this one moves it.
        ('ingestion', '0003_ingestion_jobs'),
        ('chat', '0002_purge_schedule'),
        ('audit', '0010_handoff_reviewers_and_email'),
    ]

    operations = [
        migrations.AddField(
            model_name='taskworker',
            name='queue',
            field=models.CharField(default='indexing', help_text='The task queue it works on: `indexing` or `background` (bookchat.base.queues).', max_length=32),
        ),
        migrations.RunPython(schedules_to_background, schedules_to_default),
    ]
