"""Upload jobs (staff uploads in the admin, indexed in the background), and the django-q2 schedule that
marks jobs failed when their worker stopped reporting (every minute)."""

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

SWEEP = "bookchat: fail upload jobs whose worker stopped"


def create_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=SWEEP, defaults={"func": "ingestion.tasks.sweep_stale_jobs", "schedule_type": "I", "minutes": 1,
                              "repeats": -1},
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=SWEEP).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('ingestion', '0002_search_indexes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ('django_q', '0016_schedule_intended_date_kwarg'),
    ]

    operations = [
        migrations.CreateModel(
            name='IngestionJob',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('book_slug', models.CharField(max_length=64, validators=[django.core.validators.RegexValidator('^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$', 'A book slug is 1–64 lowercase letters, digits and inner hyphens.')])),
                ('book_title', models.CharField(blank=True, help_text='Title of a new book.', max_length=300)),
                ('files', models.JSONField(blank=True, default=list, help_text='Names of the uploaded files.')),
                ('folder', models.CharField(blank=True, help_text='Folder inside the book the files go to.', max_length=500)),
                ('prune', models.BooleanField(default=False, help_text="Remove the book's pages that are not in this upload.")),
                ('status', models.CharField(choices=[('queued', 'queued'), ('running', 'running'), ('done', 'done'), ('failed', 'failed')], db_index=True, default='queued', max_length=16)),
                ('stage', models.CharField(blank=True, max_length=200)),
                ('files_done', models.PositiveIntegerField(default=0)),
                ('files_total', models.PositiveIntegerField(default=0)),
                ('report', models.JSONField(blank=True, default=dict)),
                ('ignored', models.JSONField(blank=True, default=list, help_text='Files of the upload that are not pages.')),
                ('error', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('queued_at', models.DateTimeField(blank=True, help_text='When the job was last queued (upload or Retry).', null=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('heartbeat_at', models.DateTimeField(blank=True, help_text='Last sign of life from the worker.', null=True)),
                ('extract_seconds', models.FloatField(blank=True, help_text='Checking and unpacking the upload.', null=True)),
                ('index_seconds', models.FloatField(blank=True, help_text="The worker's run: indexing, the book's recalibration, any wait for a busy book.", null=True)),
                ('total_seconds', models.FloatField(blank=True, help_text='From the upload (or Retry) to the end, queue included.', null=True)),
                ('task_id', models.CharField(blank=True, help_text='The django-q2 task that runs the job.', max_length=64)),
                ('attempts', models.PositiveSmallIntegerField(default=0)),
                ('book', models.ForeignKey(blank=True, help_text='Set once the book exists (a new book is created by its first run).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='ingestion_jobs', to='ingestion.book')),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('index_run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='ingestion.indexrun')),
            ],
            options={
                'verbose_name': 'upload',
                'verbose_name_plural': 'uploads',
                'ordering': ['-created_at'],
                'indexes': [models.Index(fields=['status', 'heartbeat_at'], name='ingestionjob_status_heartbeat')],
            },
        ),
        migrations.RunPython(create_schedule, remove_schedule),
    ]
