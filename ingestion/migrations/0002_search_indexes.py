"""HNSW cosine indexes (one per common vector size) and a GIN index on the generated tsvector."""

from django.contrib.postgres.indexes import GinIndex
from django.db import migrations

from ingestion.models import INDEXED_DIMENSIONS


def hnsw(dim: int) -> migrations.RunSQL:
    name = f"chunk_embedding_{dim}_hnsw"
    return migrations.RunSQL(
        f"CREATE INDEX {name} ON ingestion_chunk USING hnsw "
        f"((embedding::vector({dim})) vector_cosine_ops) WHERE dimensions = {dim}",
        f"DROP INDEX IF EXISTS {name}",
    )


class Migration(migrations.Migration):
    dependencies = [("ingestion", "0001_initial")]

    operations = [
        migrations.AddIndex(
            model_name="chunk", index=GinIndex(fields=["search_vector"], name="chunk_search_vector_gin")
        ),
        *[hnsw(dim) for dim in INDEXED_DIMENSIONS],
    ]
