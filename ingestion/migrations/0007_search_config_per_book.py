import django.contrib.postgres.search
from django.contrib.postgres.indexes import GinIndex
import ingestion.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('ingestion', '0006_book_editions'),
    ]

    operations = [
        migrations.AddField(
            model_name='book',
            name='search_config',
            field=models.CharField(default='english', help_text='PostgreSQL text-search configuration of its passages (from the locale).', max_length=64),
        ),
        migrations.AddField(
            model_name='chunk',
            name='search_config',
            field=ingestion.models.RegConfigField(default='english', help_text="The book's, when stored.", max_length=64),
        ),
        # A generated column can't be altered: dropped (with its index) and added again, which recomputes it.
        migrations.RemoveIndex(model_name="chunk", name="chunk_search_vector_gin"),
        migrations.RemoveField(model_name="chunk", name="search_vector"),
        migrations.AddField(
            model_name='chunk',
            name='search_vector',
            field=models.GeneratedField(db_persist=True, expression=django.contrib.postgres.search.CombinedSearchVector(django.contrib.postgres.search.SearchVector('heading_path', config=models.F('search_config'), weight='A'), '||', django.contrib.postgres.search.SearchVector('text', config=models.F('search_config'), weight='B'), django.contrib.postgres.search.SearchConfig(models.F('search_config'))), output_field=django.contrib.postgres.search.SearchVectorField()),
        ),
        migrations.AddIndex(
            model_name="chunk", index=GinIndex(fields=["search_vector"], name="chunk_search_vector_gin")
        ),
    ]
