"""The operator CLI, ``scrape-pipeline`` (entry point: ``scrape_pipeline_ops.cli.main:main``).

    submit [FILE|-] --mode sync|async|batch|crawl     submit.py
    poll [IDS...] --from FILE|- --out DIR|s3://...    poll.py
    webhooks setup|register|list|delete|enable|disable|rotate-secret    webhooks.py
    secrets put-api-key                               secrets.py
    doctor                                            doctor.py
    deliveries list|replay                            deliveries.py
    reconcile | status | dlq inspect|redrive          ops.py
    local up|demo                                     local.py
    audit --since T [--until T] [--run NAME]          audit.py
    results get JOB_ID|URL [--out DIR]                results.py

Settings (API key, base URL, AWS resources) are found in config.py, printing is output.py.
It lives outside the Lambda layer, so the handlers never ship or pay for it; rich and the
local stack are imported only when a command needs them.
"""
