# The permission of the admin's "Export the learner's data" and "Erase the learner's data" actions (issue 75).

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0012_auditlog_learner_alter_handoff_learner'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='auditlog',
            options={'ordering': ['-created_at', '-id'], 'permissions': [('view_dashboard', 'Can view the audit dashboard and coverage gaps'), ('manage_learner_data', "Can export and erase a learner's data")], 'verbose_name': 'answer (audit)', 'verbose_name_plural': 'answers (audit trail)'},
        ),
    ]
