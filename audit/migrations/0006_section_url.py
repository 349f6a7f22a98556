"""Each audit row says which section its question landed on (``audit.landing``); rows written before are filled in
by the same rule in SQL. An index on (book, time) serves the map of where students struggle."""

from django.db import migrations, models

# audit.landing.landed_section as of this migration: first cited source, else first source, else first suggestion.
FILL = r"""
UPDATE audit_auditlog a SET section_url = regexp_replace(COALESCE(
    (SELECT s ->> 'url'
       FROM jsonb_array_elements(CASE jsonb_typeof(a.sources) WHEN 'array' THEN a.sources ELSE '[]'::jsonb END)
            WITH ORDINALITY AS e(s, n)
      WHERE jsonb_typeof(s) = 'object' AND s -> 'cited' = 'true'::jsonb ORDER BY n LIMIT 1),
    CASE jsonb_typeof(a.sources) WHEN 'array' THEN a.sources -> 0 ->> 'url' END,
    CASE jsonb_typeof(a.suggestions) WHEN 'array' THEN a.suggestions -> 0 ->> 'url' END,
    ''), '#?:~:text=.*$', '')
"""


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0005_llm_usage"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditlog",
            name="section_url",
            field=models.TextField(blank=True, default="", help_text="The link of the section the question landed on "
                                   "(audit.landing), counted by the map of where students struggle.",
                                   verbose_name="landed on"),
            preserve_default=False,
        ),
        migrations.RunSQL(FILL, migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="auditlog",
            index=models.Index(fields=["book_slug", "created_at"], name="audit_book_created"),
        ),
    ]
