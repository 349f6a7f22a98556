"""A book's language (``ingestion.languages``), and text search that cuts Chinese and Japanese into character pairs.

``bookchat_cjk`` is a copy of ``simple``; ``bookchat_to_tsvector(config, text)`` is ``to_tsvector`` for every
other configuration (an English book's search vectors are the same as before, byte for byte) and pairs a
``bookchat_cjk`` book's runs of ideographs and kana first. The functions name their schema, so that a restore
(which empties ``search_path``) recomputes the generated column the same way."""

import django.contrib.postgres.search
import django.db.models.functions
from django.contrib.postgres.indexes import GinIndex
from django.db import migrations, models

import ingestion.models

CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"

FUNCTIONS = r"""
CREATE TEXT SEARCH CONFIGURATION {schema}.bookchat_cjk (COPY = pg_catalog.simple);
CREATE FUNCTION {schema}.bookchat_cjk_pairs(t text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $f$
  SELECT coalesce(string_agg(CASE
      WHEN m.parts[1] !~ '^[{cjk}]' OR length(m.parts[1]) = 1 THEN m.parts[1]
      ELSE (SELECT string_agg(substr(m.parts[1], i, 2), ' ' ORDER BY i)
              FROM generate_series(1, length(m.parts[1]) - 1) AS i)
    END, ' ' ORDER BY m.n), '')
  FROM regexp_matches(t, '[{cjk}]+|[^{cjk}]+', 'g') WITH ORDINALITY AS m(parts, n)
$f$;
CREATE FUNCTION {schema}.bookchat_to_tsvector(config regconfig, t text) RETURNS tsvector
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $f$
  SELECT pg_catalog.to_tsvector(config, CASE WHEN config = '{schema}.bookchat_cjk'::regconfig
                                             THEN {schema}.bookchat_cjk_pairs(t) ELSE t END)
$f$;
"""

DROP = """
DROP FUNCTION IF EXISTS bookchat_to_tsvector(regconfig, text);
DROP FUNCTION IF EXISTS bookchat_cjk_pairs(text);
DROP TEXT SEARCH CONFIGURATION IF EXISTS bookchat_cjk;
"""


def create_functions(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT quote_ident(current_schema())")
        schema = cursor.fetchone()[0]
        cursor.execute(FUNCTIONS.format(schema=schema, cjk=CJK))


def drop_functions(apps, schema_editor):
    schema_editor.execute(DROP)


def languages_from_locales(apps, schema_editor):
    """A Docusaurus edition's language is its locale's."""
    from ingestion.languages import language_or_default

    Book = apps.get_model("ingestion", "Book")
    for book in Book.objects.exclude(locale=""):
        Book.objects.filter(pk=book.pk).update(language=language_or_default(book.locale))


class Migration(migrations.Migration):

    dependencies = [
        ('ingestion', '0012_default_book'),
    ]

    operations = [
        migrations.RunPython(create_functions, drop_functions),
        migrations.AddField(
            model_name='book',
            name='language',
            field=models.CharField(db_default='en', default='en', help_text="What its pages are written in: a BCP 47 base tag (en, es, zh, pt). Set by --language, else the site's config (theme.language, book.toml's language, the Docusaurus locale); it picks the text search.", max_length=16),
        ),
        migrations.RunPython(languages_from_locales, migrations.RunPython.noop),
        migrations.AddField(
            model_name='ingestionjob',
            name='language',
            field=models.CharField(blank=True, help_text="The book's language as the upload or publish gave it (a BCP 47 base tag); empty: from its config, else as it was.", max_length=16),
        ),
        migrations.AlterField(
            model_name='book',
            name='search_config',
            field=models.CharField(default='english', help_text='PostgreSQL text-search configuration of its passages (from its language).', max_length=64),
        ),
        # A generated column can't be altered: dropped (with its index) and added again, which recomputes it.
        migrations.RemoveIndex(model_name="chunk", name="chunk_search_vector_gin"),
        migrations.RemoveField(model_name="chunk", name="search_vector"),
        migrations.AddField(
            model_name='chunk',
            name='search_vector',
            field=models.GeneratedField(db_persist=True, expression=django.contrib.postgres.search.CombinedSearchVector(models.Func(ingestion.models.BookTsvector(models.F('search_config'), django.db.models.functions.Coalesce(models.F('heading_path'), models.Value(''))), models.Value('A'), function='setweight', output_field=django.contrib.postgres.search.SearchVectorField()), '||', models.Func(ingestion.models.BookTsvector(models.F('search_config'), django.db.models.functions.Coalesce(models.F('text'), models.Value(''))), models.Value('B'), function='setweight', output_field=django.contrib.postgres.search.SearchVectorField()), django.contrib.postgres.search.SearchConfig(models.F('search_config'))), output_field=django.contrib.postgres.search.SearchVectorField()),
        ),
        migrations.AddIndex(
            model_name="chunk", index=GinIndex(fields=["search_vector"], name="chunk_search_vector_gin")
        ),
    ]
