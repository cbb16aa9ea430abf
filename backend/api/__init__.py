"""REST API: JSON routes, documented in the OpenAPI document at /openapi.json."""
