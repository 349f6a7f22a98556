"""The ways in: the REST API, the server-rendered chat page and the MCP server, and who may use them.

- ``api`` (the REST API under ``/api/v1/``), ``page`` (the chat page at ``/``), ``mcp_server`` and
  ``mcp_http`` (the tools an AI assistant calls, over stdio or ``/mcp``).
- ``asking`` (one way to ask the pipeline, for every channel), ``books`` (the books as clients list them),
  ``feedback`` (thumbs up or down).
- ``parsers`` (the one JSON body reader, DRF's parser hook); the contract: ``serializers`` (requests
  validated), ``responses`` (what comes back), ``openapi`` (what the schema says beyond the serializers),
  ``error_responses`` (a failure mapped to a status and the one JSON body; the body's schema,
  ``bookchat.base.api``, is every app's).
- who may call: ``access`` (keys, CORS, the page's session), ``keys`` (creating and revoking API keys),
  ``throttling`` (rate limits).

Channels call the pipeline (``chat.pipeline``) and map its errors; nothing below imports a channel.
"""
