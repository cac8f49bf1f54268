"""The operator's side of submission runs: the file journal (``sqlite``), the stack's journal as
the CLI lists it (``table``), and the evidence only an operator reads (``evidence``).

The rest (plan, moves, journal, the DynamoDB journal, the engine) is in the layer
(``scrape_pipeline.runs``): the submitter function runs it too.
"""
