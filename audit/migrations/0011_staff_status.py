# The audit status 'staff': an answer the course staff's answer gave (issue 72).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0010_handoff_reviewers_and_email'),
    ]

    operations = [
        migrations.AlterField(
            model_name='auditlog',
            name='status',
            field=models.CharField(choices=[('answered', 'answered'), ('not_covered', 'not covered (refused)'), ('unsure', 'unsure (closest sections instead of a guess)'), ('withheld', 'withheld by the grounding check'), ('timeout', 'timed out'), ('error', 'failed'), ('searched', 'searched (passages for an assistant, no answer)'), ('staff', 'answered by the course staff (a staff answer to the same question)')], default='answered', max_length=16),
        ),
    ]
