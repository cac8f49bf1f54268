"""The root of every error the runtime raises on purpose, and the tree below it.

    PipelineError                        scrape_pipeline.errors
    ├── SettingsError (ValueError)       settings: an environment variable is missing or bad
    ├── AWSError                         aws_errors: a botocore failure, translated there only
    │   ├── AWSUnavailableError          the call failed: retry later (the Lambdas: 503, retry)
    │   │   └── UnsentError              bulk_send: messages of a batch send not sent; ``unsent``
    │   └── AWSConfigurationError        ops.aws_translate: no region or no credentials (exit 2)
    ├── GeonodeError                     geonode.errors: the API client's own tree
    ├── SignatureError                   signatures: the delivery is not authentically signed
    │   ├── SignatureMismatchError       no configured secret signed it (maybe just rotated)
    │   ├── NoValidSecretError           no usable secret is configured: ours to fix (503)
    │   └── StaleDeliveryError           freshness: signed, but stamped outside the window
    ├── SecretBundleError (ValueError)   signatures: the stored secret bundle is malformed
    ├── PayloadError (ValueError)        payload: not a usable job notification (400)
    ├── LedgerError                      ledger.errors: the ledger's own errors
    │   ├── LeaseLostError               the caller no longer holds the job's lease
    │   └── ConditionFailedError         a conditional write refused; carries the old item
    ├── OutOfTimeError                   attempt: a batch's next page would not fit (checkpointed)
    ├── ListingCatchingUpError           listing_lag: a lost POST's job may not be listed yet
    ├── BadPlanError (ValueError)        runs.plan: a run that cannot be planned (name, URLs, size)
    ├── BadRequestError                  runs.request: a run file or message the submitter drops
    ├── JournalError                     runs.journal: the run journal's own errors
    │   ├── RunMismatchError             the run's name was planned from other URLs or options
    │   └── MoveRefusedError             an entry was not where the move starts; ``entry``
    └── RetryLaterError                  batch_run: a record reported failed, back after a delay

Each class is defined beside the code that raises it (a test pins this tree); context rides on
attributes, never only in the message, so callers branch on the class, never on its text.
"""

from __future__ import annotations


class PipelineError(Exception):
    """Base of every error the runtime package raises on purpose (module docstring)."""
