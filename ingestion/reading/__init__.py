"""Reading a book: finding its pages on disk and turning each into a ``documents.ParsedDocument``.

- ``sources`` (a book's files, read safely), ``site`` and ``site_config`` (a Docusaurus site as books, from its
  own config; ``site_config_node`` runs it with node, ``site_config_static`` reads it without), ``outline`` (the
  sidebar's order).
- a page: ``parsing`` (metadata, headings, blocks), ``mdx`` (MDX/JSX to Markdown, line numbers kept), ``jsx``
  (tags, attributes and expressions read for it), ``partials`` (imported MDX inlined), ``generators`` (other
  static-site generators' syntax), ``docusaurus`` (its conventions: anchors, slugs, URLs), ``links``
  (book-relative links made section URLs), ``fences`` (which lines are code, the one fence reader).
- ``documents``: the shapes a page takes between the parser and the chunker.

It imports only ``ingestion.models`` and the project's base; indexing (``ingestion.indexing``) calls it.
"""
