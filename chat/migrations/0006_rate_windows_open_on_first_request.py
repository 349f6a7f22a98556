"""Rate windows open with a bucket's first request (``chat.channels.throttling``): a counter keeps when its window
ends instead of the whole minute or day it started on. Counters in flight at the upgrade start afresh."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0005_sentence_vectors'),
    ]

    operations = [
        migrations.RemoveField(model_name='ratecounter', name='window_start'),
        migrations.AddField(
            model_name='ratecounter',
            name='window_ends',
            field=models.FloatField(default=0, help_text='When the window that the first counted request opened ends, '
                                                         'in Unix seconds.'),
            preserve_default=False,
        ),
    ]
