"""Why the language model failed, on an answer the book's own sentences gave instead (``audit.recording``)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0007_topicrun'),
    ]

    operations = [
        migrations.AddField(
            model_name='auditlog',
            name='generation_failure',
            field=models.CharField(blank=True, help_text="Why the language model gave no answer the reader could see (timeout, connection, copied_prompt, …), so that the book's own sentences answered instead; empty when it answered or wasn't asked.", max_length=32, verbose_name='model failure'),
        ),
        migrations.AddField(
            model_name='auditlog',
            name='generation_failure_message',
            field=models.TextField(blank=True, help_text="The failure as the reader's notice told it.", verbose_name='model failure message'),
        ),
    ]
