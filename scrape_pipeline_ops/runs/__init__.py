"""The operator's side of submission runs: the file journal (``sqlite``).

The rest (plan, moves, journal, the DynamoDB journal, the engine) is in the layer
(``scrape_pipeline.runs``): the submitter function runs it too.
"""
