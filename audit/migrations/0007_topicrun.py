"""Topics of a book's questions (``audit.topics``): the runs that compute them, and the daily task that recomputes
every book's for the last 30 days (django-q2)."""

import django.utils.timezone
from django.db import migrations, models

SCHEDULE = "bookchat: topics of each book's questions"


def schedule_topics(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=SCHEDULE, defaults={"func": "audit.tasks.recompute_all_topics", "schedule_type": "D", "repeats": -1})


def unschedule_topics(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=SCHEDULE).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0006_section_url"),
        ("django_q", "0016_schedule_intended_date_kwarg"),
    ]

    operations = [
        migrations.CreateModel(
            name="TopicRun",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("book_slug", models.CharField(db_index=True, max_length=64, verbose_name="book")),
                ("since", models.DateTimeField()),
                ("until", models.DateTimeField()),
                ("status", models.CharField(choices=[("queued", "queued"), ("running", "running"), ("done", "done"),
                                                     ("failed", "failed")], default="queued", max_length=8)),
                ("requested_by", models.CharField(blank=True, help_text='"schedule" or the username.',
                                                  max_length=150)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("took_seconds", models.FloatField(blank=True, null=True)),
                ("questions", models.PositiveIntegerField(default=0, help_text="Questions clustered.")),
                ("unclustered", models.PositiveIntegerField(default=0, help_text="Of them, those in no topic.")),
                ("topics", models.JSONField(blank=True, default=list)),
                ("error", models.TextField(blank=True)),
            ],
            options={
                "verbose_name": "topics run",
                "ordering": ["-created_at"],
            },
        ),
        migrations.RunPython(schedule_topics, unschedule_topics),
    ]
