"""One module per Kafka API: its request and response schemas declared as data.

Each declaration is read from Apache Kafka's message specs
(``clients/src/main/resources/common/message/<Name>Request.json`` and ``...Response.json``):
field names are the snake_case of the JSON names, and versions, nullable versions, tags, tagged
versions and defaults are copied from the JSON. ``protocol.apis`` gathers them into a registry.
"""
